// Package realm owns realms: named, ordered lists of resolvers (optionally
// bound to a node), the default realm, the superuser realms from the
// server's options, and user lookup across a realm's resolvers.
//
// Package realm sits on floor 3: it imports resolver, user, store and
// apierr.
package realm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// bucket holds one record per realm by name, and the default realm under
// defaultKey.
const bucket = "realms"

var defaultKey = []byte("\x00default")

const schema = 1

// DefaultPriority is the priority of an entry without one.
const DefaultPriority = 1000

var nameRe = regexp.MustCompile(`^[A-Za-z0-9_\-.]+$`)

// Errors of the package.
var (
	ErrNotFound    = apierr.New(apierr.ResourceNotFound, "The requested Realm could not be found.")
	ErrBadName     = apierr.New(apierr.Parameter, "non conformant characters in the realm name: only letters, digits, '_', '-' and '.' are allowed")
	ErrUnknownNode = apierr.New(apierr.Parameter, "The given node does not exist!")
	ErrBadData     = apierr.New(apierr.Parameter, "Could not verify data in request!")
	ErrTokens      = apierr.New(apierr.User, "Realm can not be deleted, because a user of this realm is still assigned to a token.")
	ErrNoUser      = apierr.New(apierr.User, "The user can not be found in any resolver in this realm!")
)

// Entry is one resolver of a realm.
type Entry struct {
	Name     string `json:"name"`
	Priority *int   `json:"priority,omitempty"`
	Node     string `json:"node,omitempty"`
}

func (e Entry) prio() int {
	if e.Priority == nil {
		return DefaultPriority
	}
	return *e.Priority
}

// Realm is a realm as stored.
type Realm struct {
	ID        int     `json:"id"`
	Name      string  `json:"name"`
	Resolvers []Entry `json:"resolvers"`
}

type record struct {
	store.Versioned
	Realm
}

// TokenCheck reports whether users of a realm still hold tokens (the token
// subsystem provides it; until then no realm has token owners).
type TokenCheck func(tx store.Tx, realm string) (bool, error)

// Config wires the service.
type Config struct {
	Store     store.Store
	Resolvers *resolver.Service
	Attrs     *user.Attributes
	// LocalNode is this node's id; node-bound entries of other nodes are
	// skipped in user lookups.
	LocalNode string
	// NodeExists tells whether a node id is known.
	NodeExists func(ctx context.Context, id string) (bool, error)
	// Superusers are the realms whose users are administrators.
	Superusers []string
}

// Service manages realms.
type Service struct {
	cfg    Config
	tokens TokenCheck
	cache  store.RevCache[cachedRealm]
}

// New returns the service and installs the resolver usage check (a
// resolver a realm contains cannot be deleted).
func New(cfg Config) *Service {
	s := &Service{cfg: cfg}
	cfg.Resolvers.SetUsageCheck(s.resolverInUse)
	return s
}

// SetTokenCheck installs the check that refuses deleting a realm whose
// users hold tokens.
func (s *Service) SetTokenCheck(fn TokenCheck) { s.tokens = fn }

// Normalize lower-cases a realm name and turns spaces into dashes.
func Normalize(name string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), " ", "-")
}

func validName(name string) bool {
	return nameRe.MatchString(name) && len(name) <= 128 && strings.Trim(name, ".") != ""
}

// Superusers lists the superuser realms.
func (s *Service) Superusers() []string { return slices.Clone(s.cfg.Superusers) }

// IsSuperuser reports whether realm is a superuser realm.
func (s *Service) IsSuperuser(realm string) bool {
	return slices.Contains(s.cfg.Superusers, Normalize(realm))
}

func get(tx store.Tx, name string) (Realm, bool, error) {
	var rec record
	err := store.GetJSON(tx.Bucket(bucket), []byte(name), &rec)
	if errors.Is(err, store.ErrNotFound) {
		return Realm{}, false, nil
	}
	return rec.Realm, err == nil, err
}

func put(tx store.Tx, r Realm) error {
	return store.PutJSON(tx.Bucket(bucket), []byte(r.Name), record{Versioned: store.Versioned{Schema: schema}, Realm: r})
}

func defaultName(tx store.Tx) string { return string(tx.Bucket(bucket).Get(defaultKey)) }

