package eventing

// The conditions of a definition (section 7.4 of the admin-config spec):
// every condition key present with a non-empty value must hold; keys this
// file does not know (the container conditions: the library has no
// containers) are ignored.
//
// The semantics follow privacyIDEA's event handler base class:
//
//   - The token conditions (tokentype, serial, token_*, rollout_state,
//     otp_counter, count_auth*, failcounter, last_auth, tokeninfo and the
//     challenge conditions) are skipped, and so hold, when the call has no
//     single token: privacyIDEA evaluates them only "if token_obj".
//     tokenrealm and tokenresolver are skipped when the token has no
//     realms; client_ip when the client address is unknown;
//     user_token_number and user_container_number when there is no user.
//   - The challenge conditions look at the challenges of the single
//     token and the request's transaction_id: none found, they hold; more
//     than one, they do not.
//   - A malformed condition value (a bad regular expression, comparator,
//     number or duration) makes the condition not hold; it is logged, so
//     that an administrator sees why a handler never runs.
//   - A failed store read is an error: the dispatcher audits the run as
//     failed.

import (
	"context"
	"errors"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// ConditionSpec describes one condition for GET /event/conditions/<module>.
type ConditionSpec struct {
	// Type is str, multi or regexp.
	Type string `json:"type"`
	Desc string `json:"desc"`
	// Value are the choices: strings for str, {"name": x} objects for
	// multi.
	Value []any `json:"value,omitempty"`
	// Group is token, general, user, counter or challenge.
	Group string `json:"group"`
}

// Condition groups.
const (
	condGroupToken     = "token"
	condGroupGeneral   = "general"
	condGroupUser      = "user"
	condGroupCounter   = "counter"
	condGroupChallenge = "challenge"
)

// Answers of result_authentication.
const (
	authAccept    = "ACCEPT"
	authReject    = "REJECT"
	authChallenge = "CHALLENGE"
	authDeclined  = "DECLINED"
)

// condAuthEvents are the events whose answer carries result.authentication
// (the authentication endpoints, envelope id 2). Other answers have none,
// so result_authentication never holds for them.
var condAuthEvents = map[string]bool{
	"auth": true, "validate_check": true, "validate_triggerchallenge": true, "validate_poll_transaction": true,
}

// condDef is one condition: its evaluation and its GET description.
type condDef struct {
	name, typ, group, desc string
	// choices are fixed str choices.
	choices []string
	// values computes the choices at request time (multi conditions).
	values func(ctx context.Context, s *Service) []string
	check  func(e *condEval, v string) (bool, error)
}

var condTrueFalse = []string{"True", "False"}

// condDefs are the conditions in the order they are checked: the cheap
// ones on the call and its answer first, then the user, the token, the
// counters and the challenge.
var condDefs = []condDef{
	{name: "logged_in_user", typ: "str", group: condGroupUser, choices: []string{"admin", "user"},
		desc:  "The role of whoever made the request: admin or user (a request without login counts as user).",
		check: (*condEval).loggedInUser},
	{name: "result_value", typ: "str", group: condGroupGeneral, choices: condTrueFalse,
		desc:  "Whether result.value of the answer is true.",
		check: (*condEval).resultValue},
	{name: "result_status", typ: "str", group: condGroupGeneral, choices: condTrueFalse,
		desc:  "Whether result.status of the answer is true.",
		check: (*condEval).resultStatus},
	{name: "result_authentication", typ: "str", group: condGroupGeneral,
		choices: []string{authAccept, authReject, authChallenge, authDeclined},
		desc:    "The result.authentication of an authentication answer.",
		check:   (*condEval).resultAuthentication},
	{name: "detail_message", typ: "str", group: condGroupGeneral,
		desc:  "A regular expression searched for in detail.message of the answer.",
		check: (*condEval).detailMessage},
	{name: "detail_error_message", typ: "str", group: condGroupGeneral,
		desc:  "A regular expression searched for in detail.error.message of the answer.",
		check: (*condEval).detailErrorMessage},
	{name: "client_ip", typ: "str", group: condGroupGeneral,
		desc:  "Comma-separated IP addresses and networks the client must be in; a leading ! or - excludes one.",
		check: (*condEval).clientIP},
	{name: "realm", typ: "multi", group: condGroupUser, values: condRealmNames,
		desc:  "The user's realm is one of these.",
		check: (*condEval).userRealm},
	{name: "resolver", typ: "multi", group: condGroupUser, values: condResolverNames,
		desc:  "The user's user store is one of these.",
		check: (*condEval).userResolver},
	{name: "user_info", typ: "str", group: condGroupUser,
		desc:  "Compares a user attribute: '<attribute> <comparator> <value>' with ==, !=, <, >, <= or >=; numbers and dates are compared as such, {now} and {now}-7d stand for the time.",
		check: (*condEval).userInfo},
	{name: "user_token_number", typ: "str", group: condGroupUser,
		desc:  "The number of tokens of the user: N, ==N, !=N, <N, >N, <=N or >=N.",
		check: (*condEval).userTokenNumber},
	{name: "user_container_number", typ: "str", group: condGroupUser,
		desc:  "The number of containers of the user (always 0 here): N, ==N, <N or >N.",
		check: (*condEval).userContainerNumber},
	{name: "tokentype", typ: "multi", group: condGroupToken, values: condTokenTypes,
		desc:  "The token's type is one of these.",
		check: (*condEval).tokenType},
	{name: "serial", typ: "regexp", group: condGroupToken,
		desc:  "A regular expression the token's serial must match from its start.",
		check: (*condEval).serial},
	{name: "tokenrealm", typ: "multi", group: condGroupToken, values: condRealmNames,
		desc:  "One of the token's realms is one of these (tokens without realms are not checked).",
		check: (*condEval).tokenRealm},
	{name: "tokenresolver", typ: "multi", group: condGroupToken, values: condResolverNames,
		desc:  "A user store of the token's realms is one of these (tokens without realms are not checked).",
		check: (*condEval).tokenResolver},
	{name: "token_has_owner", typ: "str", group: condGroupToken, choices: condTrueFalse,
		desc:  "Whether the token is assigned to a user.",
		check: (*condEval).tokenHasOwner},
	{name: "token_is_orphaned", typ: "str", group: condGroupToken, choices: condTrueFalse,
		desc:  "Whether the token is assigned to a user who can no longer be found in the user store.",
		check: (*condEval).tokenIsOrphaned},
	{name: "token_locked", typ: "str", group: condGroupToken, choices: condTrueFalse,
		desc:  "Whether the token's fail counter reached its maximum.",
		check: (*condEval).tokenLocked},
	{name: "token_validity_period", typ: "str", group: condGroupToken, choices: condTrueFalse,
		desc:  "Whether the current time lies within the token's validity period.",
		check: (*condEval).tokenValidityPeriod},
	{name: "token_is_in_container", typ: "str", group: condGroupToken, choices: condTrueFalse,
		desc:  "Whether the token is in a container (never, here).",
		check: (*condEval).tokenIsInContainer},
	{name: "rollout_state", typ: "str", group: condGroupToken,
		choices: []string{token.StateEnrolled, token.StateClientWait, token.StateVerify, token.StateBroken},
		desc:    "The token's rollout state is this one.",
		check:   (*condEval).rolloutState},
	{name: "last_auth", typ: "str", group: condGroupToken,
		desc:  "Holds when the token's last authentication is older than this (like 7h, 10d or 1y) or it was never used.",
		check: (*condEval).lastAuth},
	{name: "tokeninfo", typ: "str", group: condGroupToken,
		desc:  "Compares a tokeninfo field: '<field> <comparator> <value>' with ==, !=, <, >, <= or >=; numbers and dates are compared as such, {now} and {now}+2h stand for the time.",
		check: (*condEval).tokenInfo},
	{name: "otp_counter", typ: "str", group: condGroupCounter,
		desc:  "The token's OTP counter: N, ==N, !=N, <N, >N, <=N or >=N.",
		check: (*condEval).otpCounter},
	{name: "count_auth", typ: "str", group: condGroupCounter,
		desc:  "The token's number of authentications (tokeninfo count_auth): N, ==N, !=N, <N, >N, <=N or >=N.",
		check: (*condEval).countAuth},
	{name: "count_auth_success", typ: "str", group: condGroupCounter,
		desc:  "The token's number of successful authentications (tokeninfo count_auth_success): N, ==N, <N, >N, ...",
		check: (*condEval).countAuthSuccess},
	{name: "count_auth_fail", typ: "str", group: condGroupCounter,
		desc:  "The token's number of failed authentications (count_auth minus count_auth_success): N, ==N, <N, >N, ...",
		check: (*condEval).countAuthFail},
	{name: "failcounter", typ: "str", group: condGroupCounter,
		desc:  "The token's fail counter (it stops at the maximum): N, ==N, !=N, <N, >N, <=N or >=N.",
		check: (*condEval).failCounter},
	{name: "counter", typ: "str", group: condGroupCounter,
		desc:  "Compares an event counter of the Counter handler: '<counter> <comparator> <value>', a missing counter is 0.",
		check: (*condEval).counter},
	{name: "challenge_session", typ: "str", group: condGroupChallenge,
		desc:  "A regular expression the session of the token's challenge must match from its start.",
		check: (*condEval).challengeSession},
	{name: "challenge_expired", typ: "str", group: condGroupChallenge, choices: condTrueFalse,
		desc:  "Whether the token's challenge of the transaction has expired.",
		check: (*condEval).challengeExpired},
}

// conditionsHold reports whether all conditions of the run's definition
// hold for its call.
func (r *Run) conditionsHold(ctx context.Context) (bool, error) {
	conds := r.Def.Conditions
	if len(conds) == 0 {
		return true, nil
	}
	e := &condEval{r: r, ctx: ctx, now: r.svc.now()}
	for i := range condDefs {
		d := &condDefs[i]
		v, ok := conds[d.name]
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		e.name, e.value = d.name, v
		hold, err := d.check(e, v)
		if err != nil {
			return false, err
		}
		if !hold {
			r.svc.cfg.Log.Debug().Str("component", "eventing").Str("event", r.Call.Event).Str("handler", r.Def.Name).
				Str("condition", d.name).Msg("event handler condition does not hold")
			return false, nil
		}
	}
	return true, nil
}

// ConditionSpecs describes the conditions for GET /event/conditions/<module>
// (the same for every module). The realm, user store and token type
// choices are read now.
func (s *Service) ConditionSpecs(ctx context.Context) map[string]ConditionSpec {
	out := make(map[string]ConditionSpec, len(condDefs))
	for _, d := range condDefs {
		c := ConditionSpec{Type: d.typ, Desc: d.desc, Group: d.group}
		switch {
		case d.values != nil:
			c.Value = []any{}
			for _, v := range d.values(ctx, s) {
				c.Value = append(c.Value, map[string]string{"name": v})
			}
		case d.choices != nil:
			for _, v := range d.choices {
				c.Value = append(c.Value, v)
			}
		}
		out[d.name] = c
	}
	return out
}

// condRealmNames are the realm choices.
func condRealmNames(ctx context.Context, s *Service) []string {
	if s.cfg.Realms == nil {
		return nil
	}
	list, _, err := s.cfg.Realms.List(ctx)
	if err != nil {
		s.cfg.Log.Warn().Err(err).Str("component", "eventing").Msg("listing realms for the event conditions failed")
		return nil
	}
	out := make([]string, 0, len(list))
	for _, r := range list {
		out = append(out, r.Name)
	}
	return out
}

// condResolverNames are the user store choices: the user stores of the
// realms (a user store in no realm has no users a condition could see).
func condResolverNames(ctx context.Context, s *Service) []string {
	if s.cfg.Realms == nil {
		return nil
	}
	list, _, err := s.cfg.Realms.List(ctx)
	if err != nil {
		s.cfg.Log.Warn().Err(err).Str("component", "eventing").Msg("listing realms for the event conditions failed")
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range list {
		for _, e := range r.Resolvers {
			if !seen[e.Name] {
				seen[e.Name] = true
				out = append(out, e.Name)
			}
		}
	}
	return out
}

// condTokenTypes are the token type choices.
func condTokenTypes(_ context.Context, s *Service) []string {
	if s.cfg.Tokens == nil || s.cfg.Tokens.Types() == nil {
		return nil
	}
	return s.cfg.Tokens.Types().Names()
}

// condEval evaluates the conditions of one run, reading what they need
// once.
type condEval struct {
	r   *Run
	ctx context.Context
	now time.Time
	// name and value are the condition being checked (for the log).
	name, value string

	userDone bool
	usr      user.User

	chalDone bool
	chals    []token.Challenge
	chalErr  error
}

// malformed logs a condition value that cannot be evaluated; the
// condition does not hold.
func (e *condEval) malformed(why string) (bool, error) {
	e.r.svc.cfg.Log.Warn().Str("component", "eventing").Str("handler", e.r.Def.Name).Str("condition", e.name).
		Str("value", e.value).Str("error", why).Msg("event handler condition is malformed and does not hold")
	return false, nil
}

// response returns the call's answer (nil before the operation).
func (e *condEval) response() *Response { return e.r.Call.Response }

func (e *condEval) detail() map[string]any {
	if res := e.response(); res != nil {
		return res.Detail
	}
	return nil
}

// user is the user of the conditions: the call's user, or the owner of
// the request's token; a user who does not exist (an owner deleted from
// the user store) is the empty user, as privacyIDEA has it.
func (e *condEval) user() user.User {
	if e.userDone {
		return e.usr
	}
	e.userDone = true
	u := e.r.User(e.ctx)
	if u.Login == "" && u.UID == "" {
		return e.usr
	}
	if e.r.svc.cfg.Realms != nil {
		if !u.Found() {
			return e.usr
		}
		if e.r.Call.User.Login == "" && !e.resolves(u) {
			// The token owner has gone from the user store.
			return e.usr
		}
	}
	e.usr = u
	return e.usr
}

// resolves reports whether the stored user u still exists with its uid. A
// failing user store counts as not resolving (privacyIDEA's
// orphaned-on-error).
func (e *condEval) resolves(u user.User) bool {
	if e.r.svc.cfg.Realms == nil {
		return true
	}
	if u.Login == "" || u.Resolver == "" {
		return false
	}
	got, _, err := e.r.svc.cfg.Realms.ResolveIn(e.ctx, u.Login, u.Realm, u.Resolver)
	return err == nil && (u.UID == "" || got.UID == u.UID)
}

// token is the call's single token.
func (e *condEval) token() (*token.Token, bool) { return e.r.Token(e.ctx) }

// requestSerial is the serial the request or its answer names.
func (e *condEval) requestSerial() string {
	c := e.r.Call
	if c.Serial != "" {
		return c.Serial
	}
	if s := c.Param("serial"); s != "" {
		return s
	}
	if v, ok := e.detail()["serial"].(string); ok {
		return v
	}
	return ""
}

// --- the call and its answer -------------------------------------------

func (e *condEval) loggedInUser(v string) (bool, error) {
	role := "user"
	switch e.r.Call.Caller.Role {
	case caller.Admin, caller.Local:
		role = "admin"
	}
	return strings.TrimSpace(v) == role, nil
}

func (e *condEval) resultValue(v string) (bool, error) {
	var value any
	if res := e.response(); res != nil && res.Error == nil {
		value = res.Value
	}
	return IsTrue(strings.TrimSpace(v)) == IsTrue(value), nil
}

func (e *condEval) resultStatus(v string) (bool, error) {
	status := false
	if res := e.response(); res != nil {
		status = res.Status
	}
	return IsTrue(strings.TrimSpace(v)) == status, nil
}

func (e *condEval) resultAuthentication(v string) (bool, error) {
	got := condAuthentication(e.r.Call.Event, e.response())
	return got != "" && got == strings.TrimSpace(v), nil
}

// condAuthentication is result.authentication of the answer res to event,
// "" when the answer carries none (not an authentication, or an error).
func condAuthentication(event string, res *Response) string {
	if res == nil || !res.Status || res.Error != nil || !condAuthEvents[event] {
		return ""
	}
	return Authentication(res.Value, res.Detail)
}

// Authentication is privacyIDEA's result.authentication of an
// authentication answer with value and detail: CHALLENGE, ACCEPT,
// DECLINED or REJECT. The value of /validate/samlcheck is an object
// whose auth member decides.
func Authentication(value any, detail map[string]any) string {
	if m, ok := value.(map[string]any); ok {
		if a, ok := m["auth"]; ok {
			value = a
		}
	}
	if s, ok := value.(string); ok && s == authChallenge {
		return authChallenge
	}
	if condNonEmptyList(detail["multi_challenge"]) {
		return authChallenge
	}
	if _, ok := detail["passkey"]; ok {
		return authChallenge
	}
	if Truthy(value) {
		return authAccept
	}
	if st, ok := detail["challenge_status"].(string); ok && (st == "declined" || st == "cancelled") {
		return authDeclined
	}
	return authReject
}

// condNonEmptyList reports whether v is a list with elements.
func condNonEmptyList(v any) bool {
	if v == nil {
		return false
	}
	rv := reflect.ValueOf(v)
	return (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && rv.Len() > 0
}

// Truthy follows Python's truth rules for a JSON value.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case int:
		return x != 0
	case int64:
		return x != 0
	case float64:
		return x != 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		return rv.Len() > 0
	case reflect.Pointer:
		return !rv.IsNil()
	}
	return true
}

func (e *condEval) detailMessage(v string) (bool, error) {
	return e.search(v, condText(e.detail()["message"]))
}

func (e *condEval) detailErrorMessage(v string) (bool, error) {
	var msg string
	switch x := e.detail()["error"].(type) {
	case map[string]any:
		msg = condText(x["message"])
	case map[string]string:
		msg = x["message"]
	case *ResponseError:
		if x != nil {
			msg = x.Message
		}
	case ResponseError:
		msg = x.Message
	}
	return e.search(v, msg)
}

// condText is a detail value as text ("" when missing).
func condText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return toString(v)
}

