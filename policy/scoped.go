package policy

import (
	"context"
	"time"
)

// Snapshot is the compiled policy set of one configuration revision. Taking
// it reads the store once; everything matched against it afterwards is
// local, so a request that needs many actions (an authentication reads a
// dozen) pays one store read instead of one per action.
type Snapshot struct {
	s   *Service
	set *compiledSet
}

// Snapshot returns the current policy set.
func (s *Service) Snapshot(ctx context.Context) (*Snapshot, error) {
	set, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	return &Snapshot{s: s, set: set}, nil
}

// Revision is the configuration revision the snapshot was read at.
func (sn *Snapshot) Revision() uint64 { return sn.set.rev }

// Active reports whether any active policy exists in scope.
func (sn *Snapshot) Active(scope string) bool { return sn.set.isActive(scope) }

// Scoped returns the active policies of q.Scope that match q's user,
// realm, resolver, client, user agent, node and time, whatever their
// actions (q.Action is ignored). Conditions are evaluated per policy when
// an action is read, so a condition is only ever evaluated for a policy
// that gives the action asked for, as with Match.
func (sn *Snapshot) Scoped(ctx context.Context, q Query) (*Scoped, error) {
	sc := &Scoped{data: q.Data, skipConditions: q.SkipConditions, now: sn.s.cfg.Now()}
	if !sn.Active(q.Scope) {
		return sc, nil
	}
	q.Action = ""
	q.SkipConditions = true
	cs, err := sn.s.matchSet(ctx, sn.set, q)
	if err != nil {
		return nil, err
	}
	sc.cs = cs
	return sc, nil
}

// Scoped is the set of policies of one scope that match one request; each
// action is derived from it without further matching.
type Scoped struct {
	cs             []*compiled
	data           func() ConditionData
	skipConditions bool
	now            time.Time

	loaded bool
	cd     ConditionData
	cond   map[*compiled]bool
}

// Empty reports whether no policy matched at all.
func (sc *Scoped) Empty() bool { return sc == nil || len(sc.cs) == 0 }

// forAction returns the policies that give action, in priority order, with
// their conditions checked.
func (sc *Scoped) forAction(action string) ([]*compiled, error) {
	if sc.Empty() {
		return nil, nil
	}
	var out []*compiled
	for _, c := range sc.cs {
		if !c.action.match(action) {
			continue
		}
		if !sc.skipConditions && c.conditions {
			ok, err := sc.conditionsHold(c)
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

func (sc *Scoped) conditionsHold(c *compiled) (bool, error) {
	if v, ok := sc.cond[c]; ok {
		return v, nil
	}
	if !sc.loaded {
		if sc.data != nil {
			sc.cd = sc.data()
		}
		sc.loaded = true
	}
	ok, err := EvalConditions(c.p.Name, c.p.Conditions, sc.cd, sc.now)
	if err != nil {
		return false, err
	}
	if sc.cond == nil {
		sc.cond = map[*compiled]bool{}
	}
	sc.cond[c] = ok
	return ok, nil
}

// Match returns the policies that give action, by priority: what
// Service.Match returns for the same query with Action set.
func (sc *Scoped) Match(action string) ([]Policy, error) {
	cs, err := sc.forAction(action)
	if err != nil {
		return nil, err
	}
	out := make([]Policy, len(cs))
	for i, c := range cs {
		out[i] = c.p
	}
	return out, nil
}

// Values is Service.Values for action over the scoped policies.
func (sc *Scoped) Values(action string, unique, text bool) (map[string][]string, error) {
	cs, err := sc.forAction(action)
	if err != nil || len(cs) == 0 {
		return map[string][]string{}, err
	}
	return values(cs, action, unique, text)
}

// Setting is what one policy gives an action.
type Setting struct {
	// Name and Priority are the policy's.
	Name     string
	Priority int
	// Value is the action's value: a string, or true for a bare action.
	Value any
}

// Settings returns what each policy that gives action gives it, by
// priority (for actions read as one value of the best priority, or whose
// values all apply one after the other, like mangle).
func (sc *Scoped) Settings(action string) ([]Setting, error) {
	cs, err := sc.forAction(action)
	if err != nil {
		return nil, err
	}
	out := make([]Setting, 0, len(cs))
	for _, c := range cs {
		out = append(out, Setting{Name: c.p.Name, Priority: c.p.Priority, Value: c.actions[action]})
	}
	return out, nil
}
