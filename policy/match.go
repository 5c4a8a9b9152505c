package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// compiled is a policy prepared for matching: parsed once per
// configuration revision, never on the request path.
type compiled struct {
	p          Policy
	actions    map[string]any
	clients    ClientList
	times      TimeRanges
	validTime  bool
	validAgent []string

	action, realm, user, adminRealm, adminUser, resolver listMatcher
	conditions                                           bool
}

// listMatcher is a policy list prepared for the generic list rule: an
// empty list matches; otherwise a value equal to an item, "*", or fully
// matched by an item used as a regexp is found, and a "!" or "-" item
// equal to it excludes it. Literal items are looked up in a set; only items
// that are real patterns run as regexps.
type listMatcher struct {
	empty    bool
	fold     bool
	star     bool
	literal  map[string]bool
	patterns []*regexp.Regexp
	exclude  map[string]bool
}

func newListMatcher(items []string, fold, withExclusions bool) listMatcher {
	m := listMatcher{empty: len(items) == 0, fold: fold, literal: map[string]bool{}, exclude: map[string]bool{}}
	for _, it := range items {
		if fold {
			it = strings.ToLower(it)
		}
		if len(it) > 1 && (it[0] == '!' || it[0] == '-') {
			if withExclusions {
				m.exclude[it[1:]] = true
			}
			continue
		}
		switch {
		case it == "*":
			m.star = true
		case regexp.QuoteMeta(it) == it || len(it) > 256:
			m.literal[it] = true
		default:
			m.literal[it] = true
			if re, err := regexp.Compile("^(?:" + it + ")$"); err == nil {
				m.patterns = append(m.patterns, re)
			}
		}
	}
	return m
}

func (m *listMatcher) match(v string) bool {
	if m.empty {
		return true
	}
	if m.fold {
		v = strings.ToLower(v)
	}
	if m.exclude[v] {
		return false
	}
	if m.star || m.literal[v] {
		return true
	}
	for _, re := range m.patterns {
		if re.MatchString(v) {
			return true
		}
	}
	return false
}

type compiledSet struct {
	rev    uint64
	all    []*compiled
	active map[string]int // scope -> active policies
	// authn and authz are whether the two scopes every authentication
	// asks about, many times, have an active policy.
	authn, authz bool
}

// isActive reports whether any active policy exists in scope.
func (set *compiledSet) isActive(scope string) bool {
	switch scope {
	case ScopeAuthentication:
		return set.authn
	case ScopeAuthorization:
		return set.authz
	}
	return set.active[scope] > 0
}

// compile prepares the policies of a revision.
func compile(rev uint64, ps []Policy) *compiledSet {
	set := &compiledSet{rev: rev, active: map[string]int{}}
	for _, p := range ps {
		c := &compiled{p: p, actions: ParseActions(p.Action)}
		var err error
		c.times, err = ParseTimeRanges(p.Time)
		c.validTime = err == nil
		if cl, err := ParseClientList(p.Client); err == nil {
			c.clients = cl
		} else {
			// A stored invalid client list matches nobody.
			c.clients, _ = ParseClientList([]string{"!0.0.0.0/0", "!::/0"})
		}
		for _, a := range p.UserAgents {
			c.validAgent = append(c.validAgent, strings.ToLower(a))
		}
		keys := make([]string, 0, len(c.actions))
		for k := range c.actions {
			keys = append(keys, k)
		}
		c.action = newListMatcher(keys, false, true)
		c.realm = newListMatcher(p.Realm, false, true)
		c.user = newListMatcher(p.User, p.UserCaseInsensitive, true)
		c.adminRealm = newListMatcher(p.AdminRealm, false, true)
		c.adminUser = newListMatcher(p.AdminUser, p.UserCaseInsensitive, true)
		c.resolver = newListMatcher(p.Resolver, false, false)
		c.conditions = hasActive(p.Conditions)
		set.all = append(set.all, c)
		if p.Active {
			set.active[p.Scope]++
		}
	}
	set.authn, set.authz = set.active[ScopeAuthentication] > 0, set.active[ScopeAuthorization] > 0
	slices.SortStableFunc(set.all, func(a, b *compiled) int {
		if a.p.Priority != b.p.Priority {
			return a.p.Priority - b.p.Priority
		}
		return strings.Compare(a.p.Name, b.p.Name)
	})
	return set
}

// load returns the compiled policies of the current revision.
func (s *Service) load(ctx context.Context) (*compiledSet, error) {
	var rev uint64
	var ps []Policy
	s.mu.Lock()
	cur := s.compiled
	s.mu.Unlock()
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		rev = store.ConfigRevision(tx)
		if cur != nil && cur.rev == rev {
			return nil
		}
		ps = ps[:0]
		return tx.Bucket(bucket).ForEach(nil, func(_, v []byte) error {
			var rec record
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("policy: %w", err)
			}
			ps = append(ps, rec.Policy)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if cur != nil && cur.rev == rev {
		return cur, nil
	}
	set := compile(rev, ps)
	s.mu.Lock()
	if s.compiled == nil || s.compiled.rev < rev {
		s.compiled = set
	}
	s.mu.Unlock()
	return set, nil
}

// Str returns a pointer to s, for the optional filters of a Query.
func Str(s string) *string { return &s }

// Query describes what a policy must match. A nil filter does not
// restrict; an empty string filters for the empty value.
type Query struct {
	Scope string
	// Action is the action looked for ("" matches any).
	Action     string
	Realm      *string
	Resolver   *string
	User       *string
	AdminRealm *string
	AdminUser  *string
	// Client is the requesting client's address (invalid when unknown:
	// then only policies without a client list match).
	Client netip.Addr
	// UserAgent is the request's User-Agent header.
	UserAgent string
	// Data supplies what conditions read; it is called at most once, and
	// only when a candidate policy has an active condition.
	Data func() ConditionData
	// SkipConditions ignores conditions (as privacyIDEA does for WebUI
	// rights and realm lists).
	SkipConditions bool
}

// agentName is the leading run of letters, digits, '_' and '-' of a
// User-Agent header (the name policies' user agent lists hold), lower
// case.
func agentName(ua string) string {
	n := 0
	for n < len(ua) {
		c := ua[n]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			break
		}
		n++
	}
	return strings.ToLower(ua[:n])
}

