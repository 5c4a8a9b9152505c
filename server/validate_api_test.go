package server_test

import (
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
)

func check(t *testing.T, e *env, kv ...string) reply {
	t.Helper()
	r := e.do(t, "POST", "/validate/check", formType, form(kv...), nil)
	noNulls(t, r.json, "$")
	return r
}

func wantAuth(t *testing.T, r reply, value bool, message string) {
	t.Helper()
	if r.status != 200 || at(r.json, "result.status") != true || at(r.json, "result.value") != value || r.json["id"] != float64(2) {
		t.Fatalf("want value %v: %d %s", value, r.status, r.body)
	}
	if message != "" && at(r.json, "detail.message") != message {
		t.Fatalf("message %v, want %q", at(r.json, "detail.message"), message)
	}
}

func TestValidateCheckHOTP(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "V1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin755224"), true, "matching 1 tokens")
	r := check(t, e, "user", "alice@realm1", "pass", "pin287082")
	wantAuth(t, r, true, "matching 1 tokens")
	if at(r.json, "result.authentication") != "ACCEPT" || at(r.json, "detail.serial") != "V1" || at(r.json, "detail.otplen") != float64(6) {
		t.Errorf("success detail %s", r.body)
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin287082"), false, "wrong otp value. previous otp used again")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), false, "wrong otp value")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "nip359152"), false, "wrong otp pin")
	if fc := listOne(t, e, tok, "V1")["failcount"]; fc != float64(3) {
		t.Errorf("failcount %v", fc)
	}
	wantAuth(t, check(t, e, "serial", "V1", "pass", "pin359152"), true, "matching 1 tokens")
	wantError(t, check(t, e, "user", "eve", "realm", "realm1", "pass", "x"), 400, 904, "ERR904: User <eve@realm1> does not exist.")
	wantError(t, check(t, e, "pass", "x"), 400, 905, "ERR905: You need to specify a serial, user or credential_id.")
	wantError(t, check(t, e, "user", "alice", "realm", "realm1"), 400, 905, "ERR905: Missing parameter: pass")
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "x"), false, "The user has no tokens assigned")
	// radiuscheck: 204 / 400 with empty bodies.
	r = e.do(t, "POST", "/validate/radiuscheck", formType, form("user", "alice", "realm", "realm1", "pass", "pin969429"), nil)
	if r.status != 204 || len(r.body) != 0 {
		t.Errorf("radiuscheck success %d %q", r.status, r.body)
	}
	r = e.do(t, "POST", "/validate/radiuscheck", formType, form("user", "alice", "realm", "realm1", "pass", "pin969429"), nil)
	if r.status != 400 || len(r.body) != 0 {
		t.Errorf("radiuscheck replay %d %q", r.status, r.body)
	}
	// samlcheck: {auth, attributes}.
	r = e.do(t, "POST", "/validate/samlcheck", formType, form("user", "alice", "realm", "realm1", "pass", "pin338314"), nil)
	if at(r.json, "result.value.auth") != true || at(r.json, "result.value.attributes.username") != "alice" || at(r.json, "result.value.attributes.email") != "alice@example.org" {
		t.Errorf("samlcheck %s", r.body)
	}
}

// TestSAMLCheckMissingAttributesNull: the SAML attributes a user store
// does not have are null, as privacyIDEA sends them.
func TestSAMLCheckMissingAttributesNull(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver", "Editable", "True")))
	wantOK(t, e.admin(t, tok, "POST", "/user/", form("user", "dora", "resolver", "mem1", "password", "d0ra", "givenname", "Dora")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "S1", "otpkey", rfcKeyHex, "user", "dora", "realm", "realm1", "pin", "pin")))
	r := e.do(t, "POST", "/validate/samlcheck", formType, form("user", "dora", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), nil)
	attrs, _ := at(r.json, "result.value.attributes").(map[string]any)
	if at(r.json, "result.value.auth") != true || attrs["username"] != "dora" || attrs["givenname"] != "Dora" {
		t.Fatalf("samlcheck %s", r.body)
	}
	for _, k := range []string{"email", "surname", "mobile", "phone"} {
		if v, ok := attrs[k]; !ok || v != nil {
			t.Errorf("attribute %s = %#v (present %v), want null", k, v, ok)
		}
	}
}

func TestValidateParallelSameOTP(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "P64", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1")))
	var ok atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := e.do(t, "POST", "/validate/check", formType, form("user", "alice", "realm", "realm1", "pass", rfcHOTP[0]), nil)
			if at(r.json, "result.value") == true {
				ok.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	if ok.Load() != 1 {
		t.Fatalf("%d successes for one OTP", ok.Load())
	}
}

func TestValidateEmailChallenge(t *testing.T) {
	e, tok := tokenEnv(t)
	sink := testsvc.NewSMTPSink(t)
	if err := e.s.Notify().SetSMTP(t.Context(), notify.SMTPServer{Identifier: "mail", Server: "127.0.0.1", Port: sink.Port, Sender: "authsrv@example.org", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "email", "serial", "EM1", "email", "alice@example.org",
		"email.identifier", "mail", "user", "alice", "realm", "realm1", "pin", "mailpin")))
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "mailpin")
	wantAuth(t, r, false, "Enter the OTP from the Email")
	txid, _ := at(r.json, "detail.transaction_id").(string)
	if at(r.json, "result.authentication") != "CHALLENGE" || len(txid) != 20 {
		t.Fatalf("challenge %s", r.body)
	}
	msgs := sink.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d mails", len(msgs))
	}
	otpValue := regexp.MustCompile(`\b\d{6}\b`).FindString(string(msgs[0].Data))
	if otpValue == "" {
		t.Fatalf("no OTP in the mail")
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", "000000"), false, "Response did not match the challenge.")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", otpValue), true, "Found matching challenge")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "state", txid, "pass", otpValue), false, "wrong otp pin")
	// a second challenge answered with state
	r = check(t, e, "user", "alice", "realm", "realm1", "pass", "mailpin")
	txid, _ = at(r.json, "detail.transaction_id").(string)
	msgs = sink.Messages()
	otpValue = regexp.MustCompile(`\b\d{6}\b`).FindString(string(msgs[len(msgs)-1].Data))
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "state", txid, "pass", otpValue), true, "Found matching challenge")
	if strings.Contains(string(r.body), otpValue) {
		t.Error("the OTP is in the challenge response")
	}
}