func all(tx store.Tx) ([]Realm, error) {
	var out []Realm
	err := tx.Bucket(bucket).ForEach(nil, func(k, v []byte) error {
		if k[0] == 0 {
			return nil
		}
		var rec record
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("realm %s: %w", k, err)
		}
		out = append(out, rec.Realm)
		return nil
	})
	return out, err
}

// set replaces the entries of one node ("" for the node-less entries) and
// creates the realm when needed. Unknown resolvers are reported as failed.
func (s *Service) set(ctx context.Context, name, node string, entries []Entry, also []func(store.Tx) error) (added, failed []string, err error) {
	name = Normalize(name)
	if !validName(name) {
		return nil, nil, ErrBadName
	}
	err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		added, failed = []string{}, []string{}
		r, found, err := get(tx, name)
		if err != nil {
			return err
		}
		if !found {
			seq, err := tx.Bucket(bucket).NextSequence()
			if err != nil {
				return err
			}
			r = Realm{ID: int(seq), Name: name}
		}
		kept := slices.DeleteFunc(slices.Clone(r.Resolvers), func(e Entry) bool { return e.Node == node })
		for _, e := range entries {
			canonical, _, ok := resolver.Exists(tx, e.Name)
			if !ok {
				failed = append(failed, e.Name)
				continue
			}
			if slices.ContainsFunc(kept, func(k Entry) bool { return k.Node == node && strings.EqualFold(k.Name, canonical) }) {
				continue
			}
			kept = append(kept, Entry{Name: canonical, Priority: e.Priority, Node: node})
			added = append(added, canonical)
		}
		r.Resolvers = kept
		if err := put(tx, r); err != nil {
			return err
		}
		// The first realm becomes the default.
		if defaultName(tx) == "" {
			realms, err := all(tx)
			if err != nil {
				return err
			}
			if len(realms) == 1 {
				if err := tx.Bucket(bucket).Put(defaultKey, []byte(name)); err != nil {
					return err
				}
			}
		}
		if _, err = store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return added, failed, err
}

// Set creates or reconfigures a realm with its node-less resolver entries;
// node-bound entries stay. Each of also runs in the same transaction after
// the write (the caller's audit entry commits with the change).
func (s *Service) Set(ctx context.Context, name string, entries []Entry, also ...func(store.Tx) error) (added, failed []string, err error) {
	return s.set(ctx, name, "", entries, also)
}

// SetNode replaces the entries bound to node; also runs in the change's
// transaction.
func (s *Service) SetNode(ctx context.Context, name, node string, entries []Entry, also ...func(store.Tx) error) (added, failed []string, err error) {
	if node == "" {
		return nil, nil, ErrUnknownNode
	}
	if s.cfg.NodeExists != nil {
		ok, err := s.cfg.NodeExists(ctx, node)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, ErrUnknownNode
		}
	}
	return s.set(ctx, name, node, entries, also)
}

// Get returns a realm and whether it is the default.
func (s *Service) Get(ctx context.Context, name string) (Realm, bool, error) {
	r, isDefault, err := s.get(ctx, name)
	r.Resolvers = slices.Clone(r.Resolvers)
	return r, isDefault, err
}

// get is Get without the copy of the resolver list: the caller only
// reads it. A context pinned to a configuration revision
// (store.WithRevision) is answered from the cache of that revision
// without a store read.
func (s *Service) get(ctx context.Context, name string) (Realm, bool, error) {
	if rev, ok := store.RevisionFrom(ctx); ok {
		if c, ok := s.cache.GetAt(rev, Normalize(name)); ok {
			if !c.found {
				return c.r, c.isDefault, ErrNotFound
			}
			return c.r, c.isDefault, nil
		}
	}
	var r Realm
	var isDefault, found bool
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		key := Normalize(name)
		if c, ok := s.cache.Get(tx, key); ok {
			r, found, isDefault = c.r, c.found, c.isDefault
			return nil
		}
		var err error
		r, found, err = get(tx, key)
		if err != nil {
			return err
		}
		isDefault = found && defaultName(tx) == r.Name
		s.cache.Put(tx, key, cachedRealm{r, found, isDefault})
		return nil
	})
	if err == nil && !found {
		err = ErrNotFound
	}
	return r, isDefault, err
}

// cachedRealm is a realm lookup as Get answered it at one configuration
// revision.
type cachedRealm struct {
	r                Realm
	found, isDefault bool
}

// Exists reports whether a realm exists.
func (s *Service) Exists(ctx context.Context, name string) bool {
	_, _, err := s.Get(ctx, name)
	return err == nil
}

