package authsrv

import (
	"context"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/realm"
)

// SetRealm creates or reconfigures the realm name with its node-less
// resolver entries (right resolverwrite, event set_realm). Unknown
// resolvers are reported in failed; the realm is written all the same.
func (o *Ops) SetRealm(ctx context.Context, who caller.Caller, name string, entries []realm.Entry) (added, failed []string, err error) {
	err = o.run(ctx, who, opSpec{event: "set_realm", action: "POST /realm/" + name, right: rightResolverWrite, target: Target{Realm: name}},
		func(ctx context.Context, r *opRun) error {
			var err error
			added, failed, err = o.s.realms.Set(ctx, name, entries, r.Audit)
			return err
		})
	return added, failed, err
}

// SetRealmNode replaces the entries of the realm name that are bound to
// node (right resolverwrite, event set_realm_node).
func (o *Ops) SetRealmNode(ctx context.Context, who caller.Caller, name, node string, entries []realm.Entry) (added, failed []string, err error) {
	err = o.run(ctx, who, opSpec{event: "set_realm_node", action: "POST /realm/" + name + "/node/" + node, right: rightResolverWrite, target: Target{Realm: name}},
		func(ctx context.Context, r *opRun) error {
			var err error
			added, failed, err = o.s.realms.SetNode(ctx, name, node, entries, r.Audit)
			return err
		})
	return added, failed, err
}

// DeleteRealm removes the realm name (right resolverdelete, event
// delete_realm) and returns its id; with deleteAttrs the custom
// attributes of its users go too, else they make it refuse.
func (o *Ops) DeleteRealm(ctx context.Context, who caller.Caller, name string, deleteAttrs bool) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "delete_realm", action: "DELETE /realm/" + name, right: rightResolverDel, target: Target{Realm: name}},
		func(ctx context.Context, r *opRun) error {
			var err error
			id, err = o.s.realms.Delete(ctx, name, deleteAttrs, r.Audit)
			return err
		})
	return id, err
}

// SetDefaultRealm makes the realm name the default (right resolverwrite,
// event set_default_realm) and returns its id.
func (o *Ops) SetDefaultRealm(ctx context.Context, who caller.Caller, name string) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "set_default_realm", action: "POST /defaultrealm/" + name, right: rightResolverWrite, target: Target{Realm: name}},
		func(ctx context.Context, r *opRun) error {
			var err error
			id, err = o.s.realms.SetDefault(ctx, name, r.Audit)
			return err
		})
	return id, err
}

// ClearDefaultRealm removes the default flag (right resolverdelete, event
// clear_default_realm) and returns the former default's id, 0 when there
// was none.
func (o *Ops) ClearDefaultRealm(ctx context.Context, who caller.Caller) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "clear_default_realm", action: "DELETE /defaultrealm", right: rightResolverDel},
		func(ctx context.Context, r *opRun) error {
			var err error
			id, err = o.s.realms.ClearDefault(ctx, r.Audit)
			return err
		})
	return id, err
}
