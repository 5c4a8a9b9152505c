package eventing

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// bucket holds the definitions, keyed by their id as a big-endian number.
const bucket = "eventhandlers"

const schema = 1

type record struct {
	store.Versioned
	Definition
}

// ErrNotFound is the answer for an unknown definition id.
var ErrNotFound = apierr.New(apierr.ResourceNotFound, "The requested EventHandler could not be found.")

// Service keeps the definitions and runs them.
type Service struct {
	cfg Config

	mu      sync.RWMutex
	modules map[string]Module
	order   []string

	// snap is the compiled set of active definitions of one
	// configuration revision: a change made through this Service takes
	// effect at once, one made by another process sharing the store (a
	// second node) within a second.
	snap store.RevSnapshot[*snapshot]

	counters counterStore
	hooks    hookQueue
}

// snapshot is the active definitions of one revision, by event name.
type snapshot struct {
	byEvent map[string][]Definition
}

// New returns the service. Register the modules before use.
func New(cfg Config) *Service {
	s := &Service{cfg: cfg, modules: map[string]Module{}}
	s.counters.st = cfg.Store
	s.hooks.init(s)
	return s
}

// Close stops the background work (queued webhooks are dropped).
func (s *Service) Close() { s.hooks.close() }

// Register adds a handler module. A module of the same name is replaced.
func (s *Service) Register(m Module) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.modules[m.Name()]; !ok {
		s.order = append(s.order, m.Name())
	}
	s.modules[m.Name()] = m
}

// Modules names the registered handler modules in registration order.
func (s *Service) Modules() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.order)
}

// Module returns the registered module name.
func (s *Service) Module(name string) (Module, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.modules[name]
	return m, ok
}

func key(id int) []byte { return store.Uint64Key(uint64(id)) }