// search reports whether the regular expression pattern matches
// somewhere in s.
func (e *condEval) search(pattern, s string) (bool, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return e.malformed("bad regular expression: " + err.Error())
	}
	return re.MatchString(s), nil
}

// matchStart reports whether the regular expression pattern matches at
// the start of s (Python's re.match): the leftmost match starts at 0
// exactly when some match does.
func (e *condEval) matchStart(pattern, s string) (bool, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return e.malformed("bad regular expression: " + err.Error())
	}
	loc := re.FindStringIndex(s)
	return loc != nil && loc[0] == 0, nil
}

func (e *condEval) clientIP(v string) (bool, error) {
	ip := e.r.Call.Caller.Client
	if !ip.IsValid() {
		// privacyIDEA checks the client only when it knows it.
		return true, nil
	}
	list, err := policy.ParseClientList(strings.Split(v, ","))
	if err != nil {
		return e.malformed("bad client list: " + err.Error())
	}
	if list.Empty() {
		return e.malformed("empty client list")
	}
	return list.Matches(ip), nil
}

// --- the user ----------------------------------------------------------

// condList splits a CSV condition value into its trimmed, non-empty
// items.
func condList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// condInRealms reports whether the realm name is in the CSV list v.
func condInRealms(v, name string) bool {
	for _, s := range condList(v) {
		if realm.Normalize(s) == realm.Normalize(name) {
			return true
		}
	}
	return false
}

