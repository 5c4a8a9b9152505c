package resolver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/store"
)

// bucket holds one definition per resolver, keyed by the lower-cased name.
const bucket = "resolvers"

const schema = 1

var nameRe = regexp.MustCompile(`^[A-Za-z0-9_\-.]+$`)

// Errors of the service.
var (
	ErrBadName  = apierr.New(apierr.Parameter, "non conformant characters in the name: only letters, digits, '_', '-' and '.' are allowed")
	ErrNotFound = apierr.New(apierr.ResourceNotFound, "The requested resolver could not be found.")
)

// ValidName reports whether name can name a resolver: letters, digits,
// '_', '-' and '.', at most 128, and not only dots.
func ValidName(name string) bool {
	return nameRe.MatchString(name) && len(name) <= 128 && strings.Trim(name, ".") != ""
}

// Def is a resolver definition as reads show it: secrets censored.
type Def struct {
	ID         int
	Name       string
	Type       string
	Data       map[string]string
	CensorKeys []string
}

type value struct {
	V      string    `json:"v,omitempty"`
	Sealed []byte    `json:"sealed,omitempty"`
	Type   ParamType `json:"type,omitempty"`
	Desc   string    `json:"desc,omitempty"`
}

type record struct {
	store.Versioned
	ID   int              `json:"id"`
	Name string           `json:"name"`
	Type string           `json:"type"`
	Data map[string]value `json:"data"`
	Rev  uint64           `json:"rev"`
}

// UsageCheck reports, inside a transaction, the realm that still contains
// a resolver (the realm package provides it).
type UsageCheck func(tx store.Tx, resolver string) (realm string, used bool, err error)

// Sealer seals and opens the secrets this package stores (AES-256-GCM with
// additional data binding each ciphertext to its record). The root passes
// its key set; the interface keeps the internal implementation out of this
// package's API.
type Sealer interface {
	Seal(plaintext []byte, ad ...string) ([]byte, error)
	Open(ciphertext []byte, ad ...string) ([]byte, error)
}

var _ Sealer = (*secret.Sealer)(nil)

// Service manages resolver definitions and their live instances.
type Service struct {
	st     store.Store
	sealer Sealer
	types  Registry
	log    zerolog.Logger
	now    func() time.Time
	usage  UsageCheck
	dial   *netguard.Policy

	mu        sync.Mutex
	instances map[string]*Instance
	// live maps a resolver name to its instance at the current
	// configuration revision, so that a lookup need not decode the record.
	live store.RevCache[*Instance]

	healthMu sync.Mutex
	health   healthCache
}

// New returns the service.
func New(st store.Store, sealer Sealer, types Registry, log zerolog.Logger, now func() time.Time) *Service {
	return &Service{
		st: st, sealer: sealer, types: types, now: now,
		log:       log.With().Str("component", "resolver").Logger(),
		instances: map[string]*Instance{},
	}
}

// SetDialPolicy sets the dial policy handed to every store (Env.Dial);
// call it before the first use.
func (s *Service) SetDialPolicy(p *netguard.Policy) { s.dial = p }

// SetUsageCheck installs the check that refuses deleting a resolver a realm
// still contains.
func (s *Service) SetUsageCheck(fn UsageCheck) { s.usage = fn }

// Types lists the registered type names.
func (s *Service) Types() []string { return slices.Sorted(maps.Keys(s.types)) }

func key(name string) []byte { return []byte(strings.ToLower(name)) }

func (s *Service) paramType(t Type, name string) ParamType {
	for _, p := range t.Params {
		if p.Name == name {
			return p.Type
		}
	}
	return String
}

func ad(name, param string) []string { return []string{bucket, strings.ToLower(name), param} }

// open returns the plain configuration of a record.
func (s *Service) open(rec record) (Config, error) {
	cfg := Config{}
	for k, v := range rec.Data {
		if v.Sealed != nil {
			plain, err := s.sealer.Open(v.Sealed, ad(rec.Name, k)...)
			if err != nil {
				return nil, fmt.Errorf("resolver %s: parameter %s: %w", rec.Name, k, err)
			}
			cfg[k] = string(plain)
			continue
		}
		cfg[k] = v.V
	}
	return cfg, nil
}

func (s *Service) typeOf(name string) (Type, error) {
	t, ok := s.types[name]
	if !ok {
		return Type{}, apierr.New(apierr.ConfigAdmin, fmt.Sprintf("resolver type : %s not in %v", name, s.Types()))
	}
	return t, nil
}

