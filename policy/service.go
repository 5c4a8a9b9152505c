package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// bucket holds one record per policy, keyed by name.
const bucket = "policies"

const schema = 1

// MaxNameLen is the longest policy name.
const MaxNameLen = 64

var nameChars = regexp.MustCompile(`^[a-zA-Z0-9_. -]+$`)

// ErrNotFound is returned for an unknown policy name.
var ErrNotFound = apierr.New(apierr.ResourceNotFound, "The requested Policy could not be found.")

func notFound(name string) error {
	return apierr.New(apierr.ResourceNotFound, fmt.Sprintf("The policy with name '%s' does not exist", name))
}

// Config wires the service to what it validates against.
type Config struct {
	Store store.Store
	Defs  *Defs
	Now   func() time.Time
	// NodeName is this node's name (policies' pinode lists hold names).
	NodeName string
	// Superusers are the realms that may appear as adminrealm.
	Superusers []string
	// RealmExists, ResolverExists and NodeExists check the names a policy
	// refers to when it is saved.
	RealmExists    func(ctx context.Context, name string) bool
	ResolverExists func(ctx context.Context, name string) bool
	NodeExists     func(ctx context.Context, name string) bool
	// UserResolvers lists the resolvers of realm in which login exists,
	// for check_all_resolvers.
	UserResolvers func(ctx context.Context, login, realm string) []string
}

// Service stores policies and matches them.
type Service struct {
	cfg Config

	mu       sync.Mutex
	compiled *compiledSet
}

// New returns the service.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg}
}

// Defs is the registry of action definitions.
func (s *Service) Defs() *Defs { return s.cfg.Defs }

type record struct {
	store.Versioned
	Policy
}

