package resolver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/authsrv/authsrv/store"
)

// MaxCacheBytes bounds each resolver's user cache (logins, uids and user
// infos, by an estimate of their heap size); a lookup that would pass it
// empties the cache, which refills.
const MaxCacheBytes = 16 << 20

// entryOverhead is the estimated cost of a cache entry beyond its text:
// the map slot, the string headers and the expiry.
const entryOverhead = 80

// infoSize estimates the heap size of an info.
func infoSize(i Info) int {
	n := entryOverhead
	for k, v := range i {
		n += len(k) + 32
		switch x := v.(type) {
		case string:
			n += len(x)
		case []string:
			for _, s := range x {
				n += len(s) + 16
			}
		default:
			n += 16
		}
	}
	return n
}

// Instance is a live resolver: the store built from the current definition
// with the user cache in front of it. It is replaced (and the old one
// closed) when the definition changes, which drops the cache.
type Instance struct {
	name     string
	typ      string
	rev      uint64
	editable bool
	r        Resolver
	ttl      time.Duration
	now      func() time.Time

	mu    sync.Mutex
	uids  map[string]cached[string] // login -> uid
	infos map[string]cached[Info]   // uid -> info
	bytes int                       // the estimated size of both maps
}

type cached[T any] struct {
	v       T
	expires time.Time
	size    int
}

// makeRoom accounts for an entry of size bytes, emptying the cache first
// when it would pass MaxCacheBytes. The caller holds mu.
func (in *Instance) makeRoom(size int) {
	if in.bytes+size > MaxCacheBytes {
		clear(in.uids)
		clear(in.infos)
		in.bytes = 0
	}
	in.bytes += size
}

// CacheBytes is the estimated size of the user cache.
func (in *Instance) CacheBytes() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.bytes
}

// Name is the resolver's name.
func (in *Instance) Name() string { return in.name }

// Type is the resolver's type name.
func (in *Instance) Type() string { return in.typ }

// Editable reports whether the resolver allows writes.
func (in *Instance) Editable() bool { return in.editable }

// Store is the underlying store (without the cache).
func (in *Instance) Store() Resolver { return in.r }

