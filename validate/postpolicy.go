package validate

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
)

// postPolicies apply the policies that shape the answer of a check once
// it is decided, in privacyIDEA's order (its postpolicies): the AUTHZ
// checks of the token that authenticated, the user and detail policies,
// authorized=deny_access, then after a success client_mode_per_user and
// enroll_via_multichallenge, and hide_specific_error_message.
type postPolicies struct {
	v     *Validator
	t     *target
	pol   *policies
	enr   *enroller
	modes *clientModes
}

// apply applies the policies that shape a decision of /validate/check, in
// privacyIDEA's order: the AUTHZ checks of the token that authenticated
// (serial, tokentype, tokeninfo), add_user_in_response and
// add_resolver_in_response, no_detail_on_success and no_detail_on_fail,
// authorized=deny_access and hide_specific_error_message.
func (pp *postPolicies) apply(ctx context.Context, res Response) (Response, error) {
	if !pp.pol.any() {
		return res, nil
	}
	typ := res.Type
	if res.Value {
		if err := pp.tokenChecks(ctx, res); err != nil {
			return res, err
		}
		if err := pp.addUser(ctx, &res); err != nil {
			return res, err
		}
	}
	all, err := pp.pol.setAll(ctx)
	if err != nil {
		return res, err
	}
	action := "no_detail_on_fail"
	if res.Value {
		action = "no_detail_on_success"
	}
	if name, err := flagOf(all, action); err != nil {
		return res, err
	} else if name != "" {
		pp.pol.note(name)
		res.NoDetail = true
	}
	if err := pp.pol.authorized(ctx); err != nil {
		return res, err
	}
	if res.Value {
		if res, err = pp.afterSuccess(ctx, res, typ); err != nil {
			return res, err
		}
	}
	if !res.Value && !res.Challenge {
		if name, err := pp.pol.flag(ctx, policy.ScopeAuthentication, "hide_specific_error_message"); err != nil {
			return res, err
		} else if name != "" {
			pp.pol.note(name)
			res = Response{User: res.User, Message: MsgAuthFailed, SendFailed: res.SendFailed}
		}
	}
	return res, nil
}

// authorized is AUTHZ authorized=deny_access.
func (p *policies) authorized(ctx context.Context) error {
	sc, err := p.set(ctx, policy.ScopeAuthorization)
	if err != nil || sc.Empty() {
		return err
	}
	v, names, err := unique(sc, "authorized")
	if err != nil {
		return err
	}
	if strings.EqualFold(v, "deny_access") {
		p.note(names...)
		return ErrNotAuthorized
	}
	return nil
}

// tokenChecks are the AUTHZ checks of the token that authenticated: its
// serial must match a serial policy, its type be listed by a tokentype
// policy, and its tokeninfo match every tokeninfo policy.
func (pp *postPolicies) tokenChecks(ctx context.Context, res Response) error {
	serial := res.Serial
	if serial == "" {
		return nil
	}
	all, err := pp.pol.setAll(ctx)
	if err != nil || all.Empty() {
		return err
	}
	pats, names, err := values(all, "serial")
	if err != nil {
		return err
	}
	if len(pats) > 0 {
		ok := false
		for _, p := range pats {
			re, err := regexp.Compile(p)
			if err == nil && re.MatchString(serial) {
				ok = true
				break
			}
		}
		if !ok {
			pp.pol.note(names...)
			return ErrSerialNotAllowed
		}
	}
	if typ := res.Type; typ != "" {
		sc, err := pp.pol.set(ctx, policy.ScopeAuthorization)
		if err != nil {
			return err
		}
		lists, names, err := values(sc, "tokentype")
		if err != nil {
			return err
		}
		if len(lists) > 0 && !slices.ContainsFunc(lists, func(l string) bool { return containsFold(strings.Fields(l), typ) }) {
			pp.pol.note(names...)
			return ErrTypeNotAllowed
		}
	}
	specs, names, err := values(all, "tokeninfo")
	if err != nil || len(specs) == 0 {
		return err
	}
	t, err := pp.v.cfg.Tokens.Get(ctx, serial)
	if err != nil {
		// A token that removed itself on success (registration) has no
		// tokeninfo left to check.
		if apierr.Is(err, apierr.ResourceNotFound) {
			return nil
		}
		return err
	}
	for i, spec := range specs {
		parts := strings.Split(spec, "/")
		if len(parts) != 3 {
			continue // not key/regex/: privacyIDEA ignores it too
		}
		re, err := regexp.Compile(parts[1])
		if err != nil {
			continue
		}
		if !re.MatchString(t.Info[parts[0]]) {
			pp.pol.note(names[i])
			return apierr.New(apierr.Policy, fmt.Sprintf("Tokeninfo field %s with contents does not match regular expression.", parts[0]))
		}
	}
	return nil
}

// addUser is add_user_in_response (detail.user: the user's attributes,
// never a password) and add_resolver_in_response (detail["user-resolver"]
// and detail["user-realm"]), both on success only.
func (pp *postPolicies) addUser(ctx context.Context, res *Response) error {
	if res.User.Login == "" {
		return nil
	}
	sc, err := pp.pol.set(ctx, policy.ScopeAuthorization)
	if err != nil || sc.Empty() {
		return err
	}
	if name, err := flagOf(sc, "add_user_in_response"); err != nil {
		return err
	} else if name != "" && res.User.Found() {
		info := map[string]any{}
		in := pp.t.in
		if in == nil || in.Name() != res.User.Resolver {
			// The serial path knows the owner but not its user store.
			if _, in, err = pp.v.cfg.Realms.ResolveIn(ctx, res.User.Login, res.User.Realm, res.User.Resolver); err != nil {
				return err
			}
		}
		ui, err := in.User(ctx, res.User.UID)
		if err != nil {
			return err
		}
		for k, v := range ui {
			if !strings.EqualFold(k, "password") && v != nil {
				info[k] = v
			}
		}
		pp.pol.note(name)
		res.UserAttributes = info
	}
	if name, err := flagOf(sc, "add_resolver_in_response"); err != nil {
		return err
	} else if name != "" {
		pp.pol.note(name)
		res.AddResolver = true
	}
	return nil
}

// afterSuccess runs after a success that the policies let stand:
// client_mode_per_user remembers the token type, and
// enroll_via_multichallenge may turn the success into an enrollment
// challenge. typ is the type that authenticated ("" for none).
func (pp *postPolicies) afterSuccess(ctx context.Context, res Response, typ string) (Response, error) {
	if err := pp.modes.remember(ctx, typ); err != nil {
		return res, err
	}
	return pp.enr.enroll(ctx, res)
}
