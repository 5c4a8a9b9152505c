package sysconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// bucket holds one record per stored setting, keyed by its name.
const bucket = "sysconfig"

// schema is the version of the stored records.
const schema = 1

// record is one stored setting.
type record struct {
	store.Versioned
	Key         string `json:"key"`
	Value       string `json:"value"`
	Type        string `json:"type,omitempty"`
	Description string `json:"description,omitempty"`
}

// Config wires the service.
type Config struct {
	Store store.Store
	// Defaults are the values of settings that are not stored, by key
	// (the program's options); a key missing here has its Key.Default.
	Defaults map[string]string
	// Extra are settings beyond Builtin (the per-type challenge validity
	// times of the registered token types).
	Extra []Key
	// Check, when set, checks a value further before it is stored (that
	// the SMTP server an identifier names exists, say).
	Check func(ctx context.Context, key, value string) error
	// Derive, when set, computes what the program keeps of each
	// snapshot (the token settings), once per snapshot; Snapshot.Derived
	// returns it.
	Derive func(sn *Snapshot) any
	Log    zerolog.Logger
}

// Change is one setting to store.
type Change struct {
	Key   string
	Value string
	// Type is privacyIDEA's "<key>.type" companion: "public" makes the
	// setting readable by users; other types are kept as given.
	Type string
	// Desc is the "<key>.desc" companion.
	Desc string
}

// Setting is one setting as a read answers it.
type Setting struct {
	Key
	// Value is the effective value: the stored one, else the default.
	Value string
	// Stored says whether the value is stored (not a default).
	Stored bool
	// Type and Description are the stored companions.
	Type, Description string
	// Visible to users: Key.Public or stored with type "public".
	UserVisible bool
}

// Snapshot is the settings of one configuration revision.
type Snapshot struct {
	rev     uint64
	values  map[string]string
	stored  map[string]record
	derived any
}

// Revision is the configuration revision the snapshot was read at.
func (sn *Snapshot) Revision() uint64 { return sn.rev }

// Value returns the effective value of key ("" when unknown or unset).
func (sn *Snapshot) Value(key string) string { return sn.values[key] }

// Bool returns key as a boolean.
func (sn *Snapshot) Bool(key string) bool { return sn.values[key] == "True" }

// Int returns key as an integer (0 when unset).
func (sn *Snapshot) Int(key string) int {
	n, _ := strconv.Atoi(sn.values[key])
	return n
}

// Stored reports whether key is stored (not its default).
func (sn *Snapshot) Stored(key string) bool {
	_, ok := sn.stored[key]
	return ok
}

// Values returns a copy of every effective value by key (unset ones
// without a default left out).
func (sn *Snapshot) Values() map[string]string { return maps.Clone(sn.values) }

// Derived returns what Config.Derive computed for this snapshot.
func (sn *Snapshot) Derived() any { return sn.derived }

// Service keeps the system settings.
type Service struct {
	cfg      Config
	keys     map[string]Key
	defaults map[string]string
	// snap is the snapshot in use: a change made through this Service
	// takes effect at once, one made by another process sharing the
	// store (a second node) within a second.
	snap store.RevSnapshot[*Snapshot]
}

// New returns the service. It reads nothing yet.
func New(cfg Config) (*Service, error) {
	s := &Service{cfg: cfg, keys: map[string]Key{}, defaults: map[string]string{}}
	for _, k := range append(Builtin(), cfg.Extra...) {
		if k.Name == "" {
			return nil, errors.New("sysconfig: a key without a name")
		}
		if _, dup := s.keys[k.Name]; dup {
			return nil, fmt.Errorf("sysconfig: key %s defined twice", k.Name)
		}
		s.keys[k.Name] = k
		if k.Default != "" {
			s.defaults[k.Name] = k.Default
		}
	}
	for name, v := range cfg.Defaults {
		if _, ok := s.keys[name]; !ok {
			return nil, fmt.Errorf("sysconfig: default for unknown key %s", name)
		}
		s.defaults[name] = v
	}
	return s, nil
}

// Keys returns the known settings ordered by name.
func (s *Service) Keys() []Key {
	out := slices.Collect(maps.Values(s.keys))
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.Name, b.Name) })
	for i := range out {
		if d, ok := s.defaults[out[i].Name]; ok {
			out[i].Default = d
		}
	}
	return out
}

// Lookup returns the known setting name.
func (s *Service) Lookup(name string) (Key, bool) {
	k, ok := s.keys[name]
	if ok {
		k.Default = s.defaults[name]
	}
	return k, ok
}

// unknown is the error for a key authsrv does not know.
func unknown(name string) error {
	return apierr.Newf(apierr.Parameter, "Unknown system configuration key: %q.", name)
}

// Current returns the settings in use; it is the hot path (an atomic
// load and a time check) and never fails: when the store cannot be read
// it keeps the last snapshot (or the defaults) and logs why.
func (s *Service) Current() *Snapshot {
	if sn, ok := s.snap.Fresh(); ok {
		return sn
	}
	sn, err := s.current(context.Background())
	if err != nil {
		s.cfg.Log.Error().Err(err).Str("component", "sysconfig").Msg("reading the system configuration failed; using the last known settings")
		// Try again (and log again) after the recheck bound, not at
		// every use.
		if old, ok := s.snap.Last(); ok {
			return old
		}
		return s.build(0, nil)
	}
	return sn
}

// Snapshot returns the settings in use, reading the store when the
// snapshot may be stale.
func (s *Service) Snapshot(ctx context.Context) (*Snapshot, error) { return s.current(ctx) }

func (s *Service) current(ctx context.Context) (*Snapshot, error) {
	return s.snap.Get(ctx, s.cfg.Store, s.compile)
}

