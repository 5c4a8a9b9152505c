package subscription

import (
	"context"
	"crypto"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// bucket holds one record per application, keyed by its lower-case name.
const bucket = "subscriptions"

// schema is the version of the stored records.
const schema = 1

// record is a stored subscription.
type record struct {
	store.Versioned
	ID          int    `json:"id"`
	Application string `json:"application"`
	ForName     string `json:"for_name,omitempty"`
	ForAddress  string `json:"for_address,omitempty"`
	ForEmail    string `json:"for_email,omitempty"`
	ForPhone    string `json:"for_phone,omitempty"`
	ForURL      string `json:"for_url,omitempty"`
	ForComment  string `json:"for_comment,omitempty"`
	ByName      string `json:"by_name,omitempty"`
	ByEmail     string `json:"by_email,omitempty"`
	ByAddress   string `json:"by_address,omitempty"`
	ByPhone     string `json:"by_phone,omitempty"`
	ByURL       string `json:"by_url,omitempty"`
	DateFrom    string `json:"date_from"`
	DateTill    string `json:"date_till"`
	NumUsers    *int   `json:"num_users,omitempty"`
	NumTokens   *int   `json:"num_tokens,omitempty"`
	NumClients  *int   `json:"num_clients,omitempty"`
	Level       string `json:"level,omitempty"`
	Signature   string `json:"signature"`
}

func toRecord(s Subscription) record {
	return record{Versioned: store.Versioned{Schema: schema}, ID: s.ID, Application: s.Application,
		ForName: s.ForName, ForAddress: s.ForAddress, ForEmail: s.ForEmail, ForPhone: s.ForPhone,
		ForURL: s.ForURL, ForComment: s.ForComment, ByName: s.ByName, ByEmail: s.ByEmail,
		ByAddress: s.ByAddress, ByPhone: s.ByPhone, ByURL: s.ByURL,
		DateFrom: s.DateFrom.UTC().Format(DateFormat), DateTill: s.DateTill.UTC().Format(DateFormat),
		NumUsers: s.NumUsers, NumTokens: s.NumTokens, NumClients: s.NumClients, Level: s.Level, Signature: s.Signature}
}

func (r record) subscription() Subscription {
	from, _ := time.Parse(DateFormat, r.DateFrom)
	till, _ := time.Parse(DateFormat, r.DateTill)
	return Subscription{ID: r.ID, Application: r.Application,
		ForName: r.ForName, ForAddress: r.ForAddress, ForEmail: r.ForEmail, ForPhone: r.ForPhone,
		ForURL: r.ForURL, ForComment: r.ForComment, ByName: r.ByName, ByEmail: r.ByEmail,
		ByAddress: r.ByAddress, ByPhone: r.ByPhone, ByURL: r.ByURL, DateFrom: from, DateTill: till,
		NumUsers: r.NumUsers, NumTokens: r.NumTokens, NumClients: r.NumClients, Level: r.Level, Signature: r.Signature}
}

// Config configures a Service.
type Config struct {
	Store store.Store
	// Key verifies uploaded files (see CheckKey); nil refuses every
	// upload.
	Key crypto.PublicKey
}

// Service stores the subscriptions.
type Service struct {
	st  store.Store
	key crypto.PublicKey
}

// New returns the subscription store on cfg.Store.
func New(cfg Config) *Service { return &Service{st: cfg.Store, key: cfg.Key} }

// HasKey says whether uploads can be verified.
func (s *Service) HasKey() bool { return s.key != nil }

// rowKey is the store key of application's row.
func rowKey(application string) []byte { return []byte(strings.ToLower(application)) }

// Add parses the subscription file data, verifies its signature and
// stores it, replacing the row of the same application (which keeps its
// id). Each of also runs in the same transaction after the write. A file
// that is not valid or not signed by the configured key is refused with
// a 400 error and nothing is stored.
func (s *Service) Add(ctx context.Context, data []byte, also ...func(store.Tx) error) (Subscription, error) {
	if s.key == nil {
		return Subscription{}, ErrNoKey
	}
	sub, err := Parse(data)
	if err != nil {
		return Subscription{}, err
	}
	if err := Verify(sub, s.key); err != nil {
		return Subscription{}, err
	}
	err = s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		key := rowKey(sub.Application)
		var old record
		switch err := store.GetJSON(b, key, &old); {
		case err == nil:
			sub.ID = old.ID
		case errors.Is(err, store.ErrNotFound):
			n, err := b.NextSequence()
			if err != nil {
				return err
			}
			sub.ID = int(n)
		default:
			return err
		}
		if err := store.PutJSON(b, key, toRecord(sub)); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return Subscription{}, err
	}
	return sub, nil
}

// List returns the stored subscriptions ordered by application, or only
// those of application (compared without case) when it is not "".
func (s *Service) List(ctx context.Context, application string) ([]Subscription, error) {
	var out []Subscription
	err := s.st.View(ctx, func(tx store.Tx) error {
		out = []Subscription{}
		return tx.Bucket(bucket).ForEach(nil, func(k, v []byte) error {
			var rec record
			if err := store.GetJSON(tx.Bucket(bucket), k, &rec); err != nil {
				return err
			}
			if application == "" || strings.EqualFold(rec.Application, application) {
				out = append(out, rec.subscription())
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Subscription) int { return strings.Compare(a.Application, b.Application) })
	return out, nil
}

// Delete removes the subscription of application and returns its id, or
// -1 when there is none (then nothing is written and also does not run).
func (s *Service) Delete(ctx context.Context, application string, also ...func(store.Tx) error) (int, error) {
	if application == "" {
		return 0, apierr.MissingParameter("application")
	}
	id := -1
	err := s.st.Update(ctx, func(tx store.Tx) error {
		id = -1
		b := tx.Bucket(bucket)
		var rec record
		switch err := store.GetJSON(b, rowKey(application), &rec); {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		if err := b.Delete(rowKey(application)); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		id = rec.ID
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return 0, err
	}
	return id, nil
}