func listRepr(items []string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = "'" + it + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// stripNeg removes a leading ! or - from a list item.
func stripNeg(s string) string {
	if strings.HasPrefix(s, "!") || strings.HasPrefix(s, "-") {
		return s[1:]
	}
	return s
}

// clean trims list items and drops empty ones.
func clean(items []string) []string {
	out := []string{}
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

func perr(format string, args ...any) error {
	return apierr.New(apierr.Parameter, fmt.Sprintf(format, args...))
}

// Validate checks a policy as POST /policy does, with privacyIDEA's
// messages.
func (s *Service) Validate(ctx context.Context, p *Policy) error {
	name := p.Name
	if err := s.validateName(name); err != nil {
		return err
	}
	if p.Scope == "" {
		return apierr.MissingParameter("scope")
	}
	if !s.cfg.Defs.ValidScope(p.Scope) {
		return perr("Invalid scope '%s' in policy '%s'!", p.Scope, name)
	}
	actions := ParseActions(p.Action)
	if len(actions) == 0 && p.Scope != ScopeUser && strings.TrimSpace(p.Action) == "" {
		return apierr.MissingParameter("action")
	}
	if s.cfg.Defs.Checked(p.Scope) {
		var bad []string
		for k := range actions {
			k = stripNeg(k)
			if k == "*" {
				continue
			}
			if _, ok := s.cfg.Defs.Lookup(p.Scope, k); !ok {
				bad = append(bad, k)
			}
		}
		if len(bad) > 0 {
			slices.Sort(bad)
			return perr("Invalid actions %s!", listRepr(bad))
		}
	}
	if v, ok := actions["realm_dropdown"].(string); ok && s.cfg.RealmExists != nil {
		var missing []string
		for _, r := range strings.Fields(v) {
			if r != "-" && !s.cfg.RealmExists(ctx, r) {
				missing = append(missing, r)
			}
		}
		if len(missing) > 0 {
			return perr("Invalid value for action 'realm_dropdown': The following realms do not exist: %s!", listRepr(missing))
		}
	}
	if p.Priority < 1 {
		return perr("Priority must be at least 1")
	}
	p.Realm, p.Resolver, p.User = clean(p.Realm), clean(p.Resolver), clean(p.User)
	p.AdminRealm, p.AdminUser, p.Client = clean(p.AdminRealm), clean(p.AdminUser), clean(p.Client)
	p.PINode, p.UserAgents = clean(p.PINode), clean(p.UserAgents)
	undefined := func(items []string, exists func(context.Context, string) bool) []string {
		var missing []string
		for _, it := range items {
			it = stripNeg(it)
			if it == "*" || exists == nil || exists(ctx, it) || isPattern(it) {
				continue
			}
			missing = append(missing, it)
		}
		return missing
	}
	if m := undefined(p.Realm, s.cfg.RealmExists); len(m) > 0 {
		return perr("Undefined User-realms: %s!", listRepr(m))
	}
	if m := undefined(p.Resolver, s.cfg.ResolverExists); len(m) > 0 {
		return perr("Undefined Resolvers: %s!", listRepr(m))
	}
	if m := undefined(p.PINode, s.cfg.NodeExists); len(m) > 0 {
		return perr("Undefined Privacyidea nodes: %s!", listRepr(m))
	}
	var badAdmin []string
	for _, r := range p.AdminRealm {
		r = stripNeg(r)
		if r != "*" && !slices.Contains(s.cfg.Superusers, strings.ToLower(r)) {
			badAdmin = append(badAdmin, r)
		}
	}
	if len(badAdmin) > 0 {
		return perr("Undefined Admin realms: %s!", listRepr(badAdmin))
	}
	if _, err := ParseTimeRanges(p.Time); err != nil {
		return err
	}
	if _, err := ParseClientList(p.Client); err != nil {
		return err
	}
	for _, c := range p.Conditions {
		if c.MissingData == "" {
			c.MissingData = MissingRaise
		}
		if err := ValidateCondition(name, c); err != nil {
			return err
		}
	}
	for i := range p.Conditions {
		if p.Conditions[i].MissingData == "" {
			p.Conditions[i].MissingData = MissingRaise
		}
	}
	return nil
}

// isPattern reports whether a list item is meant as a regular expression
// (privacyIDEA matches items as full regexps when they are not literal
// names); such items are not checked for existence.
func isPattern(s string) bool {
	_, err := regexp.Compile("^(?:" + s + ")$")
	return err == nil && regexp.QuoteMeta(s) != s
}

// Set creates or replaces the policy p.Name after validating it, and
// returns its id. Each of also runs in the same transaction after the
// write (the caller's audit entry commits with the change).
func (s *Service) Set(ctx context.Context, p Policy, also ...func(store.Tx) error) (int, error) {
	if err := s.Validate(ctx, &p); err != nil {
		return 0, err
	}
	var id int
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		if id, err = put(tx, p); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return id, err
}

// ErrChanged is SetIf's answer when the stored policy is no longer the
// one the caller read.
var ErrChanged = errors.New("policy: changed meanwhile")

// SetIf is Set when the stored policy of p's name is still prev (nil: no
// such policy): a caller that merges a partial update into what it read
// retries on ErrChanged instead of losing a concurrent change.
func (s *Service) SetIf(ctx context.Context, p Policy, prev *Policy, also ...func(store.Tx) error) (int, error) {
	if err := s.Validate(ctx, &p); err != nil {
		return 0, err
	}
	var id int
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		var cur record
		switch err := store.GetJSON(tx.Bucket(bucket), []byte(p.Name), &cur); {
		case errors.Is(err, store.ErrNotFound):
			if prev != nil {
				return ErrChanged
			}
		case err != nil:
			return err
		case prev == nil || !reflect.DeepEqual(cur.Policy, *prev):
			return ErrChanged
		}
		var err error
		if id, err = put(tx, p); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return id, err
}

// put writes p, keeping the id of an existing policy of that name.
func put(tx store.Tx, p Policy) (int, error) {
	b := tx.Bucket(bucket)
	var old record
	switch err := store.GetJSON(b, []byte(p.Name), &old); {
	case err == nil:
		p.ID = old.ID
	case errors.Is(err, store.ErrNotFound):
		seq, err := b.NextSequence()
		if err != nil {
			return 0, err
		}
		p.ID = int(seq)
	default:
		return 0, err
	}
	if err := store.PutJSON(b, []byte(p.Name), record{Versioned: store.Versioned{Schema: schema}, Policy: p}); err != nil {
		return 0, err
	}
	_, err := store.BumpConfigRevision(tx)
	return p.ID, err
}

// Import validates all policies, then stores them in one transaction
// (existing ones of the same name are replaced): all or nothing. Each of
// also runs in that transaction after the writes.
func (s *Service) Import(ctx context.Context, ps []Policy, also ...func(store.Tx) error) (int, error) {
	for i := range ps {
		if ps[i].Priority == 0 {
			ps[i].Priority = 1
		}
		if err := s.Validate(ctx, &ps[i]); err != nil {
			return 0, err
		}
	}
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		for _, p := range ps {
			if _, err := put(tx, p); err != nil {
				return err
			}
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return 0, err
	}
	return len(ps), nil
}

// Get returns one policy.
func (s *Service) Get(ctx context.Context, name string) (Policy, bool, error) {
	var rec record
	found := false
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		err := store.GetJSON(tx.Bucket(bucket), []byte(name), &rec)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	return rec.Policy, found, err
}

// Filter selects policies in List. Empty fields do not filter.
type Filter struct {
	Name   string
	Scope  string
	Realm  string
	Active *bool
}

// List returns the policies matching f, ordered by name.
func (s *Service) List(ctx context.Context, f Filter) ([]Policy, error) {
	var out []Policy
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		return tx.Bucket(bucket).ForEach(nil, func(_, v []byte) error {
			var rec record
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("policy: %w", err)
			}
			p := rec.Policy
			switch {
			case f.Name != "" && p.Name != f.Name:
			case f.Scope != "" && p.Scope != f.Scope:
			case f.Active != nil && p.Active != *f.Active:
			case f.Realm != "" && !realmFilter(p.Realm, f.Realm):
			default:
				out = append(out, p)
			}
			return nil
		})
	})
	return out, err
}