// condInFold reports whether name is in the CSV list v, ignoring case.
func condInFold(v, name string) bool {
	for _, s := range condList(v) {
		if strings.EqualFold(s, name) {
			return true
		}
	}
	return false
}

func (e *condEval) userRealm(v string) (bool, error) {
	u := e.user()
	return u.Realm != "" && condInRealms(v, u.Realm), nil
}

func (e *condEval) userResolver(v string) (bool, error) {
	u := e.user()
	return u.Resolver != "" && condInFold(v, u.Resolver), nil
}

func (e *condEval) userInfo(v string) (bool, error) {
	u := e.user()
	var info map[string]string
	if u.Login != "" {
		info = e.r.UserInfo(e.ctx)
	}
	return e.generic(v, func(key string) (string, bool) {
		s, ok := info[key]
		return s, ok
	})
}

func (e *condEval) userTokenNumber(v string) (bool, error) {
	u := e.user()
	if u.Login == "" {
		return true, nil
	}
	n := 0
	if e.r.svc.cfg.Tokens != nil && u.Found() {
		ts, err := e.r.svc.cfg.Tokens.ByOwner(e.ctx, u)
		if err != nil {
			return false, err
		}
		n = len(ts)
	}
	return e.intCondition(v, int64(n))
}

func (e *condEval) userContainerNumber(v string) (bool, error) {
	u := e.user()
	if u.Login == "" {
		return true, nil
	}
	return e.intCondition(v, 0)
}

