package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"

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
}

type compiledSet struct {
	rev    uint64
	all    []*compiled
	active map[string]int // scope -> active policies
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
		set.all = append(set.all, c)
		if p.Active {
			set.active[p.Scope]++
		}
	}
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

var (
	reCache sync.Map // item -> *regexp.Regexp (nil when not a valid pattern)
	agentRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+`)
)

// fullMatch tries item as a full-match regular expression.
func fullMatch(item, value string) bool {
	if len(item) > 256 {
		return false
	}
	v, ok := reCache.Load(item)
	if !ok {
		re, err := regexp.Compile("^(?:" + item + ")$")
		if err != nil {
			re = nil
		}
		v, _ = reCache.LoadOrStore(item, re)
	}
	re, _ := v.(*regexp.Regexp)
	return re != nil && re.MatchString(value)
}

// listMatch is privacyIDEA's generic list rule: an empty list matches;
// otherwise an item equal to the value, "*", or a regexp fully matching it
// finds it, and a "!" or "-" item equal to it excludes it.
func listMatch(items []string, value string, fold bool) bool {
	if len(items) == 0 {
		return true
	}
	if fold {
		value = strings.ToLower(value)
	}
	found, excluded := false, false
	for _, it := range items {
		if fold {
			it = strings.ToLower(it)
		}
		if len(it) > 1 && (it[0] == '!' || it[0] == '-') {
			if it[1:] == value {
				excluded = true
			}
			continue
		}
		if it == value || it == "*" || fullMatch(it, value) {
			found = true
		}
	}
	return found && !excluded
}

// actionMatch applies the list rule to the policy's action keys; an empty
// action set matches every action.
func actionMatch(actions map[string]any, action string) bool {
	if len(actions) == 0 {
		return true
	}
	keys := make([]string, 0, len(actions))
	for k := range actions {
		keys = append(keys, k)
	}
	return listMatch(keys, action, false)
}

// resolverMatch is step 3: exclusions are ignored for resolvers.
func resolverMatch(items []string, value string) bool {
	if len(items) == 0 {
		return true
	}
	for _, it := range items {
		if len(it) > 1 && (it[0] == '!' || it[0] == '-') {
			continue
		}
		if it == value || it == "*" || fullMatch(it, value) {
			return true
		}
	}
	return false
}

// Match returns the active policies matching q, by priority.
func (s *Service) Match(ctx context.Context, q Query) ([]Policy, error) {
	set, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	agent := strings.ToLower(agentRe.FindString(q.UserAgent))
	now := s.cfg.Now()
	var data *ConditionData
	var out []Policy
	for _, c := range set.all {
		p := &c.p
		if !p.Active || p.Scope != q.Scope {
			continue
		}
		if q.Action != "" && !actionMatch(c.actions, q.Action) {
			continue
		}
		if q.Realm != nil && !listMatch(p.Realm, *q.Realm, false) {
			continue
		}
		if q.Scope == ScopeAdmin && q.AdminRealm != nil && !listMatch(p.AdminRealm, *q.AdminRealm, false) {
			continue
		}
		if q.User != nil && !listMatch(p.User, *q.User, p.UserCaseInsensitive) {
			continue
		}
		if q.Scope == ScopeAdmin && q.AdminUser != nil && !listMatch(p.AdminUser, *q.AdminUser, p.UserCaseInsensitive) {
			continue
		}
		if q.Resolver != nil {
			if p.CheckAllResolvers && q.User != nil && q.Realm != nil && s.cfg.UserResolvers != nil {
				ok := false
				for _, r := range s.cfg.UserResolvers(ctx, *q.User, *q.Realm) {
					ok = ok || resolverMatch(p.Resolver, r)
				}
				if !ok {
					continue
				}
			} else if !resolverMatch(p.Resolver, *q.Resolver) {
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
		if !q.SkipConditions && hasActive(p.Conditions) {
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
		out = append(out, *p)
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
	return set.active[scope] > 0, nil
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
	ps, err := s.Match(ctx, q)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	best := 0
	for _, p := range ps {
		v, ok := ParseActions(p.Action)[q.Action].(string)
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