// List returns all realms ordered by name and the default realm's name.
func (s *Service) List(ctx context.Context) ([]Realm, string, error) {
	var out []Realm
	var def string
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = all(tx)
		def = defaultName(tx)
		return err
	})
	return out, def, err
}

// Default returns the default realm's name ("" when there is none).
func (s *Service) Default(ctx context.Context) (string, error) {
	var def string
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error { def = defaultName(tx); return nil })
	return def, err
}

// SetDefault makes a realm the default and returns its id; also runs in
// the change's transaction.
func (s *Service) SetDefault(ctx context.Context, name string, also ...func(store.Tx) error) (int, error) {
	name = Normalize(name)
	id := 0
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		r, found, err := get(tx, name)
		if err != nil {
			return err
		}
		if !found {
			return ErrNotFound
		}
		id = r.ID
		if err := tx.Bucket(bucket).Put(defaultKey, []byte(name)); err != nil {
			return err
		}
		if _, err = store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return id, err
}

// ClearDefault removes the default flag and returns the former default's
// id, or 0 when there was none. Each of also runs in the transaction,
// whether or not there was a default to clear.
func (s *Service) ClearDefault(ctx context.Context, also ...func(store.Tx) error) (int, error) {
	id := 0
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		id = 0
		def := defaultName(tx)
		if def == "" {
			return store.RunAlso(tx, also)
		}
		if r, found, err := get(tx, def); err != nil {
			return err
		} else if found {
			id = r.ID
		}
		if err := tx.Bucket(bucket).Delete(defaultKey); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return id, err
}

// Delete removes a realm and returns its id. It refuses while users of the
// realm hold tokens, and while custom attributes exist for its users unless
// deleteAttrs is set (then they go too). Deleting the default realm with
// one realm left makes that realm the default. Each of also runs in the
// change's transaction.
func (s *Service) Delete(ctx context.Context, name string, deleteAttrs bool, also ...func(store.Tx) error) (int, error) {
	name = Normalize(name)
	id := 0
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		r, found, err := get(tx, name)
		if err != nil {
			return err
		}
		if !found {
			return ErrNotFound
		}
		if s.tokens != nil {
			held, err := s.tokens(tx, name)
			if err != nil {
				return err
			}
			if held {
				return ErrTokens
			}
		}
		keys, err := s.cfg.Attrs.RealmKeys(tx, name)
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if !deleteAttrs {
				return apierr.New(apierr.RealmAttributes, fmt.Sprintf("Realm '%s' contains custom user attributes (%s). Deleting the realm will also delete these custom user attributes.", name, strings.Join(keys, ", ")))
			}
			if _, err := s.cfg.Attrs.DeleteRealm(tx, name); err != nil {
				return err
			}
		}
		b := tx.Bucket(bucket)
		if err := b.Delete([]byte(name)); err != nil {
			return err
		}
		if defaultName(tx) == name {
			if err := b.Delete(defaultKey); err != nil {
				return err
			}
		}
		if defaultName(tx) == "" {
			rest, err := all(tx)
			if err != nil {
				return err
			}
			if len(rest) == 1 {
				if err := b.Put(defaultKey, []byte(rest[0].Name)); err != nil {
					return err
				}
			}
		}
		id = r.ID
		if _, err = store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return id, err
}

// resolverInUse is the resolver service's usage check.
func (s *Service) resolverInUse(tx store.Tx, name string) (string, bool, error) {
	realms, err := all(tx)
	if err != nil {
		return "", false, err
	}
	for _, r := range realms {
		for _, e := range r.Resolvers {
			if strings.EqualFold(e.Name, name) {
				return r.Name, true, nil
			}
		}
	}
	return "", false, nil
}

// Ordered returns the realm's entries that apply on this node, by priority
// (then name), without duplicates.
func (s *Service) Ordered(r Realm) []Entry {
	var out []Entry
	for _, e := range r.Resolvers {
		if e.Node != "" && e.Node != s.cfg.LocalNode {
			continue
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		if c := cmp.Compare(a.prio(), b.prio()); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		// Node-bound entries before the node-less ones of equal rank.
		return cmp.Compare(b.Node, a.Node)
	})
	seen := map[string]bool{}
	return slices.DeleteFunc(out, func(e Entry) bool {
		k := strings.ToLower(e.Name)
		dup := seen[k]
		seen[k] = true
		return dup
	})
}