// --- the token ---------------------------------------------------------

func (e *condEval) tokenType(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	return condInFold(v, t.Type), nil
}

func (e *condEval) serial(v string) (bool, error) {
	serial := e.requestSerial()
	if serial == "" {
		t, ok := e.token()
		if !ok {
			return true, nil
		}
		serial = t.Serial
	}
	return e.matchStart(v, serial)
}

func (e *condEval) tokenRealm(v string) (bool, error) {
	t, ok := e.token()
	if !ok || len(t.Realms) == 0 {
		return true, nil
	}
	for _, r := range t.Realms {
		if condInRealms(v, r) {
			return true, nil
		}
	}
	return false, nil
}

func (e *condEval) tokenResolver(v string) (bool, error) {
	t, ok := e.token()
	if !ok || len(t.Realms) == 0 || e.r.svc.cfg.Realms == nil {
		return true, nil
	}
	// The user stores of the token's realms, as privacyIDEA takes them.
	found := false
	for _, name := range t.Realms {
		rl, _, err := e.r.svc.cfg.Realms.Get(e.ctx, name)
		if errors.Is(err, realm.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		for _, res := range rl.Resolvers {
			found = true
			if condInFold(v, res.Name) {
				return true, nil
			}
		}
	}
	// Realms without user stores give nothing to check.
	return !found, nil
}

// condBool reads a True/False condition value.
func condBool(v string) (val, ok bool) {
	v = strings.TrimSpace(v)
	switch {
	case IsTrue(v):
		return true, true
	case strings.EqualFold(v, "false") || v == "0":
		return false, true
	}
	return false, false
}

// boolCondition compares the property have with the True/False value v.
func (e *condEval) boolCondition(v string, have bool) (bool, error) {
	want, ok := condBool(v)
	if !ok {
		return e.malformed("not True or False")
	}
	return want == have, nil
}

func (e *condEval) tokenHasOwner(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	return e.boolCondition(v, t.Assigned())
}

func (e *condEval) tokenIsOrphaned(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	orphaned := t.Owner != nil && (t.Owner.UID != "" || t.Owner.Login != "") && !e.resolves(*t.Owner)
	return e.boolCondition(v, orphaned)
}

// condLocked is privacyIDEA's token_locked: the fail counter reached its
// maximum.
func condLocked(t *token.Token) bool { return t.FailCount >= t.MaxFail }

func (e *condEval) tokenLocked(v string) (bool, error) {
	want, ok := condBool(v)
	if !ok {
		return e.malformed("not True or False")
	}
	if t, ok := e.token(); ok {
		return condLocked(t) == want, nil
	}
	// Without a single token privacyIDEA asks whether any token of the
	// user is locked.
	u := e.user()
	locked := false
	if u.Found() && e.r.svc.cfg.Tokens != nil {
		ts, err := e.r.svc.cfg.Tokens.ByOwner(e.ctx, u)
		if err != nil {
			return false, err
		}
		for _, t := range ts {
			if condLocked(t) {
				locked = true
				break
			}
		}
	}
	return locked == want, nil
}

func (e *condEval) tokenValidityPeriod(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	return e.boolCondition(v, t.InValidity(e.now))
}

func (e *condEval) tokenIsInContainer(v string) (bool, error) {
	if _, ok := e.token(); !ok {
		return true, nil
	}
	// The library has no containers: a token is never in one.
	return e.boolCondition(v, false)
}

func (e *condEval) rolloutState(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	for _, s := range condList(v) {
		if s == t.RolloutState {
			return true, nil
		}
	}
	return false, nil
}

// condDelta matches privacyIDEA's time deltas: an optional sign, a number
// and one unit of s, m, h, d or y.
var condDelta = regexp.MustCompile(`^\s*([+-]?)\s*(\d+)\s*([smhdy])\s*$`)

var condDeltaUnits = map[string]time.Duration{
	"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "y": 365 * 24 * time.Hour,
}

// condParseDelta reads a delta like 10h, 7d, -30m or 1y.
func condParseDelta(s string) (time.Duration, bool) {
	m := condDelta.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[2], 10, 64)
	unit := condDeltaUnits[m[3]]
	if err != nil || n > int64(1<<62)/int64(unit) {
		return 0, false
	}
	d := time.Duration(n) * unit
	if m[1] == "-" {
		d = -d
	}
	return d, true
}

