package authsrv

import (
	"context"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/machine"
)

// Rights of the service IDs (admin scope).
const (
	rightServiceIDAdd    = "serviceid_add"
	rightServiceIDList   = "serviceid_list"
	rightServiceIDDelete = "serviceid_delete"
)

// adminOnlyOp runs an administrators' operation: right (checked for
// administrators; a user is refused as the admin-only route refuses
// him), event, and fn, which hands r.Audit to its write.
func (o *Ops) adminOnlyOp(ctx context.Context, who caller.Caller, event, action, right string, fn func(ctx context.Context, r *opRun) error) error {
	return o.run(ctx, who, opSpec{event: event, action: action, right: adminRight(who, right)},
		func(ctx context.Context, r *opRun) error {
			if !who.IsAdmin() {
				return errAdminOnly
			}
			return fn(ctx, r)
		})
}

// SetServiceID creates the service ID name or changes its description
// (right serviceid_add, event serviceid_add) and returns its id.
func (o *Ops) SetServiceID(ctx context.Context, who caller.Caller, name, description string) (int, error) {
	var id int
	err := o.adminOnlyOp(ctx, who, "serviceid_add", "POST /serviceid/"+name, rightServiceIDAdd,
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text("name: "+name, 512)
			var err error
			id, err = o.s.serviceIDs.Set(ctx, name, description, r.Audit)
			return err
		})
	return id, err
}

// ServiceIDs lists the service IDs, or only the one named name when it is
// not "" (none when it is unknown) (right serviceid_list, event
// serviceid_list).
func (o *Ops) ServiceIDs(ctx context.Context, who caller.Caller, name string) ([]machine.ServiceID, error) {
	var out []machine.ServiceID
	err := o.readConfig(ctx, who, "serviceid_list", "GET /serviceid/"+name, rightServiceIDList, Target{},
		func(ctx context.Context, r *opRun) error {
			list, err := o.s.serviceIDs.List(ctx)
			if err != nil {
				return err
			}
			out = []machine.ServiceID{}
			for _, sid := range list {
				if name == "" || sid.Name == name {
					out = append(out, sid)
				}
			}
			return nil
		})
	return out, err
}

// DeleteServiceID removes the service ID name (right serviceid_delete,
// event serviceid_delete); machine.ErrServiceIDNotFound when unknown.
func (o *Ops) DeleteServiceID(ctx context.Context, who caller.Caller, name string) error {
	return o.adminOnlyOp(ctx, who, "serviceid_delete", "DELETE /serviceid/"+name, rightServiceIDDelete,
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text("name: "+name, 512)
			_, err := o.s.serviceIDs.Delete(ctx, name, r.Audit)
			return err
		})
}
