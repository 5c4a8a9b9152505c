package eventing

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// Actions of the Token module (section 7.5 of the admin-config spec).
// Containers, token groups and machine applications do not exist in this
// library, so their actions are left out.
const (
	tokActSetRealm        = "set tokenrealm"
	tokActDelete          = "delete"
	tokActUnassign        = "unassign"
	tokActDisable         = "disable"
	tokActEnable          = "enable"
	tokActEnroll          = "enroll"
	tokActSetDescription  = "set description"
	tokActSetValidity     = "set validity"
	tokActSetCountWindow  = "set countwindow"
	tokActSetInfo         = "set tokeninfo"
	tokActIncreaseInfo    = "increase tokeninfo"
	tokActDeleteInfo      = "delete tokeninfo"
	tokActSetFailCounter  = "set failcounter"
	tokActChangeFailCount = "change failcounter"
	tokActSetMaxFail      = "set max failcount"
	tokActSetRandomPIN    = "set random pin"
	tokActAttachApp       = "attach application"
)

// Option names of the Token module that contain spaces, as privacyIDEA
// spells them.
const (
	tokOptValidFrom   = "valid from"
	tokOptValidTill   = "valid till"
	tokOptCountWindow = "count window"
	tokOptFailCounter = "fail counter"
	tokOptChangeFail  = "change fail counter"
	tokOptMaxFail     = "max failcount"
)

const (
	// tokDefaultPINLength is the length of a random PIN when the
	// definition gives none.
	tokDefaultPINLength = 12
	tokMaxPINLength     = 31
	// tokTimeLayout renders {now} in tokeninfo values and descriptions
	// as privacyIDEA renders its authentication times.
	tokTimeLayout = "2006-01-02 15:04:05.000000-0700"
)

// tokenModule is the Token handler module: it changes the call's token or
// enrolls a new one.
type tokenModule struct{ s *Service }

var _ Module = (*tokenModule)(nil)

func newToken(s *Service) Module { return &tokenModule{s: s} }

func (m *tokenModule) Name() string        { return "Token" }
func (m *tokenModule) Positions() []string { return []string{Post, Pre} }
func (m *tokenModule) DefaultAbort() bool  { return false }