func (e *condEval) lastAuth(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	delta, ok := condParseDelta(v)
	if !ok {
		return e.malformed("not a duration like 10h, 7d or 1y")
	}
	stored := strings.TrimSpace(t.Info[token.InfoLastAuth])
	if stored == "" {
		// Never used: not newer than anything.
		return true, nil
	}
	last, ok := condParseDate(stored, e.now)
	if !ok {
		e.r.svc.cfg.Log.Warn().Str("component", "eventing").Str("handler", e.r.Def.Name).Str("serial", t.Serial).
			Msg("event handler condition last_auth: the token's last_auth cannot be read")
		return false, nil
	}
	newer := last.Add(delta).After(e.now)
	return !newer, nil
}

func (e *condEval) tokenInfo(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	return e.generic(v, func(key string) (string, bool) {
		s, ok := t.Info[key]
		return s, ok
	})
}

func (e *condEval) otpCounter(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	if t.Count > 1<<62 {
		return e.intCondition(v, 1<<62)
	}
	return e.intCondition(v, int64(t.Count))
}

func (e *condEval) countAuth(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	return e.intCondition(v, int64(t.InfoInt(token.InfoCountAuth, 0)))
}

func (e *condEval) countAuthSuccess(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	return e.intCondition(v, int64(t.InfoInt(token.InfoCountAuthSuccess, 0)))
}

