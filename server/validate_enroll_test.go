package server_test

import (
	"context"
	"encoding/base32"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/token"
)

// pollType is a test token type whose challenges have client mode poll
// (as push tokens do); it is HOTP otherwise.
type pollType struct{ token.HOTP }

func (pollType) Name() string   { return "tpoll" }
func (pollType) Prefix() string { return "TPOL" }
func (pollType) Challenge(_ context.Context, _ *token.ChallengeRequest) (*token.ChallengeResult, error) {
	return &token.ChallengeResult{Message: "confirm on your phone", ClientMode: "poll"}, nil
}

// enrollEnv is tokenEnv with passthru to the user store and
// enroll_via_multichallenge=typ.
func enrollEnv(t *testing.T, typ string, opts ...authsrv.Option) (*env, string) {
	t.Helper()
	e := newEnvWith(t, append([]authsrv.Option{authsrv.WithResolverTypes(memTypes())}, opts...))
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	setPolicy(t, e, tok, "pt", "authentication", "passthru=userstore")
	setPolicy(t, e, tok, "evm", "authentication", "enroll_via_multichallenge="+typ)
	return e, tok
}

// enrollReply checks the enrollment challenge of a reply and returns the
// transaction id, the serial and the key of its otpauth link.
func enrollReply(t *testing.T, r reply, typ string, optional bool) (txid, serial string, key []byte) {
	t.Helper()
	wantAuth(t, r, false, "")
	if at(r.json, "result.authentication") != "CHALLENGE" || at(r.json, "detail.enroll_via_multichallenge") != true ||
		at(r.json, "detail.enroll_via_multichallenge_optional") != optional || at(r.json, "detail.type") != typ ||
		at(r.json, "detail.client_mode") != "interactive" || at(r.json, "detail.preferred_client_mode") != "interactive" {
		t.Fatalf("enrollment challenge %s", r.body)
	}
	txid, _ = at(r.json, "detail.transaction_id").(string)
	serial, _ = at(r.json, "detail.serial").(string)
	img, _ := at(r.json, "detail.image").(string)
	link, _ := at(r.json, "detail.link").(string)
	if len(txid) != 20 || serial == "" || !strings.HasPrefix(img, "data:image/png;base64,") || !strings.HasPrefix(link, "otpauth://"+typ+"/"+serial+"?") {
		t.Fatalf("enrollment challenge %s", r.body)
	}
	mc, _ := at(r.json, "detail.multi_challenge").([]any)
	if len(mc) != 1 || at(mc[0], "image") != img || at(mc[0], "link") != link || at(mc[0], "transaction_id") != txid {
		t.Fatalf("multi_challenge %v", at(r.json, "detail.multi_challenge"))
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	key, err = base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(u.Query().Get("secret"))
	if err != nil || len(key) < 20 {
		t.Fatalf("secret of %s: %v", link, err)
	}
	return txid, serial, key
}

func rolloutState(t *testing.T, e *env, tok, serial string) any {
	t.Helper()
	return listOne(t, e, tok, serial)["rollout_state"]
}

func TestValidateEnrollHOTP(t *testing.T) {
	e, tok := enrollEnv(t, "hotp")
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "alice-Pw1")
	txid, serial, key := enrollReply(t, r, "hotp", false)
	if rolloutState(t, e, tok, serial) != "clientwait" {
		t.Fatalf("rollout_state %v", rolloutState(t, e, tok, serial))
	}
	code := func(c uint64) string { return otp.HOTP(key, c, 6, otp.SHA1) }

	// not usable before its first OTP: neither as a login nor by serial
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", code(0)), false, "Token is not yet enrolled")
	wantAuth(t, check(t, e, "serial", serial, "pass", code(0)), false, "Token is not yet enrolled")
	// a wrong answer fails and leaves it unverified
	wrong := "000000"
	if wrong == code(0) {
		wrong = "111111"
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", wrong), false, "Response did not match the challenge.")
	if rolloutState(t, e, tok, serial) != "clientwait" {
		t.Fatal("a wrong answer enrolled the token")
	}
	// the right one enrolls it and authenticates
	r = check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", code(0))
	wantAuth(t, r, true, "Found matching challenge")
	if at(r.json, "result.authentication") != "ACCEPT" || at(r.json, "detail.serial") != serial {
		t.Fatalf("answer %s", r.body)
	}
	if rolloutState(t, e, tok, serial) != "enrolled" {
		t.Fatal("not enrolled after the answer")
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", code(1)), true, "matching 1 tokens")

	t.Run("no secret in audit or log", func(t *testing.T) {
		secrets := []string{hex.EncodeToString(key), otp.FormatBase32(key), "data:image/png", "otpauth://"}
		audit := string(e.admin(t, tok, "GET", "/audit/?page_size=100", "").body)
		if !strings.Contains(audit, serial) || !strings.Contains(audit, "CHALLENGE") {
			t.Fatalf("the enrollment is not in the audit: %s", audit)
		}
		logs := e.log.String()
		if !strings.Contains(logs, serial) {
			t.Fatalf("the enrollment is not logged")
		}
		for i, s := range secrets {
			if strings.Contains(strings.ToLower(audit), strings.ToLower(s)) {
				t.Errorf("the audit contains secret form %d", i)
			}
			if strings.Contains(strings.ToLower(logs), strings.ToLower(s)) {
				t.Errorf("the log contains secret form %d", i)
			}
		}
	})
}

func TestValidateEnrollTOTP(t *testing.T) {
	e, tok := enrollEnv(t, "totp")
	setPolicy(t, e, tok, "evm-text", "authentication", "enroll_via_multichallenge_text=Scan the code")
	r := check(t, e, "user", "bob", "realm", "realm1", "pass", "b0b p w%+&=ä")
	txid, serial, key := enrollReply(t, r, "totp", false)
	if at(r.json, "detail.message") != "Scan the code" {
		t.Fatalf("message %v", at(r.json, "detail.message"))
	}
	code := otp.HOTP(key, uint64(e.clk.now().Unix()/30), 6, otp.SHA1)
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", code), false, "Token is not yet enrolled")
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "transaction_id", txid, "pass", code), true, "Found matching challenge")
	if rolloutState(t, e, tok, serial) != "enrolled" {
		t.Fatal("not enrolled after the answer")
	}
	e.clk.add(30e9)
	next := otp.HOTP(key, uint64(e.clk.now().Unix()/30), 6, otp.SHA1)
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", next), true, "matching 1 tokens")
}

