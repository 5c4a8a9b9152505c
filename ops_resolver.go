package authsrv

import (
	"context"

	"github.com/authsrv/authsrv/caller"
)

// SetResolver creates or updates the resolver name from params (see
// resolver.Service.Save; right resolverwrite, event set_resolver) and
// returns its id. params may hold secrets: they are sealed, never audited.
func (o *Ops) SetResolver(ctx context.Context, who caller.Caller, name string, params map[string]string) (int, error) {
	var id int
	err := o.run(ctx, who, opSpec{event: "set_resolver", action: "POST /resolver/" + name, right: rightResolverWrite, target: Target{Resolver: name}},
		func(ctx context.Context, r *opRun) error {
			var err error
			id, err = o.s.resolvers.Save(ctx, name, params, r.Audit)
			return err
		})
	return id, err
}

// DeleteResolver removes the resolver name when no realm contains it
// (right resolverdelete, event delete_resolver) and returns its id, -1
// when it did not exist.
func (o *Ops) DeleteResolver(ctx context.Context, who caller.Caller, name string) (int, error) {
	id := -1
	err := o.run(ctx, who, opSpec{event: "delete_resolver", action: "DELETE /resolver/" + name, right: rightResolverDel, target: Target{Resolver: name}},
		func(ctx context.Context, r *opRun) error {
			var err error
			id, err = o.s.resolvers.Delete(ctx, name, r.Audit)
			return err
		})
	return id, err
}
