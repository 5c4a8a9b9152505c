package authsrv

import (
	"context"
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

// SetPolicy creates or replaces the policy p.Name (right policywrite,
// event set_policy) and returns its id. p is the whole policy: a partial
// update is the caller's merge of Policies().Get with its changes.
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
// and stores all its policies or none (right policywrite, event
// import_policy). It returns how many were imported.
func (o *Ops) ImportPolicies(ctx context.Context, who caller.Caller, data []byte) (int, error) {
	var n int
	err := o.run(ctx, who, opSpec{event: "import_policy", action: "POST /policy/import", right: rightPolicyWrite},
		func(ctx context.Context, r *opRun) error {
			ps, err := policy.Import(data)
			if err != nil {
				return err
			}
			n, err = o.s.policies.Import(ctx, ps, r.Audit)
			return err
		})
	return n, err
}
