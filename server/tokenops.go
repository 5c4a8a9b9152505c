package server

import (
	"encoding/csv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

func tokenCSV(c *call, toks []*token.Token, hidden []string) answer {
	return answer{raw: func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="tokens.csv"`)
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"serial", "tokentype", "description", "active", "rollout_state", "count", "failcount", "maxfail", "username", "user_realm", "resolver", "realms"})
		for _, t := range toks {
			j := c.tokenJSON(t, hidden)
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

// enrollDefaults injects policy defaults into the init parameters and
// returns the enrollment-scope options.
type enrollOpts struct {
	verify, encryptPIN bool
}

func (c *call) enrollDefaults(typ string, p token.Params, owner *user.User, realm *string) (enrollOpts, error) {
	var o enrollOpts
	scope := c.callerScope()
	inject := func(param, action string, scopes ...string) error {
		if _, ok := p.Get(param); ok {
			return nil
		}
		for _, sc := range scopes {
			v, err := c.policyString(sc, action, owner, realm)
			if err != nil {
				return err
			}
			if v != "" {
				p[param] = v
				return nil
			}
		}
		return nil
	}
	for _, d := range [][2]string{
		{"hashlib", typ + "_hashlib"}, {"otplen", typ + "_otplen"}, {"timeStep", typ + "_timestep"},
	} {
		if err := inject(d[0], d[1], scope, policy.ScopeEnrollment); err != nil {
			return o, err
		}
	}
	for _, d := range [][2]string{
		{"tokenlabel", "tokenlabel"}, {"tokenissuer", "tokenissuer"}, {"appimageurl", "appimageurl"},
		{"papertoken_count", "papertoken_count"}, {"tantoken_count", "tantoken_count"},
		{"registration.length", "registration.length"}, {"registration.contents", "registration.contents"},
		{"pw.length", "pw.length"}, {"pw.contents", "pw.contents"},
	} {
		if err := inject(d[0], d[1], policy.ScopeEnrollment); err != nil {
			return o, err
		}
	}
	force, err := c.policyFlag(policy.ScopeEnrollment, typ+"_force_server_generate", owner)
	if err != nil {
		return o, err
	}
	if force {
		delete(p, "otpkey")
		p["genkey"] = "1"
	}
	if v, err := c.policyString(policy.ScopeEnrollment, "verify_enrollment", owner, realm); err != nil {
		return o, err
	} else if slices.Contains(strings.Fields(strings.ToLower(v)), typ) {
		o.verify = true
	}
	if o.encryptPIN, err = c.policyFlag(policy.ScopeEnrollment, "encrypt_pin", owner); err != nil {
		return o, err
	}
	if v, err := c.policyString(policy.ScopeEnrollment, "require_description", owner, realm); err != nil {
		return o, err
	} else if slices.Contains(strings.Fields(strings.ToLower(v)), typ) && strings.TrimSpace(p.Str("description")) == "" {
		return o, apierr.New(apierr.Parameter, "Description required for "+typ+" token.")
	}
	return o, nil
}

// maxTokens applies max_token_per_user and max_token_per_realm.
func (c *call) maxTokens(owner *user.User, realm string) error {
	if owner != nil && owner.UID != "" {
		v, err := c.policyString(policy.ScopeEnrollment, "max_token_per_user", owner, nil)
		if err != nil {
			return err
		}
		if n, err := strconv.Atoi(v); err == nil {
			have, err := c.a.s.Tokens().ByOwner(c.ctx, *owner)
			if err != nil {
				return err
			}
			if len(have) >= n {
				return apierr.New(apierr.Policy, "The number of tokens for this user is limited!")
			}
		}
		realm = owner.Realm
	}
	if realm == "" {
		return nil
	}
	v, err := c.policyString(policy.ScopeEnrollment, "max_token_per_realm", owner, &realm)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(v); err == nil {
		p, err := c.a.s.Tokens().List(c.ctx, token.Filter{TokenRealm: realm}, "", false, 1, 1)
		if err != nil {
			return err
		}
		if p.Count >= n {
			return apierr.New(apierr.Policy, "The number of tokens in this realm is limited!")
		}
	}
	return nil
}

// ownerInfo reads the user store attributes of a user as strings.
func (c *call) ownerInfo(u *user.User) map[string]string {
	out := map[string]string{}
	if u == nil || u.Resolver == "" {
		return out
	}
	in, err := c.a.s.Resolvers().Instance(c.ctx, u.Resolver)
	if err != nil {
		return out
	}
	info, err := in.User(c.ctx, u.UID)
	if err != nil {
		return out
	}
	return info.Strings()
}

// postTokenInit is POST /token/init.
func postTokenInit(c *call) (answer, error) {
	p := c.tokenParams()
	typ := strings.ToLower(strings.TrimSpace(p.Str("type")))
	if typ == "" {
		typ = "hotp"
	}
	if _, ok := c.a.s.Tokens().Types().Get(typ); !ok {
		return answer{}, apierr.New(apierr.TokenAdmin, "init token failed. Unknown token type: "+p.Str("type")).WithNumber(1610)
	}
	var owner *user.User
	if c.who.Role == roleUser {
		u, err := c.selfUser()
		if err != nil {
			return answer{}, err
		}
		owner = &u
	} else if p.Str("user") != "" {
		u, _, err := c.targetUser()
		if err != nil {
			return answer{}, err
		}
		owner = &u
	}
	var realms []string
	var realmTarget *string
	if c.who.Role == roleAdmin && owner == nil {
		if r := p.Str("realm"); r != "" {
			if !c.isRealm(r) {
				return answer{}, apierr.New(apierr.Parameter, "The realm "+r+" does not exist.")
			}
			realms, realmTarget = append(realms, r), policy.Str(r)
		}
	}
	for _, r := range strings.Split(p.Str("tokenrealm"), ",") {
		if r = strings.TrimSpace(r); r != "" {
			if !c.isRealm(r) {
				return answer{}, apierr.New(apierr.Parameter, "The realm "+r+" does not exist.")
			}
			realms = append(realms, r)
		}
	}
	action := "enroll" + strings.ToUpper(typ)
	ok, err := c.allowedOn(action, nil, owner, realmTarget)
	if err != nil {
		return answer{}, err
	}
	if !ok {
		return answer{}, c.denied(action)
	}
	serial := p.Str("serial")
	var existing *token.Token
	if serial != "" {
		if t, err := c.a.s.Tokens().Get(c.ctx, serial); err == nil {
			existing = t
			if c.who.Role == roleUser && !sameOwner(t.Owner, owner) {
				return answer{}, apierr.New(apierr.TokenAdmin, "Token already assigned to another user.").WithNumber(1103)
			}
			if c.who.Role == roleAdmin {
				if err := c.mustAllow(action, t); err != nil {
					return answer{}, err
				}
			}
		}
	}
	if pin, ok := p.Get("pin"); ok && pin != "" {
		ok, err := c.allowedOn("enrollpin", existing, owner, realmTarget)
		if err != nil {
			return answer{}, err
		}
		if !ok {
			return answer{}, apierr.New(apierr.Policy, "Setting a PIN is not allowed due to missing 'enrollpin' right.")
		}
		if err := c.checkPINPolicy(typ, pin, owner); err != nil {
			return answer{}, err
		}
	}
	opts, err := c.enrollDefaults(typ, p, owner, realmTarget)
	if err != nil {
		return answer{}, err
	}
	if existing == nil {
		r := ""
		if realmTarget != nil {
			r = *realmTarget
		}
		if err := c.maxTokens(owner, r); err != nil {
			return answer{}, err
		}
	}
	t, detail, err := c.a.s.Tokens().Init(c.ctx, token.InitRequest{Type: typ, Serial: serial, Params: p, Owner: owner,
		OwnerInfo: c.ownerInfo(owner), Realms: realms, EncryptPIN: opts.encryptPIN, Verify: opts.verify && existing == nil})
	if err != nil {
		return answer{}, err
	}
	if err := c.savePINChange(t, p.Str("pin") != ""); err != nil {
		return answer{}, err
	}
	c.entry.Serial, c.entry.TokenType = t.Serial, t.Type
	if owner != nil {
		c.entry.User, c.entry.Realm, c.entry.Resolver = owner.Login, owner.Realm, owner.Resolver
	}
	return answer{value: true, detail: detail}, nil
}

// multiResult is the value of a multi-serial action.
type multiResult struct {
	ok           int
	failed       []string
	unauthorized []string
}

func (m multiResult) value() map[string]any {
	return map[string]any{"count_success": m.ok, "failed": nonNil(m.failed), "unauthorized": nonNil(m.unauthorized)}
}

// eachToken runs fn on the target tokens the caller may act on. Single
// token: a refusal or error is returned. Several: refused and failing
// serials are reported.
func (c *call) eachToken(action string, allowUser bool, fn func(t *token.Token) (int, error)) (int, multiResult, bool, error) {
	toks, multi, err := c.targetTokens(allowUser)
	if err != nil {
		return 0, multiResult{}, false, err
	}
	var res multiResult
	total := 0
	for _, t := range toks {
		ok, err := c.allowedOn(action, t, nil, nil)
		if err != nil {
			return 0, res, multi, err
		}
		if !ok {
			if !multi {
				return 0, res, multi, c.denied(action)
			}
			res.unauthorized = append(res.unauthorized, t.Serial)
			continue
		}
		n, err := fn(t)
		if err != nil {
			if !multi {
				return 0, res, multi, err
			}
			res.failed = append(res.failed, t.Serial)
			continue
		}
		res.ok++
		total += n
	}
	if len(toks) == 1 {
		c.entry.Serial, c.entry.TokenType = toks[0].Serial, toks[0].Type
	}
	return total, res, multi, nil
}

// countAction is the shape of enable/disable/reset/revoke: an int.
func countAction(action string, fn func(c *call, t *token.Token) (int, error)) func(c *call) (answer, error) {
	return func(c *call) (answer, error) {
		n, _, _, err := c.eachToken(action, true, func(t *token.Token) (int, error) { return fn(c, t) })
		if err != nil {
			return answer{}, err
		}
		return answer{value: n}, nil
	}
}

// listAction is the shape of unassign/delete: an int for one serial, the
// multi result for several.
func listAction(action string, fn func(c *call, t *token.Token) error) func(c *call) (answer, error) {
	return func(c *call) (answer, error) {
		n, res, multi, err := c.eachToken(action, true, func(t *token.Token) (int, error) { return 1, fn(c, t) })
		if err != nil {
			return answer{}, err
		}
		if multi {
			return answer{value: res.value()}, nil
		}
		return answer{value: n}, nil
	}
}

func b2n(b bool) int {
	if b {
		return 1
	}
	return 0
}

var (
	postTokenEnable = countAction("enable", func(c *call, t *token.Token) (int, error) {
		ch, err := c.a.s.Tokens().SetActive(c.ctx, t.Serial, true)
		return b2n(ch), err
	})
	postTokenDisable = countAction("disable", func(c *call, t *token.Token) (int, error) {
		ch, err := c.a.s.Tokens().SetActive(c.ctx, t.Serial, false)
		return b2n(ch), err
	})
	postTokenReset = countAction("reset", func(c *call, t *token.Token) (int, error) {
		if _, err := c.a.s.Tokens().Reset(c.ctx, t.Serial); err != nil {
			return 0, err
		}
		return 1, nil
	})
	postTokenRevoke = countAction("revoke", func(c *call, t *token.Token) (int, error) {
		return 1, c.a.s.Tokens().Revoke(c.ctx, t.Serial)
	})
	postTokenUnassign = listAction("unassign", func(c *call, t *token.Token) error {
		return c.a.s.Tokens().Unassign(c.ctx, t.Serial)
	})
	deleteToken = listAction("delete", func(c *call, t *token.Token) error {
		return c.a.s.Tokens().Delete(c.ctx, t.Serial)
	})
)

// postTokenAssign is POST /token/assign.
func postTokenAssign(c *call) (answer, error) {
	serial, err := c.p.required("serial")
	if err != nil {
		return answer{}, err
	}
	var owner user.User
	if c.who.Role == roleUser {
		owner, err = c.selfUser()
	} else {
		if _, err := c.p.required("user"); err != nil {
			return answer{}, err
		}
		owner, _, err = c.targetUser()
	}
	if err != nil {
		return answer{}, err
	}
	t, err := c.a.s.Tokens().Get(c.ctx, serial)
	if err != nil {
		return answer{}, err
	}
	ok, err := c.allowedOn("assign", nil, &owner, nil)
	if err != nil {
		return answer{}, err
	}
	if !ok {
		return answer{}, c.denied("assign")
	}
	if t.Assigned() {
		return answer{}, token.ErrAssigned(t.Owner, c.who.Role == roleUser)
	}
	var pin *string
	if v, ok := c.tokenParams().Get("pin"); ok {
		if err := c.checkPINPolicy(t.Type, v, &owner); err != nil {
			return answer{}, err
		}
		pin = &v
	}
	enc, _ := c.p.boolean("encryptpin")
	if err := c.a.s.Tokens().Assign(c.ctx, serial, owner, pin, enc, c.who.Role == roleUser); err != nil {
		return answer{}, err
	}
	c.entry.Serial, c.entry.TokenType = t.Serial, t.Type
	c.entry.User, c.entry.Realm, c.entry.Resolver = owner.Login, owner.Realm, owner.Resolver
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
	ok := false
	_, _, _, err = c.eachToken("resync", false, func(t *token.Token) (int, error) {
		r, err := c.a.s.Tokens().Resync(c.ctx, t.Serial, otp1, otp2)
		ok = ok || r
		return 1, err
	})
	if err != nil {
		return answer{}, err
	}
	return answer{value: ok}, nil
}

// postTokenSetPIN is POST /token/setpin.
func postTokenSetPIN(c *call) (answer, error) {
	p := c.tokenParams()
	enc, _ := c.p.boolean("encryptpin")
	n, _, _, err := c.eachToken("setpin", false, func(t *token.Token) (int, error) {
		set := 0
		for _, k := range []string{"otppin", "userpin", "sopin"} {
			v, ok := p.Get(k)
			if !ok {
				continue
			}
			if k != "otppin" {
				// userpin and sopin belong to smartcard tokens; none of
				// our types has them, so they count without effect.
				set++
				continue
			}
			if err := c.checkPINPolicy(t.Type, v, t.Owner); err != nil {
				return 0, err
			}
			if err := c.a.s.Tokens().SetPIN(c.ctx, t.Serial, v, enc); err != nil {
				return 0, err
			}
			if err := c.savePINChange(t, v != ""); err != nil {
				return 0, err
			}
			set++
		}
		return set, nil
	})
	if err != nil {
		return answer{}, err
	}
	return answer{value: n}, nil
}

// postTokenSetRandomPIN is POST /token/setrandompin.
func postTokenSetRandomPIN(c *call) (answer, error) {
	var pin string
	n, _, _, err := c.eachToken("setrandompin", false, func(t *token.Token) (int, error) {
		length := 12
		v, err := c.policyString(c.callerScope(), "otp_pin_set_random", t.Owner, nil)
		if err != nil {
			return 0, err
		}
		if x, err := strconv.Atoi(v); err == nil && x > 0 && x <= 128 {
			length = x
		}
		if pin, err = c.a.s.Tokens().RandomString(length, "cn"); err != nil {
			return 0, err
		}
		return 1, c.a.s.Tokens().SetPIN(c.ctx, t.Serial, pin, false)
	})
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
	_, _, _, err = c.eachToken("setdescription", false, func(t *token.Token) (int, error) {
		return 1, c.a.s.Tokens().SetDescription(c.ctx, t.Serial, desc)
	})
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// postTokenSet is POST /token/set (admin).
func postTokenSet(c *call) (answer, error) {
	f, n, err := token.ParseFields(c.tokenParams())
	if err != nil {
		return answer{}, err
	}
	total, _, _, err := c.eachToken("set", true, func(t *token.Token) (int, error) {
		return n, c.a.s.Tokens().SetFields(c.ctx, t.Serial, f)
	})
	if err != nil {
		return answer{}, err
	}
	return answer{value: total}, nil
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
	for _, r := range realms {
		if !c.isRealm(r) {
			return answer{}, apierr.New(apierr.Parameter, "The realm "+r+" does not exist.")
		}
	}
	_, _, _, err = c.eachToken("tokenrealms", false, func(t *token.Token) (int, error) {
		return 1, c.a.s.Tokens().SetRealms(c.ctx, t.Serial, realms)
	})
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// postTokenLost is POST /token/lost/{serial}.
func postTokenLost(c *call) (answer, error) {
	var val map[string]any
	_, _, _, err := c.eachToken("losttoken", false, func(t *token.Token) (int, error) {
		var o token.LostOptions
		if v, err := c.policyString(policy.ScopeEnrollment, "losttoken_PW_length", t.Owner, nil); err != nil {
			return 0, err
		} else if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 128 {
			o.PWLength = n
		}
		v, err := c.policyString(policy.ScopeEnrollment, "losttoken_PW_contents", t.Owner, nil)
		if err != nil {
			return 0, err
		}
		o.PWContents = v
		if v, err := c.policyString(policy.ScopeEnrollment, "losttoken_valid", t.Owner, nil); err != nil {
			return 0, err
		} else if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 3650 {
			o.Valid = time.Duration(n) * 24 * time.Hour
		}
		res, err := c.a.s.Tokens().Lost(c.ctx, t.Serial, o)
		if err != nil {
			return 0, err
		}
		val = map[string]any{"serial": res.Serial, "init": true, "user": true, "pin": true, "valid_to": "xxxx",
			"password": res.Password, "end_date": res.EndDate, "disable": 1}
		return 1, nil
	})
	if err != nil {
		return answer{}, err
	}
	return answer{value: val}, nil
}

// getTokenSerial is GET /token/getserial/{otp} (admin).
func getTokenSerial(c *call) (answer, error) {
	otpValue, err := c.p.required("otp")
	if err != nil {
		return answer{}, err
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
		return answer{}, err
	}
	if f.Window < 1 || f.Window > 1000 {
		return answer{}, apierr.New(apierr.Parameter, "window must be a number from 1 to 1000")
	}
	serial, n, err := c.a.s.Tokens().GetSerial(c.ctx, otpValue, f)
	if err != nil {
		return answer{}, err
	}
	return answer{value: map[string]any{"serial": serial, "count": n}}, nil
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
	_, _, _, err = c.eachToken("settokeninfo", false, func(t *token.Token) (int, error) {
		return 1, c.a.s.Tokens().SetInfo(c.ctx, t.Serial, key, value)
	})
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// deleteTokenInfo is DELETE /token/info/{serial}/{key} (admin).
func deleteTokenInfo(c *call, serial, key string) (answer, error) {
	c.p.set("serial", serial)
	_, _, _, err := c.eachToken("settokeninfo", false, func(t *token.Token) (int, error) {
		return 1, c.a.s.Tokens().DeleteInfo(c.ctx, t.Serial, key)
	})
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
		if err := c.authorize("cancelchallenge"); err != nil {
			return answer{}, err
		}
		n, err := c.a.s.Tokens().DeleteTransaction(c.ctx, parts[1])
		if err != nil {
			return answer{}, err
		}
		return answer{value: map[string]any{"status": true, "deleted": n}}, nil
	}
	return answer{}, apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server.")
}

// getTokenChallenges is GET /token/challenges/[{serial}] (admin).
func getTokenChallenges(c *call) (answer, error) {
	if err := c.authorize("getchallenges"); err != nil {
		return answer{}, err
	}
	var f token.ChallengeFilter
	f.Serial, _ = c.p.str("serial")
	f.TransactionID, _ = c.p.str("transaction_id")
	if c.p.has("user") {
		toks, _, err := c.targetTokens(true)
		if err != nil {
			return answer{}, err
		}
		f.Serials = []string{}
		for _, t := range toks {
			f.Serials = append(f.Serials, t.Serial)
		}
	}
	page, size, err := c.pageParams()
	if err != nil {
		return answer{}, err
	}
	list, err := c.a.s.Tokens().Challenges(c.ctx, f)
	if err != nil {
		return answer{}, err
	}
	if sd, _ := c.p.str("sortdir"); strings.EqualFold(sd, "asc") {
		slices.Reverse(list)
	}
	start := (page - 1) * size
	out := []map[string]any{}
	for i := start; i < len(list) && i < start+size; i++ {
		ch := list[i]
		out = append(out, map[string]any{"id": i + 1, "transaction_id": ch.TransactionID, "challenge": ch.Challenge,
			"serial": ch.Serial, "data": map[string]any{}, "otp_received": ch.OTPReceived, "received_count": ch.ReceivedCount,
			"otp_valid": ch.OTPValid, "expiration": ch.Expiration.UTC().Format(http.TimeFormat),
			"timestamp": ch.Created.UTC().Format(http.TimeFormat)})
	}
	val := map[string]any{"challenges": out, "count": len(list), "current": page, "redis_cache_enabled": false}
	if page > 1 {
		val["prev"] = page - 1
	}
	if start+size < len(list) {
		val["next"] = page + 1
	}
	return answer{value: val}, nil
}

// copyAction is POST /token/copypin and /token/copyuser (admin).
func copyAction(action string, fn func(c *call, from, to string) error) func(c *call) (answer, error) {
	return func(c *call) (answer, error) {
		from, err := c.p.required("from")
		if err != nil {
			return answer{}, err
		}
		to, err := c.p.required("to")
		if err != nil {
			return answer{}, err
		}
		for _, s := range []string{from, to} {
			t, err := c.a.s.Tokens().Get(c.ctx, s)
			if err != nil {
				return answer{}, err
			}
			if err := c.mustAllow(action, t); err != nil {
				return answer{}, err
			}
		}
		if err := fn(c, from, to); err != nil {
			return answer{}, err
		}
		return answer{value: true}, nil
	}
}

var (
	postTokenCopyPIN  = copyAction("copytokenpin", func(c *call, from, to string) error { return c.a.s.Tokens().CopyPIN(c.ctx, from, to) })
	postTokenCopyUser = copyAction("copytokenuser", func(c *call, from, to string) error { return c.a.s.Tokens().CopyUser(c.ctx, from, to) })
)
