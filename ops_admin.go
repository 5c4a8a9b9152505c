package authsrv

import (
	"context"
	"errors"

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

// AdoptAdmin creates the local administrator name from a password hash
// made by another system (trusted callers only, event admin_adopt): phc is
// the Argon2 PHC string of pepper followed by the password, as
// privacyIDEA hashes its administrators' passwords with its PI_PEPPER.
// The account keeps its password; its first login re-hashes it without
// the pepper (see admin.Service.Adopt). Neither the hash nor the pepper
// is audited.
func (o *Ops) AdoptAdmin(ctx context.Context, who caller.Caller, name, phc string, pepper []byte) error {
	return o.adminOp(ctx, who, "admin_adopt", "POST /admins", name, func(ctx context.Context, r *opRun) error {
		return o.s.admins.Adopt(ctx, name, phc, pepper, r.Audit)
	})
}

// SetAdminPassword replaces a local administrator's password (trusted
// callers only, event admin_passwd); its session tokens are refused from
// the next request on.
func (o *Ops) SetAdminPassword(ctx context.Context, who caller.Caller, name, password string) error {
	return o.adminOp(ctx, who, "admin_passwd", "PUT /admins/"+name, name, func(ctx context.Context, r *opRun) error {
		return o.s.admins.SetPassword(ctx, name, password, r.Audit)
	})
}

// DeleteAdmin removes a local administrator (trusted callers only, event
// admin_delete); its session tokens are refused from the next request on.
func (o *Ops) DeleteAdmin(ctx context.Context, who caller.Caller, name string) error {
	return o.adminOp(ctx, who, "admin_delete", "DELETE /admins/"+name, name, func(ctx context.Context, r *opRun) error {
		return o.s.admins.Delete(ctx, name, r.Audit)
	})
}

// SetAdminDisabled disables a local administrator (its logins fail and
// its session tokens are refused from the next request on) or enables it
// again (trusted callers only, events admin_disable and admin_enable).
// Tokens from before a disabling stay refused after enabling.
func (o *Ops) SetAdminDisabled(ctx context.Context, who caller.Caller, name string, disabled bool) error {
	event, action := "admin_enable", "POST /admins/"+name+"/enable"
	if disabled {
		event, action = "admin_disable", "POST /admins/"+name+"/disable"
	}
	return o.adminOp(ctx, who, event, action, name, func(ctx context.Context, r *opRun) error {
		return o.s.admins.SetDisabled(ctx, name, disabled, r.Audit)
	})
}

// JWTRotation tunes RotateJWTKey.
type JWTRotation struct {
	// DropOld drops every older key at once instead of letting it verify
	// its tokens until they expire: every session and API key signed
	// before is refused from then on (a key that leaked).
	DropOld bool
}

// RotateJWTKey adds a new current key to the JWT key ring (trusted callers
// only, event jwt_rotate): new tokens carry its kid, the previous key
// verifies the tokens it signed until the last of them expires and is then
// dropped (at once with DropOld). It returns the new key. The ring file is
// written before the server signs with the new key; a server whose key the
// program gave (WithJWTKey) refuses.
func (o *Ops) RotateJWTKey(ctx context.Context, who caller.Caller, opt JWTRotation) (JWTKey, error) {
	var out JWTKey
	err := o.run(ctx, who, opSpec{event: "jwt_rotate", action: "POST /jwt/rotate"}, func(ctx context.Context, r *opRun) error {
		if !who.Trusted() {
			return errLocalOnly
		}
		k, err := o.s.jwtKeys.rotate(o.s.cfg.rand, o.s.cfg.now(), o.s.cfg.jwtLifetime, opt.DropOld)
		if errors.Is(err, ErrJWTKeyGiven) {
			return apierr.New(apierr.ConfigAdmin, ErrJWTKeyGiven.Error()).Wrap(ErrJWTKeyGiven)
		}
		if err != nil {
			return err
		}
		out = k
		r.Entry.Info = "JWT key rotated: new key id " + k.KID
		if opt.DropOld {
			r.Entry.Info += "; the older keys were dropped"
		}
		return nil
	})
	return out, err
}
