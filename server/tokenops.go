package server

import (
	"context"
	"encoding/csv"
	"net/http"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/token"
)

func tokenCSV(c *call, toks []*token.Token) answer {
	return answer{raw: func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="tokens.csv"`)
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"serial", "tokentype", "description", "active", "rollout_state", "count", "failcount", "maxfail", "username", "user_realm", "resolver", "realms"})
		for _, t := range toks {
			j := c.tokenJSON(t)
			_ = cw.Write([]string{csvSafe(t.Serial), t.Type, csvSafe(t.Description), strconv.FormatBool(t.Active), t.RolloutState,
				strconv.FormatUint(t.Count, 10), strconv.Itoa(t.FailCount), strconv.Itoa(t.MaxFail),
				csvSafe(j["username"].(string)), j["user_realm"].(string), j["resolver"].(string), strings.Join(t.Realms, " ")})
		}
		cw.Flush()
	}}
}

// csvSafe defuses spreadsheet formulas.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// userTarget is the "user", "realm" and "resolver" parameters as the
// target user of a token operation.
func (c *call) userTarget() authsrv.Target {
	str := func(key string) string { v, _ := c.p.str(key); return v }
	return authsrv.Target{User: str("user"), Realm: str("realm"), Resolver: str("resolver")}
}

// tokenSelect reads the tokens a request is about: "serials" (a list
// request), else "serial" (path or parameter, a comma list), else the
// user of the "user" parameters.
func (c *call) tokenSelect() (authsrv.TokenSelect, error) {
	var sel authsrv.TokenSelect
	if c.p.has("serials") {
		l, err := c.p.list("serials")
		if err != nil {
			return sel, err
		}
		sel.Serials, sel.List = l, true
	} else {
		s, err := c.p.str("serial")
		if err != nil {
			return sel, err
		}
		for _, x := range strings.Split(s, ",") {
			if x = strings.TrimSpace(x); x != "" {
				sel.Serials = append(sel.Serials, x)
			}
		}
	}
	sel.Owner = c.userTarget()
	return sel, nil
}

// batchValue is the answer of an operation on one or several tokens: the
// count, or for a list request the count of successes, the failed and the
// refused serials.
func batchValue(b authsrv.TokenBatch, list bool) any {
	if list && b.List {
		return map[string]any{"count_success": b.Success, "failed": nonNil(b.Failed), "unauthorized": nonNil(b.Unauthorized)}
	}
	return b.Count
}

// selectAction is the shape of the operations on selected tokens: enable,
// disable, reset and revoke answer the count; unassign and delete (list)
// the per-token result for a list request.
func selectAction(list bool, op func(o *authsrv.Ops, ctx context.Context, who caller.Caller, sel authsrv.TokenSelect) (authsrv.TokenBatch, error)) func(c *call) (answer, error) {
	return func(c *call) (answer, error) {
		sel, err := c.tokenSelect()
		if err != nil {
			return answer{}, err
		}
		b, err := op(c.a.s.Ops(), c.ctx, c.caller(), sel)
		c.ran()
		if err != nil {
			return answer{}, err
		}
		return answer{value: batchValue(b, list)}, nil
	}
}

var (
	postTokenEnable   = selectAction(false, (*authsrv.Ops).EnableTokens)
	postTokenDisable  = selectAction(false, (*authsrv.Ops).DisableTokens)
	postTokenReset    = selectAction(false, (*authsrv.Ops).ResetTokens)
	postTokenRevoke   = selectAction(false, (*authsrv.Ops).RevokeTokens)
	postTokenUnassign = selectAction(true, (*authsrv.Ops).UnassignTokens)
	deleteToken       = selectAction(true, (*authsrv.Ops).DeleteTokens)
)

// postTokenInit is POST /token/init.
func postTokenInit(c *call) (answer, error) {
	p := c.tokenParams()
	req := authsrv.TokenInit{Type: p.Str("type"), Serial: p.Str("serial"), Params: p, User: c.userTarget(),
		Realm: p.Str("realm"), TokenRealms: strings.Split(p.Str("tokenrealm"), ",")}
	res, err := c.a.s.Ops().InitToken(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: true, detail: res.Detail}, nil
}

// postTokenAssign is POST /token/assign.
func postTokenAssign(c *call) (answer, error) {
	serial, err := c.p.required("serial")
	if err != nil {
		return answer{}, err
	}
	if c.who.Role != roleUser {
		if _, err := c.p.required("user"); err != nil {
			return answer{}, err
		}
	}
	req := authsrv.TokenAssign{Serial: serial, User: c.userTarget()}
	if v, ok := c.tokenParams().Get("pin"); ok {
		req.PIN = &v
	}
	req.EncryptPIN, _ = c.p.boolean("encryptpin")
	err = c.a.s.Ops().AssignToken(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// postTokenResync is POST /token/resync.
func postTokenResync(c *call) (answer, error) {
	otp1, err := c.p.required("otp1")
	if err != nil {
		return answer{}, err
	}
	otp2, err := c.p.required("otp2")
	if err != nil {
		return answer{}, err
	}
	sel, err := c.tokenSelect()
	if err != nil {
		return answer{}, err
	}
	ok, err := c.a.s.Ops().ResyncToken(c.ctx, c.caller(), sel, otp1, otp2)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: ok}, nil
}

// postTokenSetPIN is POST /token/setpin.
func postTokenSetPIN(c *call) (answer, error) {
	p := c.tokenParams()
	var pins authsrv.TokenPINs
	for k, dst := range map[string]**string{"otppin": &pins.OTPPIN, "userpin": &pins.UserPIN, "sopin": &pins.SOPIN} {
		if v, ok := p.Get(k); ok {
			*dst = &v
		}
	}
	pins.Encrypt, _ = c.p.boolean("encryptpin")
	sel, err := c.tokenSelect()
	if err != nil {
		return answer{}, err
	}
	n, err := c.a.s.Ops().SetTokenPIN(c.ctx, c.caller(), sel, pins)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: n}, nil
}

// postTokenSetRandomPIN is POST /token/setrandompin.
func postTokenSetRandomPIN(c *call) (answer, error) {
	sel, err := c.tokenSelect()
	if err != nil {
		return answer{}, err
	}
	n, pin, err := c.a.s.Ops().SetRandomTokenPIN(c.ctx, c.caller(), sel)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: n, detail: map[string]any{"pin": pin}}, nil
}

// postTokenDescription is POST /token/description.
func postTokenDescription(c *call) (answer, error) {
	desc, err := c.p.str("description")
	if err != nil {
		return answer{}, err
	}
	if !c.p.has("description") {
		return answer{}, apierr.MissingParameter("description")
	}
	sel, err := c.tokenSelect()
	if err != nil {
		return answer{}, err
	}
	err = c.a.s.Ops().SetTokenDescription(c.ctx, c.caller(), sel, desc)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// postTokenSet is POST /token/set (admin).
func postTokenSet(c *call) (answer, error) {
	f, _, err := token.ParseFields(c.tokenParams())
	if err != nil {
		return answer{}, err
	}
	sel, err := c.tokenSelect()
	if err != nil {
		return answer{}, err
	}
	b, err := c.a.s.Ops().SetTokenFields(c.ctx, c.caller(), sel, f)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: b.Count}, nil
}

// postTokenRealm is POST /token/realm/{serial} (admin).
func postTokenRealm(c *call) (answer, error) {
	realms, err := c.p.list("realms")
	if err != nil {
		return answer{}, err
	}
	if realms == nil {
		return answer{}, apierr.MissingParameter("realms")
	}
	sel, err := c.tokenSelect()
	if err != nil {
		return answer{}, err
	}
	err = c.a.s.Ops().SetTokenRealms(c.ctx, c.caller(), sel, realms)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// postTokenLost is POST /token/lost/{serial}.
func postTokenLost(c *call) (answer, error) {
	sel, err := c.tokenSelect()
	if err != nil {
		return answer{}, err
	}
	res, err := c.a.s.Ops().LostToken(c.ctx, c.caller(), sel)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: map[string]any{"serial": res.Serial, "init": true, "user": true, "pin": true, "valid_to": "xxxx",
		"password": res.Password, "end_date": res.EndDate, "disable": 1}}, nil
}

// getTokenSerial is GET /token/getserial/{otp} (admin;
// authsrv.Ops.GetSerial).
func getTokenSerial(c *call) (answer, error) {
	otpValue, err := c.p.required("otp")
	if err != nil {
		return answer{}, c.refused("getserial", err)
	}
	var f token.GetSerialFilter
	f.Type, _ = c.p.str("type")
	f.Serial, _ = c.p.str("serial")
	if a, _ := c.p.boolean("assigned"); a {
		f.Assigned = new(bool)
		*f.Assigned = true
	}
	if u, _ := c.p.boolean("unassigned"); u {
		f.Assigned = new(bool)
	}
	if f.Window, err = c.p.integer("window", 10); err != nil {
		return answer{}, c.refused("getserial", err)
	}
	if f.Window == 0 {
		// The library reads 0 as its default.
		return answer{}, c.refused("getserial", apierr.New(apierr.Parameter, "window must be a number from 1 to 1000"))
	}
	serial, n, err := c.a.s.Ops().GetSerial(c.ctx, c.caller(), otpValue, f)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	// No match: privacyIDEA's serial is null.
	var found any
	if serial != "" {
		found = serial
	}
	return answer{value: map[string]any{"serial": found, "count": n}}, nil
}

// postTokenInfo is POST /token/info/{serial}/{key} (admin).
func postTokenInfo(c *call) (answer, error) {
	key, err := c.p.required("key")
	if err != nil {
		return answer{}, err
	}
	value, err := c.p.str("value")
	if err != nil {
		return answer{}, err
	}
	sel, err := c.tokenSelect()
	if err != nil {
		return answer{}, err
	}
	err = c.a.s.Ops().SetTokenInfo(c.ctx, c.caller(), sel, key, value)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// deleteTokenInfo is DELETE /token/info/{serial}/{key} (admin).
func deleteTokenInfo(c *call, serial, key string) (answer, error) {
	err := c.a.s.Ops().DeleteTokenInfo(c.ctx, c.caller(), authsrv.TokenSelect{Serials: []string{serial}}, key)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// deleteTokenRoute is DELETE /token/{serial}, /token/{serial}/..., which
// also carries DELETE /token/info/{serial}/{key} and
// /token/challenges/transaction/{id}.
func deleteTokenRoute(c *call) (answer, error) {
	first, _ := c.p.str("serial")
	rest, _ := c.p.str("rest")
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	switch {
	case rest == "" || rest == "/":
		return deleteToken(c)
	case first == "info" && len(parts) == 2:
		if c.who.Role != roleAdmin {
			return answer{}, errWrongRole
		}
		return deleteTokenInfo(c, parts[0], parts[1])
	case first == "challenges" && len(parts) == 2 && parts[0] == "transaction":
		if c.who.Role != roleAdmin {
			return answer{}, errWrongRole
		}
		n, err := c.a.s.Ops().CancelChallenges(c.ctx, c.caller(), parts[1])
		c.ran()
		if err != nil {
			return answer{}, err
		}
		return answer{value: map[string]any{"status": true, "deleted": n}}, nil
	}
	return answer{}, apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server.")
}

// getTokenChallenges is GET /token/challenges/[{serial}] (admin;
// authsrv.Ops.Challenges).
func getTokenChallenges(c *call) (answer, error) {
	var req authsrv.ChallengeListRequest
	req.Filter.Serial, _ = c.p.str("serial")
	req.Filter.TransactionID, _ = c.p.str("transaction_id")
	if c.p.has("user") {
		var err error
		if req.Owner.User, err = c.p.required("user"); err != nil {
			return answer{}, c.refused("getchallenges", err)
		}
		req.Owner.Realm, _ = c.p.str("realm")
		req.Owner.Resolver, _ = c.p.str("resolver")
	}
	var err error
	if req.Page, req.PageSize, err = c.pageParams(); err != nil {
		return answer{}, c.refused("getchallenges", err)
	}
	sd, _ := c.p.str("sortdir")
	req.Ascending = strings.EqualFold(sd, "asc")
	res, err := c.a.s.Ops().Challenges(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := []map[string]any{}
	for i, ch := range res.Challenges {
		out = append(out, map[string]any{"id": res.Offset + i + 1, "transaction_id": ch.TransactionID, "challenge": ch.Challenge,
			"serial": ch.Serial, "data": map[string]any{}, "otp_received": ch.OTPReceived, "received_count": ch.ReceivedCount,
			"otp_valid": ch.OTPValid, "expiration": ch.Expiration.UTC().Format(http.TimeFormat),
			"timestamp": ch.Created.UTC().Format(http.TimeFormat)})
	}
	val := map[string]any{"challenges": out, "count": res.Count, "current": res.Page, "redis_cache_enabled": false,
		"prev": pageOrNull(res.Page - 1), "next": nil}
	if res.Offset+req.PageSize < res.Count {
		val["next"] = res.Page + 1
	}
	return answer{value: val}, nil
}

// copyAction is POST /token/copypin and /token/copyuser (admin).
func copyAction(op func(o *authsrv.Ops, ctx context.Context, who caller.Caller, req authsrv.TokenCopy) error) func(c *call) (answer, error) {
	return func(c *call) (answer, error) {
		from, err := c.p.required("from")
		if err != nil {
			return answer{}, err
		}
		to, err := c.p.required("to")
		if err != nil {
			return answer{}, err
		}
		err = op(c.a.s.Ops(), c.ctx, c.caller(), authsrv.TokenCopy{From: from, To: to})
		c.ran()
		if err != nil {
			return answer{}, err
		}
		return answer{value: true}, nil
	}
}

var (
	postTokenCopyPIN  = copyAction((*authsrv.Ops).CopyTokenPIN)
	postTokenCopyUser = copyAction((*authsrv.Ops).CopyTokenUser)
)
