package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

// validateRequest reads the /validate parameters.
func (c *call) validateRequest(needPass bool) (validate.Request, error) {
	str := func(k string) string { v, _ := c.p.str(k); return v }
	r := validate.Request{User: str("user"), Realm: str("realm"), Resolver: str("resolver"), Serial: str("serial"),
		TransactionID: str("transaction_id"), Type: str("type"), Client: clientIP(c.r), UserAgent: c.r.UserAgent()}
	if r.TransactionID == "" {
		r.TransactionID = str("state")
	}
	r.OTPOnly = c.p.has("otponly")
	r.CancelEnrollment = token.IsTrue(str("cancel_enrollment"))
	for _, k := range c.p.keys() {
		if _, isStr := c.p.values[k].(string); !isStr {
			if k == "pass" || k == "user" || k == "serial" || k == "realm" {
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
	r.Policies = c.snap
	r.Options = c.tokenParams()
	delete(r.Options, "pass")
	delete(r.Options, "password")
	c.entry.User, c.entry.Realm, c.entry.Serial = r.User, r.Realm, r.Serial
	return r, nil
}

// validateAnswer turns a decision into the answer and the audit entry.
func (c *call) validateAnswer(res validate.Response) answer {
	c.policies = append(c.policies, res.Policies...)
	if res.User.Login != "" {
		c.entry.User, c.entry.Realm, c.entry.Resolver = res.User.Login, res.User.Realm, res.User.Resolver
	}
	if s, ok := res.Detail["serial"].(string); ok {
		c.entry.Serial = s
	}
	if t, ok := res.Detail["type"].(string); ok {
		c.entry.TokenType = t
	}
	if m, ok := res.Detail["message"].(string); ok {
		c.entry.Info = audit.Text(m, 256)
	}
	return answer{value: res.Value, detail: res.Detail, auth: true}
}

// record prepares the audit entry of a decision (signed here, in the
// request's goroutine) for the validator to write in the transaction that
// commits its token changes: one durable commit for both.
func (c *call) record(res validate.Response) func(store.Tx) error {
	cc := *c
	cc.policies = slices.Clone(c.policies)
	ans := cc.validateAnswer(res)
	p := c.a.s.Audit().Prepare(c.a.auditEntry(&cc, ans, nil))
	return func(tx store.Tx) error {
		_, err := c.a.s.Audit().WritePrepared(tx, p)
		return err
	}
}

// check runs /validate/check (and the shape of samlcheck/radiuscheck).
func (c *call) check() (validate.Response, error) {
	r, err := c.validateRequest(true)
	if err != nil {
		return validate.Response{}, err
	}
	r.Record = c.record
	res, err := c.a.s.Validator().Check(c.ctx, r)
	c.recorded = res.Recorded
	if err != nil {
		c.policies = append(c.policies, res.Policies...)
		return res, err
	}
	if res.SendFailed {
		if ex, _ := c.p.str("exception"); ex == "1" {
			msg, _ := res.Detail["message"].(string)
			return res, apierr.New(apierr.Server, msg)
		}
	}
	return res, nil
}

// validateCheck is GET/POST /validate/check.
func validateCheck(c *call) (answer, error) {
	res, err := c.check()
	if err != nil {
		return answer{}, err
	}
	return c.validateAnswer(res), nil
}

// validateSAMLCheck is /validate/samlcheck: value {auth, attributes}.
func validateSAMLCheck(c *call) (answer, error) {
	res, err := c.check()
	if err != nil {
		return answer{}, err
	}
	ans := c.validateAnswer(res)
	if s, _ := c.p.str("serial"); s != "" {
		return ans, nil
	}
	attrs := map[string]any{}
	if res.Value && res.User.UID != "" {
		attrs["username"], attrs["realm"], attrs["resolver"] = res.User.Login, res.User.Realm, res.User.Resolver
		if in, err := c.a.s.Resolvers().Instance(c.ctx, res.User.Resolver); err == nil {
			if info, err := in.User(c.ctx, res.User.UID); err == nil {
				for k, v := range info {
					if k != "password" {
						attrs[k] = v
					}
				}
			}
		}
		for _, k := range []string{"email", "surname", "givenname", "mobile", "phone"} {
			if _, ok := attrs[k]; !ok {
				attrs[k] = ""
			}
		}
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
	ans := c.validateAnswer(res)
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

// errTriggerNoUser is what /validate/triggerchallenge answers for an
// unknown user: the product description's HTTP 200 with status false and
// code 905 (privacyIDEA answers 400 with 904 here; /validate/check keeps
// 904, which FreeRADIUS reads as NOTFOUND).
var errTriggerNoUser = apierr.New(apierr.Parameter, "The user can not be found in any resolver in this realm!")

// validateTrigger is /validate/triggerchallenge (admin, triggerchallenge):
// value is the number of challenges made.
func validateTrigger(c *call) (answer, error) {
	r, err := c.validateRequest(false)
	if err != nil {
		return answer{}, err
	}
	res, err := c.a.s.Validator().Trigger(c.ctx, r)
	if apierr.Is(err, apierr.User) {
		c.entry.Info = audit.Text(errTriggerNoUser.Error(), 256)
		return c.errorWithOK(errTriggerNoUser), nil
	}
	if err != nil {
		c.policies = append(c.policies, res.Policies...)
		return answer{}, err
	}
	if res.Detail == nil {
		res.Detail = map[string]any{}
	}
	ans := c.validateAnswer(res)
	ans.value = res.Challenges
	return ans, nil
}

// errorWithOK answers err's error envelope with HTTP 200. It is audited as
// a rejected authentication.
func (c *call) errorWithOK(err *apierr.Error) answer {
	env := envelope{
		ID: 1, JSONRPC: "2.0",
		Result:  envResult{Status: false, Error: &envError{Code: err.Number(), Message: err.Message()}},
		Version: versionText,
		Time:    unixTime(c.a.s.Now()),
	}
	return answer{auth: true, raw: func(w http.ResponseWriter) { writeJSON(w, http.StatusOK, env) }}
}

// validatePoll is /validate/polltransaction[/{id}]: true once a challenge
// of the transaction was answered correctly and not yet used.
func validatePoll(c *call) (answer, error) {
	txid, _ := c.p.str("transaction_id")
	if txid == "" {
		return answer{}, apierr.MissingParameter("transaction_id")
	}
	chs, err := c.a.s.Tokens().Challenges(c.ctx, token.ChallengeFilter{TransactionID: strings.TrimSpace(txid)})
	if err != nil {
		return answer{}, err
	}
	ok := false
	for _, ch := range chs {
		ok = ok || ch.OTPValid
	}
	return answer{value: ok, detail: map[string]any{"challenge_status": map[bool]string{true: "accept", false: "pending"}[ok]}, auth: true}, nil
}
