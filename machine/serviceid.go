package machine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// serviceIDBucket holds one record per service ID, keyed by its name.
const serviceIDBucket = "serviceids"

// serviceIDSchema is the version of the stored service ID records.
const serviceIDSchema = 1

// maxServiceIDName bounds a service ID's name and description (the
// column sizes of privacyIDEA).
const (
	maxServiceIDName        = 255
	maxServiceIDDescription = 2000
)

// ErrServiceIDNotFound is the answer for an unknown service ID.
var ErrServiceIDNotFound = apierr.New(apierr.ResourceNotFound, "The requested Serviceid could not be found.")

// ServiceID names a group of machines that share machine tokens (all the
// web servers of one service, say), so a token is attached to the service
// instead of to each machine.
type ServiceID struct {
	ID          int
	Name        string
	Description string
}

type serviceIDRecord struct {
	store.Versioned
	ID          int    `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
}

// ServiceIDs stores the service IDs.
type ServiceIDs struct {
	st store.Store
}

// NewServiceIDs returns the service ID store on st.
func NewServiceIDs(st store.Store) *ServiceIDs { return &ServiceIDs{st: st} }

func checkServiceIDName(name string) error {
	if strings.TrimSpace(name) == "" {
		return apierr.MissingParameter("name")
	}
	if len(name) > maxServiceIDName || !utf8.ValidString(name) || strings.ContainsAny(name, "/\x00") {
		return apierr.Newf(apierr.Parameter, "The service ID name must be valid text of at most %d bytes without '/'.", maxServiceIDName)
	}
	return nil
}

// Set creates the service ID name or changes its description, and returns
// its id. Each of also runs in the same transaction after the write.
func (s *ServiceIDs) Set(ctx context.Context, name, description string, also ...func(store.Tx) error) (int, error) {
	if err := checkServiceIDName(name); err != nil {
		return 0, err
	}
	if len(description) > maxServiceIDDescription {
		return 0, apierr.Newf(apierr.Parameter, "The description must be at most %d bytes.", maxServiceIDDescription)
	}
	var id int
	err := s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(serviceIDBucket)
		var rec serviceIDRecord
		switch err := store.GetJSON(b, []byte(name), &rec); {
		case errors.Is(err, store.ErrNotFound):
			n, err := b.NextSequence()
			if err != nil {
				return err
			}
			rec = serviceIDRecord{ID: int(n), Name: name}
		case err != nil:
			return err
		}
		rec.Schema = serviceIDSchema
		rec.Description = description
		if err := store.PutJSON(b, []byte(name), rec); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		id = rec.ID
		return runAlso(tx, also)
	})
	return id, err
}

// List returns the service IDs ordered by name.
func (s *ServiceIDs) List(ctx context.Context) ([]ServiceID, error) {
	out := []ServiceID{}
	err := s.st.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		return tx.Bucket(serviceIDBucket).ForEach(nil, func(k, v []byte) error {
			var rec serviceIDRecord
			if err := store.GetJSON(tx.Bucket(serviceIDBucket), k, &rec); err != nil {
				return err
			}
			out = append(out, ServiceID{ID: rec.ID, Name: rec.Name, Description: rec.Description})
			return nil
		})
	})
	slices.SortFunc(out, func(a, b ServiceID) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// Get returns the service ID name; ErrServiceIDNotFound when unknown.
func (s *ServiceIDs) Get(ctx context.Context, name string) (ServiceID, error) {
	var rec serviceIDRecord
	err := s.st.View(ctx, func(tx store.Tx) error {
		return store.GetJSON(tx.Bucket(serviceIDBucket), []byte(name), &rec)
	})
	if errors.Is(err, store.ErrNotFound) || (err == nil && rec.Name == "") {
		return ServiceID{}, ErrServiceIDNotFound
	}
	if err != nil {
		return ServiceID{}, err
	}
	return ServiceID{ID: rec.ID, Name: rec.Name, Description: rec.Description}, nil
}

// Names lists the names of the service IDs (the ssh application offers
// them as the values of its service_id option).
func (s *ServiceIDs) Names(ctx context.Context) ([]string, error) {
	list, err := s.List(ctx)
	names := make([]string, 0, len(list))
	for _, sid := range list {
		names = append(names, sid.Name)
	}
	return names, err
}

// Delete removes the service ID name and returns its id;
// ErrServiceIDNotFound when unknown. Machine tokens that name it keep
// their service_id option (privacyIDEA checks no use either).
func (s *ServiceIDs) Delete(ctx context.Context, name string, also ...func(store.Tx) error) (int, error) {
	var id int
	err := s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(serviceIDBucket)
		var rec serviceIDRecord
		if err := store.GetJSON(b, []byte(name), &rec); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return ErrServiceIDNotFound
			}
			return err
		}
		if err := b.Delete([]byte(name)); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		id = rec.ID
		return runAlso(tx, also)
	})
	return id, err
}

// runAlso runs the hooks a write hands in (the audit entry).
func runAlso(tx store.Tx, also []func(store.Tx) error) error {
	for _, fn := range also {
		if err := fn(tx); err != nil {
			return err
		}
	}
	return nil
}