// realmFilter matches GET /policy/?realm=: the stored realm list as one
// comma-joined column, exactly, or case-insensitively with * wildcards.
func realmFilter(realms []string, want string) bool {
	col := strings.Join(realms, ",")
	if !strings.Contains(want, "*") {
		return col == want
	}
	re, err := regexp.Compile("(?i)^" + strings.ReplaceAll(regexp.QuoteMeta(want), `\*`, ".*") + "$")
	return err == nil && re.MatchString(col)
}

// setActive enables or disables a policy and returns its id.
func (s *Service) setActive(ctx context.Context, name string, active bool, also []func(store.Tx) error) (int, error) {
	id := 0
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		var rec record
		if err := store.GetJSON(b, []byte(name), &rec); errors.Is(err, store.ErrNotFound) {
			return notFound(name)
		} else if err != nil {
			return err
		}
		rec.Active, id = active, rec.ID
		if err := store.PutJSON(b, []byte(name), rec); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return id, err
}

// Enable activates a policy and returns its id; also runs in the change's
// transaction.
func (s *Service) Enable(ctx context.Context, name string, also ...func(store.Tx) error) (int, error) {
	return s.setActive(ctx, name, true, also)
}

// Disable deactivates a policy and returns its id; also runs in the
// change's transaction.
func (s *Service) Disable(ctx context.Context, name string, also ...func(store.Tx) error) (int, error) {
	return s.setActive(ctx, name, false, also)
}

// Delete removes a policy and returns its id; also runs in the change's
// transaction.
func (s *Service) Delete(ctx context.Context, name string, also ...func(store.Tx) error) (int, error) {
	id := 0
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		var rec record
		if err := store.GetJSON(b, []byte(name), &rec); errors.Is(err, store.ErrNotFound) {
			return ErrNotFound
		} else if err != nil {
			return err
		}
		id = rec.ID
		if err := b.Delete([]byte(name)); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return id, err
}

// Rename gives a policy a new name and returns its id; also runs in the
// change's transaction.
func (s *Service) Rename(ctx context.Context, old, name string, also ...func(store.Tx) error) (int, error) {
	probe := Policy{Name: name}
	if err := s.validateName(probe.Name); err != nil {
		return 0, err
	}
	id := 0
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		var rec record
		if err := store.GetJSON(b, []byte(old), &rec); errors.Is(err, store.ErrNotFound) {
			return perr("Policy does not exist: %s", old)
		} else if err != nil {
			return err
		}
		if b.Get([]byte(name)) != nil {
			return perr("Policy already exists: %s", name)
		}
		if err := b.Delete([]byte(old)); err != nil {
			return err
		}
		rec.Name, id = name, rec.ID
		if err := store.PutJSON(b, []byte(name), rec); err != nil {
			return err
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return id, err
}

func (s *Service) validateName(name string) error {
	switch {
	case strings.EqualFold(name, "check") || strings.HasPrefix(name, "pi-update-policy-"):
		return perr("Invalid policy name: %s", name)
	case name == "" || len(name) > MaxNameLen || !nameChars.MatchString(name):
		return perr("The name of the policy may only contain the characters a-zA-Z0-9_. -")
	case strings.Contains(name, " "):
		return perr("Policy name must not contain white spaces!")
	}
	return nil
}

// ParsePriority reads a priority parameter.
func ParsePriority(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, perr("Priority must be an integer")
	}
	return n, nil
}
