package server

import (
	"errors"
	"net/http"

	"github.com/rs/zerolog/hlog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

// validateCaller is the caller of a /validate request: the identity of
// its JWT (for check, anonymous unless it carries a valid token: an API
// key, or an administrator's or user's token that api_key_required
// refuses), the client, the user agent, the request id, the audit action,
// and the headers and environment policy conditions read (the headers are
// not copied: the library only reads them).
func (c *call) validateCaller() caller.Caller {
	who := caller.Caller{Role: caller.Anonymous, Client: clientIP(c.r), UserAgent: c.r.UserAgent(),
		Action:      c.r.Method + " " + c.r.URL.Path,
		Headers:     map[string][]string(c.r.Header),
		Environment: func() map[string]any { return requestEnvironment(c.r) },
	}
	if id, ok := hlog.IDFromRequest(c.r); ok {
		who.RequestID = id.String()
	}
	id := c.who
	if id == nil {
		if raw := bearer(c.r); raw != "" {
			if cl, err := c.a.verifyJWT(raw); err == nil && c.a.checkSession(c.ctx, cl) == nil {
				id = &identity{Username: cl.Username, Realm: cl.Realm, Role: cl.Role}
			}
		}
	}
	if id != nil {
		who.Name, who.Realm = id.Username, id.Realm
		switch id.Role {
		case roleAdmin:
			who.Role = caller.Admin
		case roleUser:
			who.Role = caller.User
		case roleValidate:
			who.Role = caller.APIKey
		}
	}
	return who
}

// validateRequest reads the /validate parameters.
func (c *call) validateRequest(needPass bool) (validate.Request, error) {
	str := func(k string) string { v, _ := c.p.str(k); return v }
	r := validate.Request{User: str("user"), Realm: str("realm"), Resolver: str("resolver"), Serial: str("serial"),
		TransactionID: str("transaction_id"), Type: str("type"), Caller: c.validateCaller()}
	if r.TransactionID == "" {
		r.TransactionID = str("state")
	}
	r.OTPOnly = c.p.has("otponly")
	r.CancelEnrollment = token.IsTrue(str("cancel_enrollment"))
	r.RaiseSendError = str("exception") == "1"
	// In the order of the sorted parameter names, as the first of them
	// that is not a string is the one named.
	for _, k := range [...]string{"pass", "realm", "serial", "user"} {
		if v, ok := c.p.values[k]; ok {
			if _, isStr := v.(string); !isStr {
				return r, apierr.New(apierr.Parameter, "The parameter "+k+" must be a string.")
			}
		}
	}
	if r.Serial == "" && r.User == "" && !r.CancelEnrollment {
		return r, validate.ErrNoTarget
	}
	if needPass && !r.CancelEnrollment {
		if !c.p.has("pass") {
			return r, apierr.MissingParameter("pass")
		}
		r.Pass = str("pass")
	}
	// The snapshot the validator decides with is the one the envelope's
	// hardening reads afterwards: one store read per request. When it
	// cannot be taken here the validator takes it and fails inside its
	// audited path.
	if sn, err := c.policySnapshot(); err == nil {
		r.Policies = sn
	}
	r.PriorPolicies = c.policies
	r.Options = c.tokenParams()
	delete(r.Options, "pass")
	delete(r.Options, "password")
	return r, nil
}

// check runs /validate/check (and the shape of samlcheck/radiuscheck);
// the validator writes the audit entry.
func (c *call) check() (validate.Response, error) { return c.checkSAML(false) }

// checkSAML is check, asking for the user's SAML attributes when saml is
// set.
func (c *call) checkSAML(saml bool) (validate.Response, error) {
	r, err := c.validateRequest(true)
	if err != nil {
		return validate.Response{}, err
	}
	r.SAMLAttributes = saml
	c.recorded = true
	return c.a.s.Validator().Check(c.ctx, r)
}

// validateAnswer is the answer of a decision.
func validateAnswer(res validate.Response) answer {
	return answer{value: res.Value, detail: res.Detail(), auth: true, authItems: res.AuthItems}
}

// validateCheck is GET/POST /validate/check.
func validateCheck(c *call) (answer, error) {
	res, err := c.check()
	if err != nil {
		return answer{}, err
	}
	return validateAnswer(res), nil
}

// validateSAMLCheck is /validate/samlcheck: value {auth, attributes}.
func validateSAMLCheck(c *call) (answer, error) {
	res, err := c.checkSAML(true)
	if err != nil {
		return answer{}, err
	}
	ans := validateAnswer(res)
	if s, _ := c.p.str("serial"); s != "" {
		return ans, nil
	}
	attrs := res.SAMLAttributes
	if attrs == nil {
		attrs = map[string]any{}
	}
	ans.value = map[string]any{"auth": res.Value, "attributes": attrs}
	return ans, nil
}

// validateRadiusCheck is /validate/radiuscheck: 204 on success, 400 with
// an empty body otherwise.
func validateRadiusCheck(c *call) (answer, error) {
	res, err := c.check()
	if err != nil {
		return answer{}, err
	}
	ans := validateAnswer(res)
	status := http.StatusBadRequest
	if res.Value {
		status = http.StatusNoContent
	}
	ans.raw = func(w http.ResponseWriter) {
		if status != http.StatusNoContent {
			w.Header().Set("Content-Type", "text/plain")
		}
		w.WriteHeader(status)
	}
	return ans, nil
}

// validateTrigger is /validate/triggerchallenge (admin, triggerchallenge):
// value is the number of challenges made.
func validateTrigger(c *call) (answer, error) {
	r, err := c.validateRequest(false)
	if err != nil {
		return answer{}, err
	}
	c.recorded = true
	res, err := c.a.s.Validator().Trigger(c.ctx, r)
	if errors.Is(err, validate.ErrTriggerNoUser) {
		return c.errorWithOK(validate.ErrTriggerNoUser), nil
	}
	if err != nil {
		return answer{}, err
	}
	return answer{value: len(res.Challenges), detail: res.TriggerDetail(), auth: true}, nil
}

// errorWithOK answers err's error envelope with HTTP 200. It is audited as
// a rejected authentication.
func (c *call) errorWithOK(err *apierr.Error) answer {
	env := envelope{
		ID: 1, JSONRPC: "2.0",
		Result:  envResult{Status: false, Error: &envError{Code: err.Number(), Message: err.Message()}},
		Version: versionText,
		Time:    unixTime(c.a.s.Now()),
		Detail:  noDetail,
	}
	return answer{auth: true, raw: func(w http.ResponseWriter) { writeJSON(w, http.StatusOK, env) }}
}

// validatePoll is /validate/polltransaction[/{id}]: true once a challenge
// of the transaction was answered correctly and not yet used.
func validatePoll(c *call) (answer, error) {
	str := func(k string) string { v, _ := c.p.str(k); return v }
	r := validate.Request{Caller: c.validateCaller(), TransactionID: str("transaction_id"),
		User: str("user"), Realm: str("realm"), Resolver: str("resolver"), Serial: str("serial"), Type: str("type"),
		PriorPolicies: c.policies}
	c.recorded = true
	res, err := c.a.s.Validator().Poll(c.ctx, r)
	if err != nil {
		return answer{}, err
	}
	return answer{value: res.Value, detail: map[string]any{"challenge_status": res.ChallengeStatus}, auth: true}, nil
}
