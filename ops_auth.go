package authsrv

import (
	"context"
	"errors"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/user"
)

// Refusals of a login, as privacyIDEA words them.
var (
	ErrWrongCredentials = apierr.New(apierr.AuthWrongCredentials, "Authentication failure. Wrong credentials")
	ErrMissingUsername  = apierr.New(apierr.AuthMissingUsername, "Authentication failure. Missing Username")
)

// LoginRequest is a login of POST /auth: a local administrator's name, or
// a realm user's login (login@realm, or with Realm).
type LoginRequest struct {
	Username, Password, Realm string
}

// Login is who logged in: a local administrator (role Admin, no realm), a
// realm user (role User), or a user of a superuser realm (role Admin with
// its realm).
type Login struct {
	Name, Realm string
	Role        caller.Role
	// Stamp is a local administrator's session stamp: its session token
	// carries it, and the token is valid only while Admins().Session
	// accepts it (the account exists, is enabled and kept its password).
	Stamp string
}

// Login checks a login of POST /auth (event auth) and audits it: local
// administrators first, by the raw name whatever the realm, then the realm
// user through its user store. A user store that cannot be reached and an
// unknown user both end as wrong credentials (the store failure is
// logged); an unknown realm costs a dummy hash like a wrong password. The
// result of a realm user counts for auth_max_fail and auth_max_success.
// Issuing the session token is the caller's part.
func (o *Ops) Login(ctx context.Context, who caller.Caller, req LoginRequest) (Login, error) {
	var out Login
	spec := opSpec{event: "auth", action: "POST /auth", target: Target{User: req.Username, Realm: req.Realm}}
	err := o.run(ctx, who, spec, func(ctx context.Context, r *opRun) error {
		if req.Realm != "" && !o.s.realms.Exists(ctx, req.Realm) {
			o.s.hasher.Dummy(ctx, req.Password)
			return apierr.New(apierr.AuthWrongCredentials, "Authentication failure. Unknown realm: "+req.Realm+".")
		}
		if req.Username == "" {
			return ErrMissingUsername
		}
		stamp, ok, err := o.s.admins.Login(ctx, req.Username, req.Password)
		if err != nil {
			return err
		}
		if ok {
			out = Login{Name: req.Username, Role: caller.Admin, Stamp: stamp}
		} else {
			u, ok, err := o.realmUserLogin(ctx, req)
			if err != nil {
				return err
			}
			if !ok {
				return ErrWrongCredentials
			}
			out = Login{Name: u.Login, Realm: u.Realm, Role: caller.User}
			if o.s.realms.IsSuperuser(u.Realm) {
				out.Role = caller.Admin
			}
		}
		r.Entry.Authentication = "ACCEPT"
		return nil
	})
	return out, err
}

// realmUserLogin checks a realm user's password with its user store and
// records the result of a user it found for the authentication counters.
func (o *Ops) realmUserLogin(ctx context.Context, req LoginRequest) (user.User, bool, error) {
	login, realmName := req.Username, req.Realm
	if realmName == "" {
		login, realmName = o.splitUser(ctx, req.Username)
	}
	u, in, err := o.s.realms.Resolve(ctx, login, realmName)
	if err != nil {
		if !errors.Is(err, realm.ErrNoUser) && !errors.Is(err, realm.ErrNotFound) {
			zerolog.Ctx(ctx).Warn().Err(err).Str("realm", realmName).Msg("user lookup for /auth failed")
		}
		return u, false, nil
	}
	ok, err := in.CheckPassword(ctx, u.UID, req.Password)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("resolver", u.Resolver).Msg("password check for /auth failed")
		ok = false
	}
	if err := o.s.validator.RecordLogin(ctx, u, ok); err != nil {
		return u, false, err
	}
	return u, ok, nil
}

// splitUser separates a realm from a user name as privacyIDEA's
// split_user does: "login@realm" at the last "@" unless the system
// setting splitAtSign is off, "realm\login" otherwise, each only when the
// realm exists.
func (o *Ops) splitUser(ctx context.Context, s string) (login, realmName string) {
	return user.Split(s, func(r string) bool { return o.s.realms.Exists(ctx, r) }, !o.s.tokens.Settings().NoSplitAtSign)
}