// compile reads the stored settings in tx.
func (s *Service) compile(tx store.Tx) (*Snapshot, error) {
	stored := map[string]record{}
	err := tx.Bucket(bucket).ForEach(nil, func(k, v []byte) error {
		var rec record
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("sysconfig: decode %s: %w", k, err)
		}
		if _, known := s.keys[rec.Key]; known {
			stored[rec.Key] = rec
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.build(store.ConfigRevision(tx), stored), nil
}

// build makes the snapshot of stored at rev.
func (s *Service) build(rev uint64, stored map[string]record) *Snapshot {
	sn := &Snapshot{rev: rev, values: maps.Clone(s.defaults), stored: stored}
	for k, rec := range stored {
		sn.values[k] = rec.Value
	}
	if s.cfg.Derive != nil {
		sn.derived = s.cfg.Derive(sn)
	}
	return sn
}

// changed notes a change committed at revision rev: older snapshots are
// no longer used.
func (s *Service) changed(rev uint64) { s.snap.Changed(rev) }

// List returns the settings ordered by name: every known one (Optional
// ones only when stored); publicOnly keeps those users may read.
func (s *Service) List(ctx context.Context, publicOnly bool) ([]Setting, error) {
	sn, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	out := []Setting{}
	for _, k := range s.Keys() {
		st := s.setting(sn, k)
		if (k.Optional && !st.Stored) || (publicOnly && !st.UserVisible) {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// Get returns the setting key; false when it is unknown, or not readable
// by users when publicOnly.
func (s *Service) Get(ctx context.Context, key string, publicOnly bool) (Setting, bool, error) {
	k, ok := s.Lookup(key)
	if !ok {
		return Setting{}, false, nil
	}
	sn, err := s.current(ctx)
	if err != nil {
		return Setting{}, false, err
	}
	st := s.setting(sn, k)
	if publicOnly && !st.UserVisible {
		return Setting{}, false, nil
	}
	return st, true, nil
}

func (s *Service) setting(sn *Snapshot, k Key) Setting {
	st := Setting{Key: k, Value: sn.values[k.Name], UserVisible: k.Public}
	if rec, ok := sn.stored[k.Name]; ok {
		st.Stored, st.Type, st.Description = true, rec.Type, rec.Description
		st.UserVisible = st.UserVisible || rec.Type == "public"
	}
	return st
}

// Check validates changes without storing them and returns them
// normalized: every key known, every value of its kind, no key twice.
func (s *Service) Check(ctx context.Context, changes []Change) ([]Change, error) {
	if len(changes) == 0 {
		return nil, apierr.New(apierr.Parameter, "No system configuration key was given.")
	}
	out := make([]Change, 0, len(changes))
	seen := map[string]bool{}
	for _, c := range changes {
		k, ok := s.keys[c.Key]
		if !ok {
			return nil, unknown(c.Key)
		}
		if seen[c.Key] {
			return nil, apierr.Newf(apierr.Parameter, "The system configuration key %s is given twice.", c.Key)
		}
		seen[c.Key] = true
		v, err := k.Normalize(c.Value)
		if err != nil {
			return nil, err
		}
		if c.Type == "password" {
			return nil, apierr.Newf(apierr.Parameter, "%s.type: no system configuration key holds a password.", c.Key)
		}
		if err := checkText(c.Key+".type", c.Type); err != nil {
			return nil, err
		}
		if err := checkText(c.Key+".desc", c.Desc); err != nil {
			return nil, err
		}
		if s.cfg.Check != nil && v != "" {
			if err := s.cfg.Check(ctx, c.Key, v); err != nil {
				return nil, err
			}
		}
		out = append(out, Change{Key: c.Key, Value: v, Type: c.Type, Desc: c.Desc})
	}
	return out, nil
}

// Set stores changes all together or none of them (Check first) and
// answers "insert" or "update" by key. Each of also runs in the same
// transaction after the writes (the audit entry).
func (s *Service) Set(ctx context.Context, changes []Change, also ...func(store.Tx) error) (map[string]string, error) {
	changes, err := s.Check(ctx, changes)
	if err != nil {
		return nil, err
	}
	res := map[string]string{}
	var rev uint64
	err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		clear(res)
		b := tx.Bucket(bucket)
		for _, c := range changes {
			var old record
			res[c.Key] = "insert"
			switch err := store.GetJSON(b, []byte(c.Key), &old); {
			case err == nil:
				res[c.Key] = "update"
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
			rec := record{Versioned: store.Versioned{Schema: schema}, Key: c.Key, Value: c.Value, Type: c.Type, Description: c.Desc}
			if c.Type == "" {
				rec.Type = old.Type
			}
			if c.Desc == "" {
				rec.Description = old.Description
			}
			if err := store.PutJSON(b, []byte(c.Key), rec); err != nil {
				return err
			}
		}
		var err error
		if rev, err = store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return nil, err
	}
	s.changed(rev)
	return res, nil
}

// Delete removes the stored value of key, so that its default applies
// again, and returns 1, or 0 when nothing was stored (then nothing is
// written and also does not run). An unknown key is a Parameter error.
func (s *Service) Delete(ctx context.Context, key string, also ...func(store.Tx) error) (int, error) {
	if _, ok := s.keys[key]; !ok {
		return 0, unknown(key)
	}
	n := 0
	var rev uint64
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		n = 0
		b := tx.Bucket(bucket)
		if b.Get([]byte(key)) == nil {
			return nil
		}
		if err := b.Delete([]byte(key)); err != nil {
			return err
		}
		n = 1
		var err error
		if rev, err = store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return 0, err
	}
	if n == 1 {
		s.changed(rev)
	}
	return n, nil
}