func (e *condEval) countAuthFail(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	fail := t.InfoInt(token.InfoCountAuth, 0) - t.InfoInt(token.InfoCountAuthSuccess, 0)
	return e.intCondition(v, int64(fail))
}

func (e *condEval) failCounter(v string) (bool, error) {
	t, ok := e.token()
	if !ok {
		return true, nil
	}
	return e.intCondition(v, int64(t.FailCount))
}

// --- the counters ------------------------------------------------------

func (e *condEval) counter(v string) (bool, error) {
	var readErr error
	hold, err := e.generic(v, func(name string) (string, bool) {
		n, _, err := e.r.svc.Counter(e.ctx, name)
		if err != nil {
			readErr = err
		}
		// A missing counter is 0.
		return strconv.FormatInt(n, 10), true
	})
	if readErr != nil {
		return false, readErr
	}
	return hold, err
}

// --- the challenge -----------------------------------------------------

// challenges are the challenges (expired ones too) of the single token
// and the request's transaction (all of the token's when the request
// names none).
func (e *condEval) challenges(t *token.Token) ([]token.Challenge, error) {
	if e.chalDone {
		return e.chals, e.chalErr
	}
	e.chalDone = true
	if e.r.svc.cfg.Tokens == nil {
		return nil, nil
	}
	txid := e.r.Call.TransactionID
	if txid == "" {
		txid = e.r.Call.Param("transaction_id")
	}
	e.chals, e.chalErr = e.r.svc.cfg.Tokens.Challenges(e.ctx, token.ChallengeFilter{
		Serial: t.Serial, TransactionID: txid, IncludeExpired: true})
	return e.chals, e.chalErr
}