func TestValidateEnrollCancel(t *testing.T) {
	e, tok := enrollEnv(t, "hotp")
	cancel := func(kv ...string) reply {
		return check(t, e, append([]string{"cancel_enrollment", "1"}, kv...)...)
	}

	// not optional: no cancel
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "alice-Pw1")
	txid, serial, _ := enrollReply(t, r, "hotp", false)
	r = cancel("user", "alice", "realm", "realm1", "transaction_id", txid)
	wantAuth(t, r, false, "Failed to cancel enrollment via multichallenge")
	if at(r.json, "result.authentication") != "REJECT" || rolloutState(t, e, tok, serial) != "clientwait" {
		t.Fatalf("cancel of a mandatory enrollment: %s", r.body)
	}

	// optional: the token goes and the authentication succeeds
	setPolicy(t, e, tok, "evm-opt", "authentication", "enroll_via_multichallenge_optional=true")
	r = check(t, e, "user", "bob", "realm", "realm1", "pass", "b0b p w%+&=ä")
	txid, serial, _ = enrollReply(t, r, "hotp", true)
	// another user's cancel is refused
	wantAuth(t, cancel("user", "alice", "realm", "realm1", "transaction_id", txid), false, "Failed to cancel enrollment via multichallenge")
	r = cancel("user", "bob", "realm", "realm1", "transaction_id", txid)
	wantAuth(t, r, true, "Cancelled enrollment via multichallenge")
	if at(r.json, "result.authentication") != "ACCEPT" {
		t.Fatalf("cancel %s", r.body)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/token/?serial="+serial, "")).(map[string]any); len(v["tokens"].([]any)) != 0 {
		t.Fatalf("the token is still there: %v", v)
	}
	wantAuth(t, cancel("user", "bob", "realm", "realm1", "transaction_id", txid), false, "Failed to cancel enrollment via multichallenge")

	// neither user nor serial nor pass is needed with cancel_enrollment
	r = check(t, e, "user", "bob", "realm", "realm1", "pass", "b0b p w%+&=ä")
	txid, _, _ = enrollReply(t, r, "hotp", true)
	wantAuth(t, cancel("transaction_id", txid), true, "Cancelled enrollment via multichallenge")

	// unknown transaction
	wantAuth(t, cancel("user", "bob", "realm", "realm1", "transaction_id", "12345678901234567890"), false, "Failed to cancel enrollment via multichallenge")
	// without a transaction
	wantError(t, cancel("user", "bob", "realm", "realm1"), 400, 905, "ERR905: Missing parameter: transaction_id")
	// and without cancel_enrollment the target is still required
	wantError(t, check(t, e, "transaction_id", txid, "pass", "x"), 400, 905, "ERR905: You need to specify a serial, user or credential_id.")
}