// Save creates or updates the resolver name from params: "type" (required
// on create, unchangeable later), "type.<Key>" and "desc.<Key>" to set a
// parameter's type and description, and the parameters themselves. On an
// update, parameters not sent stay; an empty value deletes a parameter; the
// value Censored keeps a stored secret. It returns the resolver's id. Each
// of also runs in the same transaction after the write.
func (s *Service) Save(ctx context.Context, name string, params map[string]string, also ...func(store.Tx) error) (int, error) {
	if !ValidName(name) {
		return 0, ErrBadName
	}
	typName := params["type"]
	if typName != "" {
		if _, err := s.typeOf(typName); err != nil {
			return 0, err
		}
	}
	// Seal new secrets before the transaction: Update may run its function
	// more than once, and sealing needs fresh randomness.
	sealed := map[string][]byte{}
	prepare := func(t Type) error {
		for k, v := range params {
			if k == "type" || strings.HasPrefix(k, "type.") || strings.HasPrefix(k, "desc.") || v == "" || v == Censored {
				continue
			}
			pt := ParamType(params["type."+k])
			if pt == "" {
				pt = s.paramType(t, k)
			}
			if pt == Password {
				c, err := s.sealer.Seal([]byte(v), ad(name, k)...)
				if err != nil {
					return err
				}
				sealed[k] = c
			}
		}
		return nil
	}
	// The type may come from the stored record: read it first.
	var storedType string
	if err := s.st.View(ctx, func(tx store.Tx) error {
		var rec record
		err := store.GetJSON(tx.Bucket(bucket), key(name), &rec)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		storedType = rec.Type
		return err
	}); err != nil {
		return 0, err
	}
	effective := typName
	if effective == "" {
		effective = storedType
	}
	if effective == "" {
		return 0, apierr.MissingParameter("type")
	}
	t, err := s.typeOf(effective)
	if err != nil {
		return 0, err
	}
	if err := prepare(t); err != nil {
		return 0, err
	}

	var id int
	err = s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		var rec record
		switch err := store.GetJSON(b, key(name), &rec); {
		case errors.Is(err, store.ErrNotFound):
			if typName == "" {
				return apierr.MissingParameter("type")
			}
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			rec = record{ID: int(seq), Name: name, Type: typName, Data: map[string]value{}}
		case err != nil:
			return err
		case typName != "" && typName != rec.Type:
			return apierr.New(apierr.ConfigAdmin, "resolver with similar name and other type already exists: "+name)
		}
		if rec.Data == nil {
			rec.Data = map[string]value{}
		}
		for k, v := range params {
			switch {
			case k == "type":
			case strings.HasPrefix(k, "type."):
				p := rec.Data[k[5:]]
				p.Type = ParamType(v)
				if _, ok := rec.Data[k[5:]]; ok || params[k[5:]] != "" {
					rec.Data[k[5:]] = p
				}
			case strings.HasPrefix(k, "desc."):
				p := rec.Data[k[5:]]
				p.Desc = v
				if _, ok := rec.Data[k[5:]]; ok || params[k[5:]] != "" {
					rec.Data[k[5:]] = p
				}
			case v == Censored:
				// keep the stored value
			case v == "":
				delete(rec.Data, k)
			default:
				old := rec.Data[k]
				nv := value{Type: old.Type, Desc: old.Desc}
				if pt := ParamType(params["type."+k]); pt != "" {
					nv.Type = pt
				} else if nv.Type == "" {
					nv.Type = s.paramType(t, k)
				}
				if c, ok := sealed[k]; ok {
					nv.Sealed = c
				} else if nv.Type == Password {
					// The type became password after sealing was prepared.
					return apierr.New(apierr.Parameter, "parameter "+k+" cannot become a password in the same request")
				} else {
					nv.V = v
				}
				if nv.Type == String {
					nv.Type = ""
				}
				rec.Data[k] = nv
			}
		}
		cfg, err := s.open(rec)
		if err != nil {
			return err
		}
		if t.Validate != nil {
			if err := t.Validate(cfg); err != nil {
				return err
			}
		}
		rev, err := store.BumpConfigRevision(tx)
		if err != nil {
			return err
		}
		rec.Rev, rec.Schema, id = rev, schema, rec.ID
		if err := store.PutJSON(b, key(name), rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return 0, err
	}
	s.drop(name)
	if t.Preload {
		// Start loading the data now rather than on the first lookup.
		if _, err := s.Instance(ctx, name); err != nil {
			s.log.Error().Err(err).Str("resolver", name).Msg("resolver cannot be built after saving")
		}
	}
	return id, nil
}

