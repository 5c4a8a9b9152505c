package validate

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/policy"
)

// passthru authenticates a user without (counted) tokens against the user
// store or a RADIUS server, as the AUTH passthru policy says. ok is false
// when no policy applies or the password was not accepted: the request
// then goes on to the token check.
func (q *req) passthru(ctx context.Context) (Response, bool, error) {
	v, name, err := q.pol.valueNamed(ctx, policy.ScopeAuthentication, "passthru")
	if err != nil {
		return Response{}, false, err
	}
	if v == "" {
		// A bare passthru (privacyIDEA's old boolean form) is userstore.
		if name, err = q.pol.flag(ctx, policy.ScopeAuthentication, "passthru"); err != nil || name == "" {
			return Response{}, false, err
		}
		v = "userstore"
	}
	if strings.EqualFold(v, "userstore") {
		if q.in == nil {
			return Response{}, false, nil
		}
		ok, err := q.in.CheckPassword(ctx, q.u.UID, q.r.Pass)
		if err != nil || !ok {
			return Response{}, false, err
		}
		q.pol.note(name)
		return Response{Value: true, User: q.u, Message: fmt.Sprintf("against userstore due to '%s'", name)}, true, nil
	}
	assign, err := q.pol.passthruAssignSpec(ctx)
	if err != nil {
		return Response{}, false, err
	}
	n := q.v.cfg.Tokens.Notify()
	if n == nil {
		return Response{}, false, nil
	}
	resp, err := n.RadiusAuth(ctx, v, q.u.Login, q.r.Pass, nil)
	if err != nil {
		// No answer is a failed passthru, not a failed request; the
		// password is never logged.
		zerolog.Ctx(ctx).Warn().Err(err).Str("component", "validate").Str("user", q.u.Login).Str("realm", q.u.Realm).
			Str("radius_server", v).Msg("passthru: RADIUS server gave no answer")
		return Response{}, false, nil
	}
	if resp.Code != notify.RadiusAccept {
		return Response{}, false, nil
	}
	q.pol.note(name)
	prefix, err := q.passthruAssign(ctx, assign)
	if err != nil {
		return Response{}, false, err
	}
	return Response{Value: true, User: q.u, Message: prefix + fmt.Sprintf("against RADIUS server %s due to '%s'", v, name)}, true, nil
}

// post applies the policies that shape a decision of /validate/check, in
// privacyIDEA's order: the AUTHZ checks of the token that authenticated
// (serial, tokentype, tokeninfo), add_user_in_response and
// add_resolver_in_response, no_detail_on_success and no_detail_on_fail,
// authorized=deny_access and hide_specific_error_message.
func (q *req) post(ctx context.Context, res Response) (Response, error) {
	if !q.pol.any() {
		return res, nil
	}
	typ := res.Type
	if res.Value {
		if err := q.tokenChecks(ctx, res); err != nil {
			return res, err
		}
		if err := q.addUser(ctx, &res); err != nil {
			return res, err
		}
	}
	all, err := q.pol.setAll(ctx)
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
		q.pol.note(name)
		res.NoDetail = true
	}
	if err := q.pol.authorized(ctx); err != nil {
		return res, err
	}
	if res.Value {
		if res, err = q.afterSuccess(ctx, res, typ); err != nil {
			return res, err
		}
	}
	if !res.Value && !res.Challenge {
		if name, err := q.pol.flag(ctx, policy.ScopeAuthentication, "hide_specific_error_message"); err != nil {
			return res, err
		} else if name != "" {
			q.pol.note(name)
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
func (q *req) tokenChecks(ctx context.Context, res Response) error {
	serial := res.Serial
	if serial == "" {
		return nil
	}
	all, err := q.pol.setAll(ctx)
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
			q.pol.note(names...)
			return ErrSerialNotAllowed
		}
	}
	if typ := res.Type; typ != "" {
		sc, err := q.pol.set(ctx, policy.ScopeAuthorization)
		if err != nil {
			return err
		}
		lists, names, err := values(sc, "tokentype")
		if err != nil {
			return err
		}
		if len(lists) > 0 && !slices.ContainsFunc(lists, func(l string) bool { return containsFold(strings.Fields(l), typ) }) {
			q.pol.note(names...)
			return ErrTypeNotAllowed
		}
	}
	specs, names, err := values(all, "tokeninfo")
	if err != nil || len(specs) == 0 {
		return err
	}
	t, err := q.v.cfg.Tokens.Get(ctx, serial)
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
			q.pol.note(names[i])
			return apierr.New(apierr.Policy, fmt.Sprintf("Tokeninfo field %s with contents does not match regular expression.", parts[0]))
		}
	}
	return nil
}

// addUser is add_user_in_response (detail.user: the user's attributes,
// never a password) and add_resolver_in_response (detail["user-resolver"]
// and detail["user-realm"]), both on success only.
func (q *req) addUser(ctx context.Context, res *Response) error {
	if res.User.Login == "" {
		return nil
	}
	sc, err := q.pol.set(ctx, policy.ScopeAuthorization)
	if err != nil || sc.Empty() {
		return err
	}
	if name, err := flagOf(sc, "add_user_in_response"); err != nil {
		return err
	} else if name != "" && res.User.Found() {
		info := map[string]any{}
		in := q.in
		if in == nil || in.Name() != res.User.Resolver {
			// The serial path knows the owner but not its user store.
			if _, in, err = q.v.cfg.Realms.ResolveIn(ctx, res.User.Login, res.User.Realm, res.User.Resolver); err != nil {
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
		q.pol.note(name)
		res.UserAttributes = info
	}
	if name, err := flagOf(sc, "add_resolver_in_response"); err != nil {
		return err
	} else if name != "" {
		q.pol.note(name)
		res.AddResolver = true
	}
	return nil
}

// challengeShape applies preferred_client_mode and the challenge text
// header and footer to a challenge answer.
func (q *req) challengeShape(ctx context.Context, res *Response) error {
	multi, messages := res.Challenges, res.Messages
	modes := []string{"interactive", "webauthn", "poll"}
	v, name, err := q.pol.valueNamed(ctx, policy.ScopeAuthentication, "preferred_client_mode")
	if err != nil {
		return err
	}
	if f := strings.Fields(v); len(f) > 0 {
		modes = f
		q.pol.note(name)
	}
	preferred := "interactive"
	for _, m := range modes {
		if slices.ContainsFunc(multi, func(c Challenge) bool { return c.ClientMode == m }) {
			preferred = m
			break
		}
	}
	if m, err := q.userClientMode(ctx, multi); err != nil {
		return err
	} else if m != "" {
		preferred = m
	}
	res.PreferredClientMode = preferred

	header, hname, err := q.pol.valueNamed(ctx, policy.ScopeAuthentication, "challenge_text_header")
	if err != nil || header == "" {
		return err
	}
	footer, fname, err := q.pol.valueNamed(ctx, policy.ScopeAuthentication, "challenge_text_footer")
	if err != nil {
		return err
	}
	q.pol.note(hname, fname)
	texts := slices.Clone(messages)
	slices.Sort(texts)
	texts = slices.Compact(texts)
	var b strings.Builder
	b.WriteString(header)
	if tail := strings.ToLower(header[max(0, len(header)-4):]); tail == "<ol>" || tail == "<ul>" {
		for _, t := range texts {
			b.WriteString("<li>" + t + "</li>\n")
		}
	} else {
		b.WriteString("\n" + strings.Join(texts, ", ") + "\n")
	}
	b.WriteString(footer)
	res.Message = b.String()
	return nil
}
