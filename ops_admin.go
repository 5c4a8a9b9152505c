package authsrv

import (
	"context"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
)

// errLocalOnly refuses the management of local administrators to anyone
// but the server's own operator: privacyIDEA manages them with pi-manage,
// not through its API.
var errLocalOnly = apierr.New(apierr.AuthMissingRight, "Authentication failure. Local administrators are managed on the server itself.")

// adminOp runs one change of the local administrator accounts (the
// `authsrv admin` commands, directly or through the control socket) with
// its audit entry in the change's transaction.
func (o *Ops) adminOp(ctx context.Context, who caller.Caller, event, action, name string, fn func(ctx context.Context, r *opRun) error) error {
	return o.run(ctx, who, opSpec{event: event, action: action}, func(ctx context.Context, r *opRun) error {
		if !who.Trusted() {
			return errLocalOnly
		}
		r.Entry.Info = "administrator " + name
		return fn(ctx, r)
	})
}

// AddAdmin creates the local administrator name (trusted callers only,
// event admin_add).
func (o *Ops) AddAdmin(ctx context.Context, who caller.Caller, name, password string) error {
	return o.adminOp(ctx, who, "admin_add", "POST /admins", name, func(ctx context.Context, r *opRun) error {
		return o.s.admins.Add(ctx, name, password, r.Audit)
	})
}

// SetAdminPassword replaces a local administrator's password (trusted
// callers only, event admin_passwd).
func (o *Ops) SetAdminPassword(ctx context.Context, who caller.Caller, name, password string) error {
	return o.adminOp(ctx, who, "admin_passwd", "PUT /admins/"+name, name, func(ctx context.Context, r *opRun) error {
		return o.s.admins.SetPassword(ctx, name, password, r.Audit)
	})
}

// DeleteAdmin removes a local administrator (trusted callers only, event
// admin_delete).
func (o *Ops) DeleteAdmin(ctx context.Context, who caller.Caller, name string) error {
	return o.adminOp(ctx, who, "admin_delete", "DELETE /admins/"+name, name, func(ctx context.Context, r *opRun) error {
		return o.s.admins.Delete(ctx, name, r.Audit)
	})
}