// Actions lists the actions with their options; the value lists (realms,
// token types, SMTP servers, SMS gateways) are read from the configuration.
func (m *tokenModule) Actions(ctx context.Context) (map[string]map[string]OptionSpec, error) {
	var realms, types, smtp, sms []string
	if m.s.cfg.Realms != nil {
		list, _, err := m.s.cfg.Realms.List(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range list {
			realms = append(realms, r.Name)
		}
	}
	if m.s.cfg.Tokens != nil {
		types = m.s.cfg.Tokens.Types().Names()
	}
	if m.s.cfg.Notify != nil {
		servers, err := m.s.cfg.Notify.SMTPServers(ctx)
		if err != nil {
			return nil, err
		}
		for _, srv := range servers {
			smtp = append(smtp, srv.Identifier)
		}
		gws, err := m.s.cfg.Notify.Gateways(ctx, 0)
		if err != nil {
			return nil, err
		}
		for _, g := range gws {
			sms = append(sms, g.Name)
		}
	}
	lengths := make([]string, 0, tokMaxPINLength)
	for i := 1; i <= tokMaxPINLength; i++ {
		lengths = append(lengths, strconv.Itoa(i))
	}
	str := func(desc string, required bool) OptionSpec {
		return OptionSpec{Type: "str", Required: required, Description: desc}
	}
	return map[string]map[string]OptionSpec{
		tokActSetRealm: {
			"realm":      {Type: "str", Required: true, Description: "The realm the token gets.", Value: realms},
			"only_realm": {Type: "bool", Description: "Make the realm the token's only realm instead of adding it to the token's realms."},
		},
		tokActDelete:   {},
		tokActUnassign: {},
		tokActDisable:  {},
		tokActEnable:   {},
		tokActEnroll: {
			"tokentype": {Type: "str", Required: true, Description: "The type of the new token.", Value: types},
			"user":      {Type: "bool", Description: "Assign the new token to the user of the request (or the owner of its token)."},
			"realm":     {Type: "str", Description: "A realm for the new token.", Value: realms},
			"dynamic_phone": {Type: "bool", VisibleIf: "tokentype", VisibleValue: "sms",
				Description: "Read the mobile number from the user store whenever an SMS is sent."},
			"dynamic_email": {Type: "bool", VisibleIf: "tokentype", VisibleValue: "email",
				Description: "Read the e-mail address from the user store whenever an e-mail is sent."},
			"smtp_identifier": {Type: "str", VisibleIf: "tokentype", VisibleValue: "email", Value: smtp,
				Description: "The SMTP server the new e-mail token sends through."},
			"sms_identifier": {Type: "str", VisibleIf: "tokentype", VisibleValue: "sms", Value: sms,
				Description: "The SMS gateway the new SMS token sends through."},
			"additional_params": str("Further enrollment parameters as a JSON object, e.g. {\"hashlib\": \"sha256\"}.", false),
			"motppin": {Type: "str", VisibleIf: "tokentype", VisibleValue: "motp",
				Description: "The mOTP PIN of the new mOTP token (required for that type)."},
		},
		tokActSetDescription: {
			"description": str("The new description. Tags: {now}, {now}+5d, {client_ip}, {username}, {realm}, {ua_browser}, {ua_string}.", false),
		},
		tokActSetValidity: {
			tokOptValidFrom: str("Start of the validity period: a date (YYYY-MM-DDThh:mm+zzzz) or an offset from now like +10m, +24h, +7d.", false),
			tokOptValidTill: str("End of the validity period: a date (YYYY-MM-DDThh:mm+zzzz) or an offset from now like +10m, +24h, +7d.", false),
		},
		tokActSetCountWindow: {
			tokOptCountWindow: str("The new count window of the token.", true),
		},
		tokActSetInfo: {
			"key":   str("The tokeninfo key to set.", true),
			"value": str("The value. Tags: {now}, {now}+5d, {client_ip}, {username}, {realm}, {ua_browser}, {ua_string}.", false),
		},
		tokActIncreaseInfo: {
			"key":       str("The tokeninfo key whose integer value is increased (a missing value counts as 0).", true),
			"increment": {Type: "int", Description: "The amount to add (default 1; may be negative)."},
		},
		tokActDeleteInfo: {
			"key": str("The tokeninfo key to delete.", true),
		},
		tokActSetFailCounter: {
			tokOptFailCounter: str("The new fail counter of the token.", true),
		},
		tokActChangeFailCount: {
			tokOptChangeFail: str("Add to the fail counter: +n or -n (the counter stays at least 0).", true),
		},
		tokActSetMaxFail: {
			tokOptMaxFail: str("The new maximum fail counter of the token.", true),
		},
		tokActSetRandomPIN: {
			"length": {Type: "int", Required: true, Value: lengths,
				Description: "Set the token PIN to a random PIN of this length (default 12); a later notification can send it with the {pin} tag."},
		},
		tokActAttachApp: {
			"application": {Type: "str", Required: true, Value: []string{"ssh", "offline", "luks"},
				Description: "Attach the token to this application."},
			"machine ID": str("The host name of the machine to attach the token to (empty: no machine, for a service ID).", false),
			"service_id": {Type: "str", VisibleIf: "application", VisibleValue: "ssh", Description: "ssh: the service ID."},
			"user":       {Type: "str", VisibleIf: "application", VisibleValue: "ssh", Description: "ssh: the login user on the machine."},
			"count":      {Type: "str", VisibleIf: "application", VisibleValue: "offline", Description: "offline: how many OTP values to hand out."},
			"rounds":     {Type: "str", VisibleIf: "application", VisibleValue: "offline", Description: "offline: the PBKDF2 rounds of each value."},
			"slot":       {Type: "str", VisibleIf: "application", VisibleValue: "luks", Description: "luks: the key slot."},
			"partition":  {Type: "str", VisibleIf: "application", VisibleValue: "luks", Description: "luks: the partition."},
		},
	}, nil
}

// Check validates the options of a known action. An unknown action is
// stored (privacyIDEA does not validate the action name) and fails when
// it runs.
func (m *tokenModule) Check(ctx context.Context, d Definition) error {
	o := d.Options
	act := tokAction(d.Action)
	switch act {
	case tokActSetRealm:
		if err := tokRequire(o, act, "realm"); err != nil {
			return err
		}
		return m.checkRealm(ctx, o["realm"])
	case tokActEnroll:
		if err := tokRequire(o, act, "tokentype"); err != nil {
			return err
		}
		if m.s.cfg.Tokens != nil {
			if _, ok := m.s.cfg.Tokens.Types().Get(strings.TrimSpace(o["tokentype"])); !ok {
				return paramErr("Unknown token type: " + o["tokentype"])
			}
		}
		if _, err := tokAdditionalParams(o["additional_params"]); err != nil {
			return err
		}
		if r := strings.TrimSpace(o["realm"]); r != "" {
			return m.checkRealm(ctx, r)
		}
	case tokActSetDescription:
		if len(o["description"]) > 512 {
			return paramErr("The description is too long (at most 512 characters).")
		}
	case tokActSetValidity:
		now := m.s.now()
		for _, k := range []string{tokOptValidFrom, tokOptValidTill} {
			if v := strings.TrimSpace(o[k]); v != "" {
				if _, err := tokParseDate(v, now); err != nil {
					return err
				}
			}
		}
	case tokActSetCountWindow:
		if err := tokRequire(o, act, tokOptCountWindow); err != nil {
			return err
		}
		_, _, err := token.ParseFields(token.Params{"count_window": o[tokOptCountWindow]})
		return err
	case tokActSetInfo, tokActDeleteInfo:
		if err := tokRequire(o, act, "key"); err != nil {
			return err
		}
		return tokCheckInfoKey(o["key"])
	case tokActIncreaseInfo:
		if err := tokRequire(o, act, "key"); err != nil {
			return err
		}
		if err := tokCheckInfoKey(o["key"]); err != nil {
			return err
		}
		_, err := tokIncrement(o["increment"])
		return err
	case tokActSetFailCounter:
		if err := tokRequire(o, act, tokOptFailCounter); err != nil {
			return err
		}
		_, err := tokFailCount(o[tokOptFailCounter])
		return err
	case tokActChangeFailCount:
		if err := tokRequire(o, act, tokOptChangeFail); err != nil {
			return err
		}
		_, err := tokFailDelta(o[tokOptChangeFail])
		return err
	case tokActSetMaxFail:
		if err := tokRequire(o, act, tokOptMaxFail); err != nil {
			return err
		}
		_, _, err := token.ParseFields(token.Params{"max_failcount": o[tokOptMaxFail]})
		return err
	case tokActSetRandomPIN:
		_, err := tokPINLength(o["length"])
		return err
	case tokActAttachApp:
		return tokRequire(o, act, "application")
	}
	return nil
}

// checkRealm refuses a realm that does not exist (as /token/realm does).
func (m *tokenModule) checkRealm(ctx context.Context, name string) error {
	if m.s.cfg.Realms != nil && !m.s.cfg.Realms.Exists(ctx, realm.Normalize(name)) {
		return paramErr("The realm " + strings.TrimSpace(name) + " does not exist.")
	}
	return nil
}

// Do runs the action on the call's single token (enroll needs none). When
// the call has no single token nothing happens.
func (m *tokenModule) Do(ctx context.Context, r *Run) error {
	act := tokAction(r.Def.Action)
	if act == tokActEnroll {
		return m.enroll(ctx, r)
	}
	if !tokKnown(act) {
		return paramErr("Unknown action " + r.Def.Action + " of the handler module Token.")
	}
	if m.s.cfg.Tokens == nil {
		return nil
	}
	t, ok := r.Token(ctx)
	if !ok {
		m.s.cfg.Log.Debug().Str("component", "eventing").Str("handler", r.Def.Name).Str("action", act).
			Msg("token handler action skipped: the call has no single token")
		return nil
	}
	defer r.RefreshToken()
	err := m.apply(ctx, r, act, t)
	if err == nil {
		m.s.cfg.Log.Info().Str("component", "eventing").Str("handler", r.Def.Name).Str("action", act).
			Str("serial", t.Serial).Str("request_id", r.Call.Caller.RequestID).Msg("token handler action done")
	}
	return err
}

// apply makes the change of act on t.
func (m *tokenModule) apply(ctx context.Context, r *Run, act string, t *token.Token) error {
	ts := m.s.cfg.Tokens
	o := r.Def.Options
	serial := t.Serial
	switch act {
	case tokActSetRealm:
		name := realm.Normalize(o["realm"])
		if name == "" {
			return apierr.MissingParameter("realm")
		}
		if err := m.checkRealm(ctx, name); err != nil {
			return err
		}
		realms := []string{name}
		if !IsTrue(o["only_realm"]) {
			realms = append(realms, t.Realms...)
		}
		_, err := ts.ApplyOne(ctx, serial, token.RealmsChange(realms), r.InTx(ctx))
		return err
	case tokActDelete:
		return ts.Delete(ctx, serial, r.InTx(ctx))
	case tokActUnassign:
		return ts.Unassign(ctx, serial, r.InTx(ctx))
	case tokActDisable, tokActEnable:
		_, err := ts.SetActive(ctx, serial, act == tokActEnable, r.InTx(ctx))
		return err
	case tokActSetDescription:
		return ts.SetDescription(ctx, serial, m.expand(ctx, r, o["description"]), r.InTx(ctx))
	case tokActSetValidity:
		var f token.Fields
		now := m.s.now()
		for _, b := range []struct {
			key string
			dst **string
		}{{tokOptValidFrom, &f.ValidityStart}, {tokOptValidTill, &f.ValidityEnd}} {
			v := strings.TrimSpace(o[b.key])
			if v == "" {
				continue
			}
			tm, err := tokParseDate(v, now)
			if err != nil {
				return err
			}
			s := token.FormatValidity(tm)
			*b.dst = &s
		}
		if f.Len() == 0 {
			return nil
		}
		return ts.SetFields(ctx, serial, f, r.InTx(ctx))
	case tokActSetCountWindow:
		f, _, err := token.ParseFields(token.Params{"count_window": o[tokOptCountWindow]})
		if err != nil {
			return err
		}
		return ts.SetFields(ctx, serial, f, r.InTx(ctx))
	case tokActSetMaxFail:
		f, _, err := token.ParseFields(token.Params{"max_failcount": o[tokOptMaxFail]})
		if err != nil {
			return err
		}
		return ts.SetFields(ctx, serial, f, r.InTx(ctx))
	case tokActSetInfo:
		key := strings.TrimSpace(o["key"])
		if key == "" {
			return apierr.MissingParameter("key")
		}
		return ts.SetInfo(ctx, serial, key, m.expand(ctx, r, o["value"]), r.InTx(ctx))
	case tokActDeleteInfo:
		key := strings.TrimSpace(o["key"])
		if key == "" {
			return apierr.MissingParameter("key")
		}
		return ts.DeleteInfo(ctx, serial, key, r.InTx(ctx))
	case tokActIncreaseInfo:
		return m.increaseInfo(ctx, r, serial, o)
	case tokActSetFailCounter:
		n, err := tokFailCount(o[tokOptFailCounter])
		if err != nil {
			return err
		}
		now := m.s.now()
		_, err = ts.Update(ctx, serial, false, func(t *token.Token) error { tokSetFailCount(t, n, now); return nil }, r.InTx(ctx))
		return err
	case tokActChangeFailCount:
		d, err := tokFailDelta(o[tokOptChangeFail])
		if err != nil {
			return err
		}
		now := m.s.now()
		_, err = ts.Update(ctx, serial, false, func(t *token.Token) error { tokSetFailCount(t, t.FailCount+d, now); return nil }, r.InTx(ctx))
		return err
	case tokActSetRandomPIN:
		return m.randomPIN(ctx, r, serial)
	case tokActAttachApp:
		opts := map[string]string{}
		for _, k := range []string{"service_id", "user", "count", "rounds", "slot", "partition"} {
			if v := strings.TrimSpace(o[k]); v != "" {
				opts[k] = v
			}
		}
		if m.s.cfg.Host == nil {
			return paramErr("Attaching a token to an application is not available here.")
		}
		return m.s.cfg.Host.AttachToken(ctx, serial, strings.TrimSpace(o["application"]), strings.TrimSpace(o["machine ID"]), opts)
	}
	return nil
}

// increaseInfo adds the increment to the integer tokeninfo value of the
// option key, in one transaction (concurrent events count correctly).
func (m *tokenModule) increaseInfo(ctx context.Context, r *Run, serial string, o map[string]string) error {
	key := strings.TrimSpace(o["key"])
	if key == "" {
		return apierr.MissingParameter("key")
	}
	if err := tokCheckInfoKey(key); err != nil {
		return err
	}
	inc, err := tokIncrement(o["increment"])
	if err != nil {
		return err
	}
	_, err = m.s.cfg.Tokens.Update(ctx, serial, false, func(t *token.Token) error {
		n := 0
		if cur := strings.TrimSpace(t.Info[key]); cur != "" {
			v, err := strconv.Atoi(cur)
			if err != nil {
				return paramErr(fmt.Sprintf("The tokeninfo %s is not an integer and cannot be increased.", key))
			}
			n = v
		}
		t.SetInfo(key, strconv.Itoa(n+inc))
		return nil
	}, r.InTx(ctx))
	return err
}

// randomPIN sets a random PIN on the token. The PIN goes into the
// response detail (post handlers) so that a later notification can send
// it; it is never logged.
func (m *tokenModule) randomPIN(ctx context.Context, r *Run, serial string) error {
	n, err := tokPINLength(r.Def.Options["length"])
	if err != nil {
		return err
	}
	pin, err := m.s.cfg.Tokens.RandomString(n, "cn")
	if err != nil {
		return err
	}
	if err := m.s.cfg.Tokens.SetPIN(ctx, serial, pin, false, r.InTx(ctx)); err != nil {
		return err
	}
	// The later handlers of the call (a UserNotification's {pin}) read
	// it; it is never part of the answer.
	r.Call.PIN = pin
	return nil
}

// enroll enrolls a new token through the Host, as the local
// administrator.
func (m *tokenModule) enroll(ctx context.Context, r *Run) error {
	if m.s.cfg.Host == nil {
		return fmt.Errorf("eventing: the Token handler cannot enroll: no host is configured")
	}
	o := r.Def.Options
	typ := strings.ToLower(strings.TrimSpace(o["tokentype"]))
	if typ == "" {
		return apierr.MissingParameter("tokentype")
	}
	params, err := tokAdditionalParams(o["additional_params"])
	if err != nil {
		return err
	}
	delete(params, "type")
	params["genkey"] = "1"
	if rl := strings.TrimSpace(o["realm"]); rl != "" {
		params["realm"] = rl
	}
	var owner *user.User
	if IsTrue(o["user"]) {
		if u := r.User(ctx); u.Login != "" {
			owner = &u
		}
	}
	info := func(key string) string {
		if owner == nil {
			return ""
		}
		return r.UserInfo(ctx)[key]
	}
	switch typ {
	case "sms":
		if IsTrue(o["dynamic_phone"]) {
			params["dynamic_phone"] = "1"
		} else if owner != nil {
			params["phone"] = info("mobile")
		}
		if id := strings.TrimSpace(o["sms_identifier"]); id != "" {
			params["sms.identifier"] = id
		}
	case "email":
		if IsTrue(o["dynamic_email"]) {
			params["dynamic_email"] = "1"
		} else if owner != nil {
			params["email"] = info("email")
		}
		if id := strings.TrimSpace(o["smtp_identifier"]); id != "" {
			params["email.identifier"] = id
		}
	case "motp":
		if v, ok := o["motppin"]; ok {
			params["motppin"] = v
		}
	}
	serial, err := m.s.cfg.Host.EnrollToken(ctx, typ, owner, params)
	if err != nil {
		return err
	}
	ev := m.s.cfg.Log.Info().Str("component", "eventing").Str("handler", r.Def.Name).Str("action", tokActEnroll).
		Str("serial", serial).Str("token_type", typ).Str("request_id", r.Call.Caller.RequestID)
	if owner != nil {
		ev = ev.Str("user", owner.Login).Str("realm", owner.Realm)
	}
	ev.Msg("token handler enrolled a token")
	return nil
}

// tokNowOffset finds the last {now} or {current_time} tag followed by an
// offset ("{now}+5d"): the offset shifts the time the tags stand for and
// is removed from the text.
var tokNowOffset = regexp.MustCompile(`(?s)^(.*\{(?:now|current_time)\})([+-]\d+[smhd])(.*)$`)

// expand substitutes the tags of a tokeninfo value or description.
func (m *tokenModule) expand(ctx context.Context, r *Run, text string) string {
	if !strings.Contains(text, "{") {
		return text
	}
	now := m.s.now()
	if g := tokNowOffset.FindStringSubmatch(text); g != nil {
		if d, err := tokParseOffset(g[2]); err == nil {
			now = now.Add(d)
			text = g[1] + g[3]
		}
	}
	stamp := now.Format(tokTimeLayout)
	c := r.Call
	client := ""
	if c.Caller.Client.IsValid() {
		client = c.Caller.Client.String()
	}
	username, realmName := "N/A", "N/A"
	if u := r.User(ctx); u.Login != "" {
		username, realmName = u.Login, u.Realm
	}
	browser, _ := audit.SplitAgent(c.Caller.UserAgent)
	return strings.NewReplacer(
		"{now}", stamp, "{current_time}", stamp, "{client_ip}", client,
		"{username}", username, "{realm}", realmName,
		"{ua_browser}", browser, "{ua_string}", c.Caller.UserAgent,
	).Replace(text)
}

// tokAction is the action name as the module compares it.
func tokAction(a string) string { return strings.ToLower(strings.TrimSpace(a)) }

func tokKnown(act string) bool {
	switch act {
	case tokActSetRealm, tokActDelete, tokActUnassign, tokActDisable, tokActEnable, tokActEnroll,
		tokActSetDescription, tokActSetValidity, tokActSetCountWindow, tokActSetInfo, tokActIncreaseInfo,
		tokActDeleteInfo, tokActSetFailCounter, tokActChangeFailCount, tokActSetMaxFail, tokActSetRandomPIN,
		tokActAttachApp:
		return true
	}
	return false
}

// tokRequire refuses a definition whose required option key is empty.
func tokRequire(o map[string]string, act, key string) error {
	if strings.TrimSpace(o[key]) == "" {
		return paramErr(fmt.Sprintf("The action %q needs the option %q.", act, key))
	}
	return nil
}

// tokCheckInfoKey refuses the tokeninfo keys the token package keeps
// itself, and malformed keys.
func tokCheckInfoKey(key string) error {
	key = strings.TrimSpace(key)
	switch {
	case key == "" || len(key) > 255 || strings.ContainsAny(key, "\x00\r\n"):
		return paramErr("invalid tokeninfo key")
	case key == token.InfoCountAuth || key == token.InfoCountAuthSuccess || strings.HasPrefix(key, "tan.tan"):
		return paramErr(fmt.Sprintf("the tokeninfo key %s cannot be changed", key))
	}
	return nil
}

// tokIncrement reads the increment option (default 1).
func tokIncrement(v string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n > 1<<30 || n < -(1<<30) {
		return 0, paramErr("The option increment must be an integer.")
	}
	return n, nil
}

// tokFailCount reads an absolute fail counter.
func tokFailCount(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > 1000000 {
		return 0, paramErr("The option fail counter must be a number from 0 to 1000000.")
	}
	return n, nil
}

// tokFailDelta reads a fail counter change: +n, -n or n.
func tokFailDelta(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n > 1000000 || n < -1000000 {
		return 0, paramErr("The option change fail counter must be an integer like +1 or -2.")
	}
	return n, nil
}

// tokSetFailCount sets the fail counter (at least 0) and keeps the time
// the maximum was reached, which the failcounter clear timeout reads.
func tokSetFailCount(t *token.Token, n int, now time.Time) {
	t.FailCount = max(0, n)
	if t.MaxFail > 0 && t.FailCount >= t.MaxFail {
		if _, ok := t.Info[token.InfoFailcounterExceed]; !ok {
			t.SetInfo(token.InfoFailcounterExceed, token.FormatValidity(now))
		}
		return
	}
	delete(t.Info, token.InfoFailcounterExceed)
}

// tokPINLength reads the length of a random PIN (default 12).
func tokPINLength(v string) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return tokDefaultPINLength, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > tokMaxPINLength {
		return 0, paramErr(fmt.Sprintf("The option length must be a number from 1 to %d.", tokMaxPINLength))
	}
	return n, nil
}