func TestValidateClientModePerUser(t *testing.T) {
	e, tok := enrollEnv(t, "hotp", authsrv.WithTokenTypes(pollType{}))
	delPolicy(t, e, tok, "evm")
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "H1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	pollHex := "4142434445464748494a4b4c4d4e4f5051525354"
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "tpoll", "serial", "P1", "otpkey", pollHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	setPolicy(t, e, tok, "cr", "authentication", "challenge_response=hotp tpoll")
	setPolicy(t, e, tok, "cmpu", "authentication", "client_mode_per_user=true")
	pollKey, _ := hex.DecodeString(pollHex)
	rfcKey, _ := hex.DecodeString(rfcKeyHex)
	var hotpC, pollC uint64
	post := func(ua string, kv ...string) reply {
		r := e.do(t, "POST", "/validate/check", formType, form(kv...), map[string]string{"User-Agent": ua})
		noNulls(t, r.json, "$")
		return r
	}
	// login triggers the challenges from ua, answers with typ's token
	// (none for ""), and returns the challenge's preferred_client_mode.
	login := func(ua, typ string) any {
		t.Helper()
		r := post(ua, "user", "alice", "realm", "realm1", "pass", "pin")
		mc, _ := at(r.json, "detail.multi_challenge").([]any)
		if len(mc) != 2 {
			t.Fatalf("challenges %s", r.body)
		}
		mode := at(r.json, "detail.preferred_client_mode")
		txid, _ := at(r.json, "detail.transaction_id").(string)
		var pass string
		switch typ {
		case "":
			return mode
		case "hotp":
			pass, hotpC = otp.HOTP(rfcKey, hotpC, 6, otp.SHA1), hotpC+1
		case "tpoll":
			pass, pollC = otp.HOTP(pollKey, pollC, 6, otp.SHA1), pollC+1
		}
		r = post(ua, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", pass)
		wantAuth(t, r, true, "Found matching challenge")
		if at(r.json, "detail.type") != typ {
			t.Fatalf("answered by %v", at(r.json, "detail.type"))
		}
		return mode
	}
	const cp, saml = "privacyidea-cp/2.0 Windows", "simpleSAMLphp/1.19"
	if m := login(cp, "tpoll"); m != "interactive" {
		t.Fatalf("first login: %v", m)
	}
	if m := login(saml, "hotp"); m != "interactive" {
		t.Fatalf("first login of the second agent: %v", m)
	}
	if m := login("privacyidea-cp/2.1", ""); m != "poll" {
		t.Fatalf("credential provider after tpoll: %v", m)
	}
	if m := login(saml, ""); m != "interactive" {
		t.Fatalf("simpleSAMLphp after hotp: %v", m)
	}
	login(saml, "tpoll")
	login(cp, "hotp")
	if m := login(saml, ""); m != "poll" {
		t.Fatalf("simpleSAMLphp after tpoll: %v", m)
	}
	if m := login(cp, ""); m != "interactive" {
		t.Fatalf("credential provider after hotp: %v", m)
	}
	// without the policy the default order applies again
	delPolicy(t, e, tok, "cmpu")
	if m := login(saml, ""); m != "interactive" {
		t.Fatalf("without client_mode_per_user: %v", m)
	}
}

// TestValidateEnrollEmail: an e-mail token is enrolled to the user store's
// address, its first OTP arrives at the local SMTP sink, and that OTP
// enrolls the token and authenticates; the next login challenges it.
func TestValidateEnrollEmail(t *testing.T) {
	e, tok := enrollEnv(t, "email")
	sink := testsvc.NewSMTPSink(t)
	if err := e.s.Notify().SetSMTP(t.Context(), notify.SMTPServer{Identifier: "mail", Server: "127.0.0.1", Port: sink.Port, Sender: "authsrv@example.org", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	mail := func(before int) string {
		t.Helper()
		msgs := sink.Messages()
		if len(msgs) != before+1 || len(msgs[before].To) != 1 || msgs[before].To[0] != "alice@example.org" {
			t.Fatalf("mails %d -> %d (%v)", before, len(msgs), msgs)
		}
		code := sixDigits.FindString(msgs[before].Data)
		if code == "" {
			t.Fatal("no OTP in the mail")
		}
		return code
	}

	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "alice-Pw1")
	if at(r.json, "result.authentication") != "CHALLENGE" || at(r.json, "detail.enroll_via_multichallenge") != true ||
		at(r.json, "detail.type") != "email" || at(r.json, "detail.message") != "Enter the OTP from the Email" ||
		at(r.json, "detail.image") != nil || at(r.json, "detail.link") != nil {
		t.Fatalf("enrollment challenge %s", r.body)
	}
	txid, _ := at(r.json, "detail.transaction_id").(string)
	serial, _ := at(r.json, "detail.serial").(string)
	code := mail(0)
	if rolloutState(t, e, tok, serial) != "clientwait" {
		t.Fatalf("rollout_state %v", rolloutState(t, e, tok, serial))
	}
	// a wrong answer leaves it waiting; the mailed OTP enrolls it once
	wrong := "000000"
	if wrong == code {
		wrong = "111111"
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", wrong), false, "Response did not match the challenge.")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", code), true, "Found matching challenge")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", code), false, "")
	if rolloutState(t, e, tok, serial) != "enrolled" {
		t.Fatal("not enrolled after the answer")
	}
	// the user now has an e-mail token (no PIN): an empty PIN challenges
	// it, and no second token is enrolled
	r = check(t, e, "user", "alice", "realm", "realm1", "pass", "")
	if at(r.json, "result.authentication") != "CHALLENGE" || at(r.json, "detail.serial") != serial || at(r.json, "detail.enroll_via_multichallenge") != nil {
		t.Fatalf("login with the enrolled token %s", r.body)
	}
	txid, _ = at(r.json, "detail.transaction_id").(string)
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", mail(1)), true, "Found matching challenge")
}
