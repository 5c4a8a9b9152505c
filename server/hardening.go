package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
)

// The HARDENING scope: hide_version leaves version and versionnumber out
// of the envelope of requests without a logged-in user; hide_auth_error_status
// answers every client error (4xx) of /validate/* and POST /auth with HTTP
// 401, the body unchanged. We send no Server header, so the envelope is
// the only place the version shows.
const (
	actHideVersion         = "hide_version"
	actHideAuthErrorStatus = "hide_auth_error_status"
)

// hardening is what the hardening policies change in one answer.
type hardening struct {
	hideVersion bool
	authStatus  bool
}

// policySnapshot returns the request's policy snapshot, taken on first use
// (one store read): the API key check, the validator and the hardening of
// the envelope share it.
func (c *call) policySnapshot() (*policy.Snapshot, error) {
	if c.snap == nil {
		sn, err := c.a.s.Policies().Snapshot(c.ctx)
		if err != nil {
			return nil, err
		}
		c.snap = sn
	}
	return c.snap, nil
}

// hardening decides the hardening of call c's answer (err nil) or error.
// Policies are read only when an action could change the answer: the
// version for a request without a logged-in user, the status of a client
// error other than 401 on /validate/* or POST /auth. /validate/check has
// taken its snapshot already, so the hot path reads the store no more
// than before, and without an active hardening policy it matches nothing.
func (c *call) hardening(err error) hardening {
	wantVersion := c.who == nil
	wantStatus := false
	if err != nil && hardenedPath(c.r) {
		_, status, _, _, _ := apierr.Wire(err)
		wantStatus = clientError(status) && status != http.StatusUnauthorized
	}
	if !wantVersion && !wantStatus {
		return hardening{}
	}
	return c.a.decideHardening(c.ctx, c.r, c.policySnapshot, wantVersion, wantStatus)
}

// anonHardening is the hardening of an answer written outside a route's
// handler (unknown path, wrong method, panic): nobody is logged in.
func (a *api) anonHardening(r *http.Request) hardening {
	return a.decideHardening(r.Context(), r, func() (*policy.Snapshot, error) {
		return a.s.Policies().Snapshot(r.Context())
	}, true, false)
}

// decideHardening matches the hardening policies of request r for the
// actions asked for. A failure to read or evaluate them hides: the
// answer then carries less, never more.
func (a *api) decideHardening(ctx context.Context, r *http.Request, snap func() (*policy.Snapshot, error), version, status bool) hardening {
	fail := func(err error) hardening {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("hardening policies unreadable: hiding")
		return hardening{hideVersion: version, authStatus: status}
	}
	sn, err := snap()
	if err != nil {
		return fail(err)
	}
	if !sn.Active(policy.ScopeHardening) {
		return hardening{}
	}
	// Hardening policies are matched on the request alone (client, user
	// agent, node, time and conditions), not on a user: they apply
	// before anyone is known.
	sc, err := sn.Scoped(ctx, policy.Query{
		Scope: policy.ScopeHardening, Client: clientIP(r), UserAgent: r.UserAgent(),
		Data: func() policy.ConditionData { return requestConditionData(r) },
	})
	if err != nil {
		return fail(err)
	}
	var h hardening
	for _, x := range []struct {
		want   bool
		action string
		set    *bool
	}{{version, actHideVersion, &h.hideVersion}, {status, actHideAuthErrorStatus, &h.authStatus}} {
		if !x.want {
			continue
		}
		ps, err := sc.Match(x.action)
		if err != nil {
			return fail(err)
		}
		*x.set = len(ps) > 0
	}
	return h
}

// requestConditionData is what conditions of a hardening policy may read:
// the request's headers and environment (parameters may not be decoded
// yet when an error is answered).
func requestConditionData(r *http.Request) policy.ConditionData {
	return policy.ConditionData{Headers: map[string][]string(r.Header.Clone()), Environment: requestEnvironment(r)}
}

// requestEnvironment is the request's environment as policy conditions of
// type HTTP environment read it.
func requestEnvironment(r *http.Request) map[string]any {
	return map[string]any{
		"REMOTE_ADDR": clientIP(r).String(), "HTTP_USER_AGENT": r.UserAgent(),
		"SERVER_NAME": r.Host, "REQUEST_METHOD": r.Method, "PATH_INFO": r.URL.Path,
	}
}

// hardenedPath reports whether hide_auth_error_status covers r: every
// /validate/ endpoint and POST /auth.
func hardenedPath(r *http.Request) bool {
	p := r.URL.Path
	return strings.HasPrefix(p, "/validate/") || (r.Method == http.MethodPost && (p == "/auth" || p == "/auth/"))
}

func clientError(status int) bool { return status >= 400 && status < 500 }