// challenge returns the single challenge of the token and transaction;
// skip when there is no token or no challenge (the condition holds), and
// neither when there are several (it does not).
func (e *condEval) challenge() (c *token.Challenge, skip bool, err error) {
	t, ok := e.token()
	if !ok {
		return nil, true, nil
	}
	chals, err := e.challenges(t)
	switch {
	case err != nil:
		return nil, false, err
	case len(chals) == 0:
		return nil, true, nil
	case len(chals) > 1:
		e.r.svc.cfg.Log.Warn().Str("component", "eventing").Str("handler", e.r.Def.Name).Str("serial", t.Serial).
			Str("condition", e.name).Msg("event handler condition: more than one challenge of the token and transaction")
		return nil, false, nil
	}
	return &chals[0], false, nil
}

func (e *condEval) challengeSession(v string) (bool, error) {
	c, skip, err := e.challenge()
	if err != nil || skip || c == nil {
		return skip, err
	}
	return e.matchStart(v, c.Session)
}

func (e *condEval) challengeExpired(v string) (bool, error) {
	want, ok := condBool(v)
	if !ok {
		return e.malformed("not True or False")
	}
	c, skip, err := e.challenge()
	if err != nil || skip || c == nil {
		return skip, err
	}
	expired := !e.now.Before(c.Expiration)
	return expired == want, nil
}

// --- comparisons -------------------------------------------------------

// condIntOps are the comparators of an integer condition, longest first.
var condIntOps = []string{"==", "!=", ">=", "=>", "<=", "=<", "=", "<", ">"}

// intCondition checks the integer condition v ("<N", ">N", "==N", "!=N",
// "<=N", ">=N", "=N" or a plain "N" meaning ==N) against have.
func (e *condEval) intCondition(v string, have int64) (bool, error) {
	c := strings.ReplaceAll(v, " ", "")
	op := "=="
	for _, o := range condIntOps {
		if strings.HasPrefix(c, o) {
			op, c = o, c[len(o):]
			break
		}
	}
	n, err := strconv.ParseInt(c, 10, 64)
	if err != nil {
		return e.malformed("not an integer condition like 5, <5, >5, ==5 or !=5")
	}
	return condOrder(condCmp(have, n), op), nil
}