// Match returns the active policies matching q, by priority.
func (s *Service) Match(ctx context.Context, q Query) ([]Policy, error) {
	cs, err := s.matchCompiled(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]Policy, len(cs))
	for i, c := range cs {
		out[i] = c.p
	}
	return out, nil
}

func (s *Service) matchCompiled(ctx context.Context, q Query) ([]*compiled, error) {
	set, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	return s.matchSet(ctx, set, q)
}

// matchSet is matchCompiled on an already loaded set (Snapshot uses it to
// match without a store read).
func (s *Service) matchSet(ctx context.Context, set *compiledSet, q Query) ([]*compiled, error) {
	agent := agentName(q.UserAgent)
	now := s.cfg.Now()
	var data *ConditionData
	var out []*compiled
	for _, c := range set.all {
		p := &c.p
		if !p.Active || p.Scope != q.Scope {
			continue
		}
		if q.Action != "" && !c.action.match(q.Action) {
			continue
		}
		if q.Realm != nil && !c.realm.match(*q.Realm) {
			continue
		}
		if q.Scope == ScopeAdmin && q.AdminRealm != nil && !c.adminRealm.match(*q.AdminRealm) {
			continue
		}
		if q.User != nil && !c.user.match(*q.User) {
			continue
		}
		if q.Scope == ScopeAdmin && q.AdminUser != nil && !c.adminUser.match(*q.AdminUser) {
			continue
		}
		if q.Resolver != nil {
			if p.CheckAllResolvers && q.User != nil && q.Realm != nil && s.cfg.UserResolvers != nil {
				ok := false
				for _, r := range s.cfg.UserResolvers(ctx, *q.User, *q.Realm) {
					ok = ok || c.resolver.match(r)
				}
				if !ok {
					continue
				}
			} else if !c.resolver.match(*q.Resolver) {
				continue
			}
		}
		if len(p.PINode) > 0 && !slices.Contains(p.PINode, s.cfg.NodeName) {
			continue
		}
		if len(c.validAgent) > 0 && (agent == "" || !slices.Contains(c.validAgent, agent)) {
			continue
		}
		if !c.clients.Empty() && (!q.Client.IsValid() || !c.clients.Matches(q.Client)) {
			continue
		}
		if !c.validTime || !c.times.Contains(now) {
			continue
		}
		if !q.SkipConditions && c.conditions {
			if data == nil {
				d := ConditionData{}
				if q.Data != nil {
					d = q.Data()
				}
				data = &d
			}
			ok, err := EvalConditions(p.Name, p.Conditions, *data, now)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func hasActive(cs []Condition) bool {
	for _, c := range cs {
		if c.Active {
			return true
		}
	}
	return false
}

// ActiveInScope reports whether any active policy exists in scope.
func (s *Service) ActiveInScope(ctx context.Context, scope string) (bool, error) {
	set, err := s.load(ctx)
	if err != nil {
		return false, err
	}
	return set.isActive(scope), nil
}

// Allowed is the permission gate for admin and user rights: allowed when a
// policy matches, or when no active policy exists in the scope at all. It
// returns the names of the matching policies.
func (s *Service) Allowed(ctx context.Context, q Query) (bool, []string, error) {
	any, err := s.ActiveInScope(ctx, q.Scope)
	if err != nil || !any {
		return true, nil, err
	}
	ps, err := s.Match(ctx, q)
	if err != nil {
		return false, nil, err
	}
	return len(ps) > 0, names(ps), nil
}

func names(ps []Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// Values returns the values the matching policies give q.Action, each
// with the names of the policies that gave it. Quoted values ('a b') are
// one value; text actions keep the whole string; others split at
// whitespace. In unique mode only the policies of the lowest priority
// number count, and two different values there are an error.
func (s *Service) Values(ctx context.Context, q Query, unique, text bool) (map[string][]string, error) {
	cs, err := s.matchCompiled(ctx, q)
	if err != nil {
		return nil, err
	}
	return values(cs, q.Action, unique, text)
}

// values collects the values cs give action (see Values).
func values(cs []*compiled, action string, unique, text bool) (map[string][]string, error) {
	out := map[string][]string{}
	best := 0
	for _, c := range cs {
		p := &c.p
		v, ok := c.actions[action].(string)
		if !ok {
			continue
		}
		if unique {
			if best != 0 && p.Priority > best {
				break
			}
			best = p.Priority
		}
		var vals []string
		switch {
		case len(v) >= 2 && strings.HasPrefix(v, "'") && strings.HasSuffix(v, "'"):
			vals = []string{v[1 : len(v)-1]}
		case text:
			vals = []string{v}
		default:
			vals = strings.Fields(v)
		}
		for _, val := range vals {
			out[val] = append(out[val], p.Name)
		}
	}
	if unique && len(out) > 1 {
		var ns []string
		for _, n := range out {
			ns = append(ns, n...)
		}
		slices.Sort(ns)
		ns = slices.Compact(ns)
		return nil, apierr.New(apierr.Policy, "There are policies with conflicting actions: "+listRepr(ns))
	}
	return out, nil
}