var tokOffsetRe = regexp.MustCompile(`^([+-])\s*(\d{1,9})\s*([smhdy])$`)

// tokParseOffset reads a time offset like +10m, -2h, +7d (s, m, h, d, y).
func tokParseOffset(v string) (time.Duration, error) {
	g := tokOffsetRe.FindStringSubmatch(strings.TrimSpace(v))
	if g == nil {
		return 0, paramErr("Could not parse the time offset " + strconv.Quote(v))
	}
	n, _ := strconv.ParseInt(g[2], 10, 64)
	unit := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "y": 365 * 24 * time.Hour}[g[3]]
	d := time.Duration(n) * unit
	if g[1] == "-" {
		d = -d
	}
	return d, nil
}

// tokParseDate reads a validity bound: an offset from now (+10m, +24h,
// +7d) or a date in one of the formats /token/set accepts.
func tokParseDate(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "+") || strings.HasPrefix(v, "-") {
		d, err := tokParseOffset(v)
		if err != nil {
			return time.Time{}, err
		}
		return now.Add(d), nil
	}
	return token.ParseValidity(v)
}

// tokAdditionalParams reads the enroll option additional_params: a JSON
// object (privacyIDEA reads it as YAML, so a Python-style dict with single
// quotes is accepted too). Values become strings.
func tokAdditionalParams(v string) (map[string]string, error) {
	out := map[string]string{}
	v = strings.TrimSpace(v)
	if v == "" {
		return out, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		if err2 := json.Unmarshal([]byte(strings.ReplaceAll(v, "'", `"`)), &m); err2 != nil || m == nil {
			return nil, paramErr("The option additional_params must be a JSON object.")
		}
	}
	if m == nil {
		return nil, paramErr("The option additional_params must be a JSON object.")
	}
	for k, x := range m {
		switch x.(type) {
		case map[string]any, []any:
			b, _ := json.Marshal(x)
			out[k] = string(b)
		default:
			out[k] = toString(x)
		}
	}
	return out, nil
}