func (in *Instance) cacheGet(login string) (string, bool) {
	if in.ttl <= 0 {
		return "", false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	c, ok := in.uids[login]
	if !ok || in.now().After(c.expires) {
		return "", false
	}
	return c.v, true
}

// UserID returns the uid of login, from the cache when fresh.
func (in *Instance) UserID(ctx context.Context, login string) (string, error) {
	if uid, ok := in.cacheGet(login); ok {
		return uid, nil
	}
	uid, err := in.r.UserID(ctx, login)
	if err != nil {
		return "", err
	}
	if in.ttl > 0 {
		in.mu.Lock()
		size := len(login) + len(uid) + entryOverhead
		if old, ok := in.uids[login]; ok {
			in.bytes -= old.size
		}
		in.makeRoom(size)
		in.uids[login] = cached[string]{uid, in.now().Add(in.ttl), size}
		in.mu.Unlock()
	}
	return uid, nil
}

// User returns uid's info (a copy), from the cache when fresh.
func (in *Instance) User(ctx context.Context, uid string) (Info, error) {
	if in.ttl > 0 {
		in.mu.Lock()
		c, ok := in.infos[uid]
		in.mu.Unlock()
		if ok && !in.now().After(c.expires) {
			return maps.Clone(c.v), nil
		}
	}
	info, err := in.r.User(ctx, uid)
	if err != nil {
		return nil, err
	}
	if in.ttl > 0 {
		in.mu.Lock()
		size := len(uid) + infoSize(info)
		if old, ok := in.infos[uid]; ok {
			in.bytes -= old.size
		}
		in.makeRoom(size)
		in.infos[uid] = cached[Info]{maps.Clone(info), in.now().Add(in.ttl), size}
		in.mu.Unlock()
	}
	return info, nil
}

// SearchPage lists one page of users (never cached); see Pager.
func (in *Instance) SearchPage(ctx context.Context, filter map[string]string, offset, limit int) (Page, error) {
	return SearchPage(ctx, in.r, filter, offset, limit)
}

// Loading reports whether the store is still loading its data (Loader).
func (in *Instance) Loading() bool {
	l, ok := in.r.(Loader)
	return ok && l.Loading()
}

// Search lists users (never cached).
func (in *Instance) Search(ctx context.Context, filter map[string]string) ([]Info, error) {
	return in.r.Search(ctx, filter)
}

// CheckPassword checks a password (never cached).
func (in *Instance) CheckPassword(ctx context.Context, uid, password string) (bool, error) {
	return in.r.CheckPassword(ctx, uid, password)
}

// Editor returns the writable side of the store, or ErrNotEditable.
func (in *Instance) Editor() (Editor, error) {
	ed, ok := in.r.(Editor)
	if !ok || !in.editable || !ed.Editable() {
		return nil, ErrNotEditable
	}
	return editor{in, ed}, nil
}

// Fields lists the Info keys the store maps, when it says.
func (in *Instance) Fields() []string {
	if f, ok := in.r.(Fielder); ok {
		return f.Fields()
	}
	return nil
}

// editor forgets cached entries of the users it changes.
type editor struct {
	in *Instance
	ed Editor
}

func (e editor) Editable() bool { return true }

func (e editor) Create(ctx context.Context, fields map[string]string) (string, error) {
	uid, err := e.ed.Create(ctx, fields)
	e.in.forget(uid, fields[KeyUsername])
	return uid, err
}

func (e editor) Update(ctx context.Context, uid string, fields map[string]string) error {
	err := e.ed.Update(ctx, uid, fields)
	e.in.forget(uid, "")
	return err
}

func (e editor) Delete(ctx context.Context, uid string) error {
	err := e.ed.Delete(ctx, uid)
	e.in.forget(uid, "")
	return err
}

func (in *Instance) forget(uid, login string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if c, ok := in.infos[uid]; ok {
		in.bytes -= c.size
		delete(in.infos, uid)
	}
	for l, c := range in.uids {
		if c.v == uid || l == login && login != "" {
			in.bytes -= c.size
			delete(in.uids, l)
		}
	}
}

// Instance returns the live resolver name, building it when its definition
// changed since the last call (here or on another node).
func (s *Service) Instance(ctx context.Context, name string) (*Instance, error) {
	k := strings.ToLower(name)
	// A request pinned to a revision (store.WithRevision) takes the
	// instance built at that revision without a read of its own.
	if rev, ok := store.RevisionFrom(ctx); ok {
		if in, ok := s.live.GetAt(rev, k); ok {
			return in, nil
		}
	}
	var rec record
	found := false
	var live *Instance
	var cfgRev uint64
	if err := s.st.View(ctx, func(tx store.Tx) error {
		if in, ok := s.live.Get(tx, k); ok {
			live = in
			return nil
		}
		cfgRev = store.ConfigRevision(tx)
		err := store.GetJSON(tx.Bucket(bucket), key(name), &rec)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	}); err != nil {
		return nil, err
	}
	if live != nil {
		return live, nil
	}
	if !found {
		s.drop(name)
		return nil, fmt.Errorf("resolver %s: %w", name, ErrNotFound)
	}
	s.mu.Lock()
	in := s.instances[k]
	s.mu.Unlock()
	if in != nil && in.rev == rec.Rev {
		s.live.PutAt(cfgRev, k, in)
		return in, nil
	}
	t, err := s.typeOf(rec.Type)
	if err != nil {
		return nil, err
	}
	cfg, err := s.open(rec)
	if err != nil {
		return nil, err
	}
	r, err := t.New(ctx, cfg, Env{Log: s.log.With().Str("resolver", rec.Name).Logger(), Now: s.now, Dial: s.dial})
	if err != nil {
		return nil, fmt.Errorf("resolver %s: %w", rec.Name, err)
	}
	fresh := &Instance{
		name: rec.Name, typ: rec.Type, rev: rec.Rev, r: r, now: s.now,
		uids: map[string]cached[string]{}, infos: map[string]cached[Info]{},
	}
	if t.Editable != nil {
		fresh.editable = t.Editable(cfg)
	}
	if t.CacheTimeout != nil {
		fresh.ttl = t.CacheTimeout(cfg)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.instances[k]; cur != nil {
		if cur.rev >= fresh.rev {
			_ = r.Close() // another request built it first
			return cur, nil
		}
		_ = cur.r.Close()
	}
	s.instances[k] = fresh
	s.live.PutAt(cfgRev, k, fresh)
	return fresh, nil
}

// drop closes and forgets the live instance of name.
func (s *Service) drop(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := strings.ToLower(name)
	if in := s.instances[k]; in != nil {
		_ = in.r.Close()
		delete(s.instances, k)
	}
	s.healthMu.Lock()
	s.health = healthCache{}
	s.healthMu.Unlock()
}

// Close closes every live instance.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, in := range s.instances {
		_ = in.r.Close()
		delete(s.instances, k)
	}
	return nil
}

// HealthTTL is how long a resolver health result is reused.
const HealthTTL = 5 * time.Second

type healthCache struct {
	at     time.Time
	result map[string]map[string]bool
}

// Health checks the connection of every resolver whose store has one
// (LDAP, SQL) and returns type → name → ok. Results are reused for
// HealthTTL so probes cannot hammer the directories. Each check is bounded
// by ctx.
func (s *Service) Health(ctx context.Context) (map[string]map[string]bool, error) {
	s.healthMu.Lock()
	h := s.health
	s.healthMu.Unlock()
	if h.result != nil && s.now().Sub(h.at) < HealthTTL {
		return h.result, nil
	}
	defs, err := s.List(ctx, "", false)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, d := range defs {
		wg.Go(func() {
			in, err := s.Instance(ctx, d.Name)
			var ok bool
			if err == nil {
				p, pinger := in.r.(Pinger)
				if !pinger {
					return
				}
				ok = p.Ping(ctx) == nil
			}
			mu.Lock()
			defer mu.Unlock()
			if out[d.Type] == nil {
				out[d.Type] = map[string]bool{}
			}
			out[d.Type][d.Name] = ok
		})
	}
	wg.Wait()
	s.healthMu.Lock()
	s.health = healthCache{at: s.now(), result: out}
	s.healthMu.Unlock()
	return out, nil
}