// Delete removes a resolver that no realm contains. It returns the
// resolver's id, or -1 when it did not exist. Each of also runs in the
// transaction, whether or not there was a resolver to delete.
func (s *Service) Delete(ctx context.Context, name string, also ...func(store.Tx) error) (int, error) {
	id := -1
	err := s.st.Update(ctx, func(tx store.Tx) error {
		id = -1
		b := tx.Bucket(bucket)
		var rec record
		if err := store.GetJSON(b, key(name), &rec); errors.Is(err, store.ErrNotFound) {
			return store.RunAlso(tx, also)
		} else if err != nil {
			return err
		}
		if s.usage != nil {
			realm, used, err := s.usage(tx, rec.Name)
			if err != nil {
				return err
			}
			if used {
				return apierr.New(apierr.ConfigAdmin, fmt.Sprintf("The resolver '%s' is still contained in realm '%s'.", rec.Name, realm))
			}
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		id = rec.ID
		if err := b.Delete(key(name)); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err == nil {
		s.drop(name)
	}
	return id, err
}

func (s *Service) def(rec record) Def {
	d := Def{ID: rec.ID, Name: rec.Name, Type: rec.Type, Data: map[string]string{}, CensorKeys: []string{}}
	for k, v := range rec.Data {
		if v.Sealed != nil || v.Type == Password {
			d.Data[k] = Censored
			d.CensorKeys = append(d.CensorKeys, k)
			continue
		}
		d.Data[k] = v.V
	}
	slices.Sort(d.CensorKeys)
	return d
}

// Get returns the censored definition of name.
func (s *Service) Get(ctx context.Context, name string) (Def, bool, error) {
	var rec record
	found := false
	err := s.st.View(ctx, func(tx store.Tx) error {
		err := store.GetJSON(tx.Bucket(bucket), key(name), &rec)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil || !found {
		return Def{}, false, err
	}
	return s.def(rec), true, nil
}

// Exists reports whether a resolver is defined, inside tx.
func Exists(tx store.Tx, name string) (canonical, typ string, ok bool) {
	var rec record
	if store.GetJSON(tx.Bucket(bucket), key(name), &rec) != nil {
		return "", "", false
	}
	return rec.Name, rec.Type, true
}

// List returns the censored definitions, filtered by type ("" for all)
// and, with editableOnly, by the editable flag.
func (s *Service) List(ctx context.Context, typ string, editableOnly bool) ([]Def, error) {
	var recs []record
	err := s.st.View(ctx, func(tx store.Tx) error {
		recs = recs[:0]
		return tx.Bucket(bucket).ForEach(nil, func(_, v []byte) error {
			var rec record
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			recs = append(recs, rec)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	var out []Def
	for _, rec := range recs {
		if typ != "" && rec.Type != typ {
			continue
		}
		if editableOnly {
			cfg, err := s.open(rec)
			t, ok := s.types[rec.Type]
			if err != nil || !ok || t.Editable == nil || !t.Editable(cfg) {
				continue
			}
		}
		out = append(out, s.def(rec))
	}
	return out, nil
}

// Test builds a resolver from params without saving it and tries it.
// Parameters sent as Censored take the stored value of the resolver
// stored (when given).
func (s *Service) Test(ctx context.Context, params map[string]string, stored string) (any, string, error) {
	cfg := Config{}
	var typName string
	if stored != "" {
		err := s.st.View(ctx, func(tx store.Tx) error {
			var rec record
			if err := store.GetJSON(tx.Bucket(bucket), key(stored), &rec); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return nil
				}
				return err
			}
			c, err := s.open(rec)
			cfg, typName = c, rec.Type
			return err
		})
		if err != nil {
			return nil, "", err
		}
	}
	if v := params["type"]; v != "" {
		typName = v
	}
	if typName == "" {
		return nil, "", apierr.MissingParameter("type")
	}
	t, err := s.typeOf(typName)
	if err != nil {
		return nil, "", err
	}
	for k, v := range params {
		if k == "type" || strings.HasPrefix(k, "type.") || strings.HasPrefix(k, "desc.") || v == Censored {
			continue
		}
		if v == "" {
			delete(cfg, k)
			continue
		}
		cfg[k] = v
	}
	if t.Validate != nil {
		if err := t.Validate(cfg); err != nil {
			return false, err.Error(), nil
		}
	}
	r, err := t.New(ctx, cfg, Env{Log: s.log, Now: s.now, Dial: s.dial})
	if err != nil {
		return false, "The resolver could not be set up.", nil
	}
	defer func() { _ = r.Close() }()
	tester, ok := r.(Tester)
	if !ok {
		return false, "Not implemented", nil
	}
	v, desc := tester.Test(ctx)
	return v, desc, nil
}

// Preload builds the live instance of every resolver whose type asks for
// it (Type.Preload), so that their data loads now rather than on the first
// lookup. A resolver that cannot be built is logged and left to later
// calls, which report the error.
func (s *Service) Preload(ctx context.Context) error {
	defs, err := s.List(ctx, "", false)
	if err != nil {
		return err
	}
	for _, d := range defs {
		if t, ok := s.types[d.Type]; !ok || !t.Preload {
			continue
		}
		if _, err := s.Instance(ctx, d.Name); err != nil {
			s.log.Error().Err(err).Str("resolver", d.Name).Msg("resolver cannot be built at start")
		}
	}
	return nil
}

// LoadingError is what readiness reports while live resolvers are still
// loading their data (Loader).
type LoadingError struct {
	// Resolvers are the names of the resolvers still loading, sorted.
	Resolvers []string
}

func (e *LoadingError) Error() string {
	return "resolvers still loading: " + strings.Join(e.Resolvers, ", ")
}

// Loading returns a *LoadingError naming the live resolvers whose first
// load is still running, or nil when none is.
func (s *Service) Loading() error {
	s.mu.Lock()
	var names []string
	for _, in := range s.instances {
		if in.Loading() {
			names = append(names, in.name)
		}
	}
	s.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return &LoadingError{Resolvers: names}
}
