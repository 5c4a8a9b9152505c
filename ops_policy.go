package authsrv

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
)

// Rights of the configuration operations (admin scope), as the HTTP
// routes checked them before the operations moved into the library.
const (
	rightPolicyWrite   = "policywrite"
	rightPolicyDelete  = "policydelete"
	rightResolverWrite = "resolverwrite"
	rightResolverDel   = "resolverdelete"
	rightSMTPWrite     = "smtpserver_write"
	rightSMSWrite      = "smsgateway_write"
	rightRadiusWrite   = "radiusserver_write"
	rightAddUser       = "adduser"
	rightUpdateUser    = "updateuser"
	rightDeleteUser    = "deleteuser"
)

// policyTarget is what an administrator's policywrite right is checked
// against: the realms, resolvers and users the policy is about (joined as
// one request parameter carries them).
func policyTarget(p policy.Policy) Target {
	return Target{User: strings.Join(p.User, ","), Realm: strings.Join(p.Realm, ","), Resolver: strings.Join(p.Resolver, ",")}
}

// PolicyUpdate is a POST /policy/<name>: the attributes it sends over the
// stored policy. A nil field keeps the stored value (a new policy gets
// priority 1 and empty lists); Active (nil: true), CheckAllResolvers,
// UserCaseInsensitive and Description are reset when not sent, as
// privacyIDEA resets them.
type PolicyUpdate struct {
	Scope                                                        string
	Action                                                       *string
	Realm, Resolver, User, AdminRealm, AdminUser, Client, PINode *[]string
	UserAgents                                                   *[]string
	Time                                                         *string
	Priority                                                     *int
	Active                                                       *bool
	CheckAllResolvers, UserCaseInsensitive                       bool
	Description                                                  string
	Conditions                                                   *[]policy.Condition
}

// merge is u over the stored policy old (exists false: none).
func (u PolicyUpdate) merge(name string, old policy.Policy, exists bool) (policy.Policy, error) {
	p := policy.Policy{Name: name, Priority: 1}
	if exists {
		p = old
	}
	if name == "" {
		return p, apierr.MissingParameter("name")
	}
	if p.Scope = u.Scope; p.Scope == "" {
		return p, apierr.MissingParameter("scope")
	}
	if u.Action != nil {
		p.Action = *u.Action
	} else if !exists && p.Scope != policy.ScopeUser {
		return p, apierr.MissingParameter("action")
	}
	for _, f := range []struct {
		dst *[]string
		v   *[]string
	}{{&p.Realm, u.Realm}, {&p.Resolver, u.Resolver}, {&p.User, u.User}, {&p.AdminRealm, u.AdminRealm},
		{&p.AdminUser, u.AdminUser}, {&p.Client, u.Client}, {&p.PINode, u.PINode}, {&p.UserAgents, u.UserAgents}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if u.Time != nil {
		p.Time = *u.Time
	}
	if u.Priority != nil {
		p.Priority = *u.Priority
	}
	p.Active = u.Active == nil || *u.Active
	p.CheckAllResolvers, p.UserCaseInsensitive, p.Description = u.CheckAllResolvers, u.UserCaseInsensitive, u.Description
	if u.Conditions != nil {
		p.Conditions = *u.Conditions
	}
	return p, nil
}

// UpdatePolicy applies u to the policy name, creating it when there is
// none (right policywrite, event set_policy), and returns its id. The merge
// commits only over the version it read: a concurrent change of the same
// policy makes it merge again rather than be lost.
func (o *Ops) UpdatePolicy(ctx context.Context, who caller.Caller, name string, u PolicyUpdate) (int, error) {
	old, exists, gerr := o.s.policies.Get(ctx, name)
	p, merr := u.merge(name, old, exists)
	var id int
	err := o.run(ctx, who, opSpec{event: "set_policy", action: "POST /policy/" + name, right: rightPolicyWrite, target: policyTarget(p)},
		func(ctx context.Context, r *opRun) error {
			if gerr != nil {
				return gerr
			}
			if merr != nil {
				return merr
			}
			for attempt := 1; ; attempt++ {
				prev := &old
				if !exists {
					prev = nil
				}
				var err error
				id, err = o.s.policies.SetIf(ctx, p, prev, r.Audit)
				if !errors.Is(err, policy.ErrChanged) || attempt == maxMergeAttempts {
					return err
				}
				if old, exists, err = o.s.policies.Get(ctx, name); err != nil {
					return err
				}
				if p, err = u.merge(name, old, exists); err != nil {
					return err
				}
			}
		})
	return id, err
}

// maxMergeAttempts bounds how often UpdatePolicy merges again.
const maxMergeAttempts = 8

// SetPolicy creates or replaces the whole policy p (right policywrite,
// event set_policy) and returns its id; UpdatePolicy changes some of its
// attributes.
func (o *Ops) SetPolicy(ctx context.Context, who caller.Caller, p policy.Policy) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "set_policy", action: "POST /policy/" + p.Name, right: rightPolicyWrite, target: policyTarget(p)},
		func(ctx context.Context, r *opRun) error {
			if p.Name == "" {
				return apierr.MissingParameter("name")
			}
			if p.Scope == "" {
				return apierr.MissingParameter("scope")
			}
			var err error
			id, err = o.s.policies.Set(ctx, p, r.Audit)
			return err
		})
	return id, err
}