// condCmp compares like cmp.Compare.
func condCmp[T int64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// condOrder applies the comparator op to the result c of comparing the
// left to the right side.
func condOrder(c int, op string) bool {
	switch op {
	case "==", "=":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case ">":
		return c > 0
	case "<=", "=<":
		return c <= 0
	case ">=", "=>":
		return c >= 0
	}
	return false
}

// condGenericOps are the comparators of a "<key> <cmp> <value>"
// condition, the two-character ones first.
var condGenericOps = []string{"==", "!=", "<=", ">=", "=<", "=>", "<", ">"}

// condSplit splits "<key> <cmp> <value>" at its first comparator.
func condSplit(v string) (key, op, value string, ok bool) {
	for i := 0; i < len(v); i++ {
		for _, o := range condGenericOps {
			if strings.HasPrefix(v[i:], o) {
				key, value = strings.TrimSpace(v[:i]), strings.TrimSpace(v[i+len(o):])
				return key, o, value, key != "" && value != ""
			}
		}
	}
	return "", "", "", false
}

// condNow matches a {now} (or {current_time}) tag followed by an offset;
// condNowSigned a tag followed by anything signed.
var (
	condNow       = regexp.MustCompile(`^(.*\{(?:now|current_time)\})([+-]\d+[smhd])(.*)$`)
	condNowSigned = regexp.MustCompile(`\{(?:now|current_time)\}\s*[+-]`)
)

// condNowLayout is how {now} is written: the layout of the validity
// period and privacyIDEA's tokeninfo dates.
const condNowLayout = "2006-01-02T15:04-0700"

// condReplaceNow replaces {now} (and {current_time}), with an optional
// offset like {now}-7d or {now}+2h, by the time.
func condReplaceNow(v string, now time.Time) (string, bool) {
	if m := condNow.FindStringSubmatch(v); m != nil {
		d, ok := condParseDelta(m[2])
		if !ok {
			return "", false
		}
		v, now = m[1]+m[3], now.Add(d)
	} else if condNowSigned.MatchString(v) {
		// An offset that is not one ({now}-7w, {now}+ 2h).
		return "", false
	}
	s := now.Format(condNowLayout)
	return strings.NewReplacer("{now}", s, "{current_time}", s).Replace(v), true
}

// generic checks a "<key> <cmp> <value>" condition, reading the key's
// value with get (ok false: the key is missing).
func (e *condEval) generic(v string, get func(key string) (string, bool)) (bool, error) {
	v, ok := condReplaceNow(v, e.now)
	if !ok {
		return e.malformed("bad time offset")
	}
	key, op, want, ok := condSplit(v)
	if !ok {
		return e.malformed("not of the form '<key> <comparator> <value>' with ==, !=, <, >, <= or >=")
	}
	have, present := get(key)
	if !present {
		// Nothing equals a missing value, and it has no order.
		return op == "!=", nil
	}
	return condOrder(condCompareValues(have, want, e.now), op), nil
}

// condCompareValues compares two condition values as privacyIDEA does:
// as integers when both are integers, else as dates when both are dates,
// else as text.
func condCompareValues(a, b string, now time.Time) int {
	ai, aerr := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
	bi, berr := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if aerr == nil && berr == nil {
		return condCmp(ai, bi)
	}
	if aerr != nil && berr != nil {
		if at, ok := condParseDate(a, now); ok {
			if bt, ok := condParseDate(b, now); ok {
				return at.Compare(bt)
			}
		}
	}
	return condCmp(a, b)
}

// condDateLayouts are the date forms a condition compares: the validity
// and tokeninfo form, ISO 8601 with and without zone or seconds, the
// last_auth form, and day-first and slash dates.
var condDateLayouts = []string{
	condNowLayout,
	"2006-01-02T15:04:05-0700",
	time.RFC3339Nano,
	"2006-01-02T15:04Z07:00",
	"2006-01-02 15:04:05-0700",
	"2006-01-02 15:04:05-07:00",
	"2006-01-02 15:04-0700",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04",
	"2006-01-02 15:04",
	"2006-01-02",
	"02.01.2006 15:04",
	"02.01.2006",
	"2006/01/02 15:04",
	"2006/01/02",
	"02/01/06 15:04",
	"02/01/2006 15:04",
	"02/01/2006",
}

// condParseDate reads a date of condDateLayouts (naive ones in now's
// location) or a relative "+5d", "+2h", "+30m".
func condParseDate(s string, now time.Time) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	if s[0] == '+' {
		if d, ok := condParseDelta(s); ok {
			return now.Add(d), true
		}
		return time.Time{}, false
	}
	for _, l := range condDateLayouts {
		if t, err := time.ParseInLocation(l, s, now.Location()); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