// List returns the definitions ordered by id; id > 0 returns only that one
// (an empty list when it does not exist).
func (s *Service) List(ctx context.Context, id int) ([]Definition, error) {
	out := []Definition{}
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		b := tx.Bucket(bucket)
		if id > 0 {
			v := b.Get(key(id))
			if v == nil {
				return nil
			}
			d, err := decode(v)
			if err != nil {
				return err
			}
			out = append(out, d)
			return nil
		}
		return b.ForEach(nil, func(_, v []byte) error {
			d, err := decode(v)
			if err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	return out, err
}

// Get returns definition id.
func (s *Service) Get(ctx context.Context, id int) (Definition, error) {
	ds, err := s.List(ctx, id)
	if err != nil {
		return Definition{}, err
	}
	if len(ds) == 0 {
		return Definition{}, ErrNotFound
	}
	return ds[0], nil
}

func decode(v []byte) (Definition, error) {
	var r record
	if err := json.Unmarshal(v, &r); err != nil {
		return Definition{}, fmt.Errorf("eventing: decode definition: %w", err)
	}
	d := r.Definition
	if d.Options == nil {
		d.Options = map[string]string{}
	}
	if d.Conditions == nil {
		d.Conditions = map[string]string{}
	}
	if d.Events == nil {
		d.Events = []string{}
	}
	return d, nil
}

func paramErr(msg string) error { return apierr.New(apierr.Parameter, msg) }

// normalize checks d as POST /event does and fills in its defaults;
// abortSet says whether the caller gave abort_on_error.
func (s *Service) normalize(ctx context.Context, d *Definition, abortSet bool) error {
	d.Name = strings.TrimSpace(d.Name)
	if d.Name == "" {
		return paramErr("Missing parameter: name")
	}
	var evs []string
	for _, e := range d.Events {
		for _, part := range strings.Split(e, ",") {
			if part = strings.TrimSpace(part); part != "" && !slices.Contains(evs, part) {
				evs = append(evs, part)
			}
		}
	}
	if len(evs) == 0 {
		return paramErr("Missing parameter: event")
	}
	d.Events = evs
	if d.HandlerModule == "" {
		return paramErr("Missing parameter: handlermodule")
	}
	m, ok := s.Module(d.HandlerModule)
	if !ok {
		return paramErr("Unknown handler module: " + d.HandlerModule)
	}
	if d.Action == "" {
		return paramErr("Missing parameter: action")
	}
	if d.Position == "" {
		d.Position = Post
	}
	if !abortSet {
		d.AbortOnError = m.DefaultAbort()
	}
	if d.Options == nil {
		d.Options = map[string]string{}
	}
	if d.Conditions == nil {
		d.Conditions = map[string]string{}
	}
	for k := range d.Options {
		if strings.TrimSpace(k) == "" {
			delete(d.Options, k)
		}
	}
	return m.Check(ctx, *d)
}

// write runs fn on the definitions' bucket in one transaction with the
// configuration revision's bump and also, and then drops the compiled
// definitions older than that revision.
func (s *Service) write(ctx context.Context, fn func(b store.Bucket) error, also []func(store.Tx) error) error {
	var rev uint64
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		if err := fn(tx.Bucket(bucket)); err != nil {
			return err
		}
		var err error
		if rev, err = store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err == nil {
		s.changed(rev)
	}
	return err
}

// Set creates a definition (d.ID == 0) or replaces definition d.ID (its
// options and conditions are replaced, not merged) and returns its id.
// abortSet says whether d.AbortOnError was given; when not, the module's
// default applies. also runs in the same transaction (the audit entry).
func (s *Service) Set(ctx context.Context, d Definition, abortSet bool, also ...func(store.Tx) error) (int, error) {
	d = d.Clone()
	if err := s.normalize(ctx, &d, abortSet); err != nil {
		return 0, err
	}
	id := d.ID
	err := s.write(ctx, func(b store.Bucket) error {
		rec := record{Versioned: store.Versioned{Schema: schema}, Definition: d}
		if d.ID > 0 {
			if b.Get(key(d.ID)) == nil {
				return ErrNotFound
			}
		} else {
			n, err := b.NextSequence()
			if err != nil {
				return err
			}
			rec.ID = int(n)
		}
		id = rec.ID
		v, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return b.Put(key(rec.ID), v)
	}, also)
	if err != nil {
		return 0, err
	}
	return id, nil
}

// SetActive enables or disables definition id.
func (s *Service) SetActive(ctx context.Context, id int, active bool, also ...func(store.Tx) error) error {
	return s.write(ctx, func(b store.Bucket) error {
		v := b.Get(key(id))
		if v == nil {
			return ErrNotFound
		}
		var rec record
		if err := json.Unmarshal(v, &rec); err != nil {
			return err
		}
		rec.Active = active
		out, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		return b.Put(key(id), out)
	}, also)
}

// Delete removes definition id.
func (s *Service) Delete(ctx context.Context, id int, also ...func(store.Tx) error) error {
	return s.write(ctx, func(b store.Bucket) error {
		if b.Get(key(id)) == nil {
			return ErrNotFound
		}
		return b.Delete(key(id))
	}, also)
}

// ParseID parses a definition id of a path ("3"); anything else is not
// found.
func ParseID(s string) (int, error) {
	id, err := strconv.Atoi(s)
	if err != nil || id <= 0 {
		return 0, ErrNotFound
	}
	return id, nil
}

// current returns the compiled definitions.
func (s *Service) current(ctx context.Context) (*snapshot, error) {
	return s.snap.Get(ctx, s.cfg.Store, s.compile)
}

// changed notes a change of the definitions committed at revision rev:
// compiled definitions older than it are no longer used.
func (s *Service) changed(rev uint64) { s.snap.Changed(rev) }

// active returns the active definitions of event at position, in
// execution order.
func (s *Service) active(ctx context.Context, event, position string) ([]Definition, error) {
	sn, err := s.current(ctx)
	if err != nil {
		return nil, err
	}
	var out []Definition
	for _, d := range sn.byEvent[event] {
		if d.Position == position {
			out = append(out, d)
		}
	}
	return out, nil
}

// compile reads every definition in tx and keeps the active ones by
// event, ordered by ordering and then id (storage order).
func (s *Service) compile(tx store.Tx) (*snapshot, error) {
	sn := &snapshot{byEvent: map[string][]Definition{}}
	err := tx.Bucket(bucket).ForEach(nil, func(_, v []byte) error {
		d, err := decode(v)
		if err != nil {
			return err
		}
		if !d.Active {
			return nil
		}
		for _, e := range d.Events {
			sn.byEvent[e] = append(sn.byEvent[e], d)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, ds := range sn.byEvent {
		slices.SortStableFunc(ds, func(a, b Definition) int {
			return cmp.Or(cmp.Compare(a.Ordering, b.Ordering), cmp.Compare(a.ID, b.ID))
		})
	}
	return sn, nil
}

// Wants reports whether any active definition runs for event (at either
// position), so that callers build a Call only when one does. A failure
// to read the definitions answers true: Run then reports it.
func (s *Service) Wants(ctx context.Context, event string) bool {
	sn, err := s.current(ctx)
	return err != nil || len(sn.byEvent[event]) > 0
}