// EnablePolicy activates the policy name (right policywrite, event
// enable_policy) and returns its id.
func (o *Ops) EnablePolicy(ctx context.Context, who caller.Caller, name string) (int, error) {
	return o.setPolicyActive(ctx, who, name, true)
}

// DisablePolicy deactivates the policy name (right policywrite, event
// disable_policy) and returns its id.
func (o *Ops) DisablePolicy(ctx context.Context, who caller.Caller, name string) (int, error) {
	return o.setPolicyActive(ctx, who, name, false)
}

func (o *Ops) setPolicyActive(ctx context.Context, who caller.Caller, name string, active bool) (int, error) {
	verb, set := "disable", o.s.policies.Disable
	if active {
		verb, set = "enable", o.s.policies.Enable
	}
	var id int
	err := o.run(ctx, who, opSpec{event: verb + "_policy", action: "POST /policy/" + verb + "/" + name, right: rightPolicyWrite},
		func(ctx context.Context, r *opRun) error {
			var err error
			id, err = set(ctx, name, r.Audit)
			return err
		})
	return id, err
}

// DeletePolicy removes the policy name (right policydelete, event
// delete_policy) and returns its id.
func (o *Ops) DeletePolicy(ctx context.Context, who caller.Caller, name string) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "delete_policy", action: "DELETE /policy/" + name, right: rightPolicyDelete},
		func(ctx context.Context, r *opRun) error {
			var err error
			id, err = o.s.policies.Delete(ctx, name, r.Audit)
			return err
		})
	return id, err
}

// RenamePolicy gives the policy old the name name (right policywrite,
// event rename_policy) and returns its id.
func (o *Ops) RenamePolicy(ctx context.Context, who caller.Caller, old, name string) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "rename_policy", action: "PATCH /policy/" + old, right: rightPolicyWrite},
		func(ctx context.Context, r *opRun) error {
			if name == "" {
				return apierr.MissingParameter("name")
			}
			var err error
			id, err = o.s.policies.Rename(ctx, old, name, r.Audit)
			return err
		})
	return id, err
}

// ImportPolicies reads an exported policy file (policy.Import's format)
// and stores all its policies or none, in one store transaction with the
// audit entry that names how many (right policywrite, event
// import_policy). It returns how many were imported. The file is bounded
// by policy.MaxImportSize and policy.MaxImportPolicies (and the HTTP
// server's body limit before them).
func (o *Ops) ImportPolicies(ctx context.Context, who caller.Caller, data []byte) (int, error) {
	var n int
	err := o.run(ctx, who, opSpec{event: "import_policy", action: "POST /policy/import", right: rightPolicyWrite},
		func(ctx context.Context, r *opRun) error {
			ps, err := policy.Import(data)
			if err != nil {
				return err
			}
			r.Entry.Info = "imported " + strconv.Itoa(len(ps)) + " policies"
			if n, err = o.s.policies.Import(ctx, ps, r.Audit); err != nil {
				r.Entry.Info = ""
			}
			return err
		})
	return n, err
}
