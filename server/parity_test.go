package server_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/validate"
)

// parityStep is one request of a parity case: a check (or a
// triggerchallenge), optionally after the clock moved on.
type parityStep struct {
	user, realm, serial, pass, typ string
	// answer sends the transaction id of the previous challenge.
	answer  bool
	trigger bool
	// poll asks /validate/polltransaction for the previous transaction.
	poll    bool
	advance time.Duration
}

// parityOutcome is a decision as both ways see it.
type parityOutcome struct {
	value   any
	message string
	errCode int
	errMsg  string
	txid    string
}

func (o parityOutcome) String() string {
	return fmt.Sprintf("value=%v message=%q error=%d %q", o.value, o.message, o.errCode, o.errMsg)
}

// parityUA and parityClient are the user agent and client of both ways.
const parityUA = "parity-client/1.0"

var parityClient = netip.MustParseAddr("127.0.0.1")

// parityEnv is a fresh server with passwd users alice (HOTP token P1,
// PIN "pin") and bob (no token) in realm1, and the case's policies.
func parityEnv(t *testing.T, policies [][]string) (*env, string) {
	t.Helper()
	e := newEnv(t)
	tok := e.login(t)
	path := filepath.Join(t.TempDir(), "passwd")
	var b strings.Builder
	for i, u := range [][2]string{{"alice", "alice-pw"}, {"bob", "bob-pw"}} {
		h, err := bcrypt.GenerateFromPassword([]byte(u[1]), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%s:%d:%d:%s Test,,,,%s@example.org:/home/%s:/bin/sh\n", u[0], h, 1001+i, 1001+i, u[0], u[0], u[0])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	wantOK(t, e.admin(t, tok, "POST", "/resolver/pw1", form("type", "passwdresolver", "fileName", path)))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "pw1")))
	hotp(t, e, tok, "P1", "alice", "pin")
	for _, p := range policies {
		setPolicy(t, e, tok, p[0], p[1], p[2], p[3:]...)
	}
	return e, tok
}

// auditRows returns the audit rows numbered above after, oldest first.
func auditRows(t *testing.T, e *env, after int) []audit.Row {
	t.Helper()
	var rows []audit.Row
	if err := e.s.Audit().Each(t.Context(), audit.Query{Ascending: true}, func(r audit.Row) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rows[min(after, len(rows)):]
}

// parityLib runs a step through the library.
func parityLib(t *testing.T, e *env, st parityStep, txid string) parityOutcome {
	t.Helper()
	r := validate.Request{User: st.user, Realm: st.realm, Serial: st.serial, Pass: st.pass, Type: st.typ,
		Caller: caller.Caller{Client: parityClient, UserAgent: parityUA, Action: "POST /validate/check"}}
	if st.answer {
		r.TransactionID = txid
	}
	var res validate.Response
	var err error
	if st.poll {
		res, err = e.s.Validator().Poll(t.Context(), validate.Request{TransactionID: txid,
			Caller: caller.Caller{Client: parityClient, UserAgent: parityUA, Action: "GET /validate/polltransaction"}})
		if err != nil {
			n, _, msg, _, _ := apierr.Wire(err)
			return parityOutcome{errCode: n, errMsg: msg}
		}
		return parityOutcome{value: res.Value, txid: txid}
	}
	if st.trigger {
		r.Caller.Role, r.Caller.Name, r.Caller.Action = caller.Admin, "admin", "POST /validate/triggerchallenge"
		res, err = e.s.Validator().Trigger(t.Context(), r)
	} else {
		res, err = e.s.Validator().Check(t.Context(), r)
	}
	if err != nil {
		n, _, msg, _, _ := apierr.Wire(err)
		return parityOutcome{errCode: n, errMsg: msg}
	}
	o := parityOutcome{value: res.Value, txid: res.TransactionID}
	if st.trigger {
		o.value = len(res.Challenges)
	}
	if !res.NoDetail {
		o.message = res.Message
	}
	return o
}

// parityHTTP runs a step through the HTTP API.
func parityHTTP(t *testing.T, e *env, tok string, st parityStep, txid string) parityOutcome {
	t.Helper()
	kv := []string{}
	for _, p := range [][2]string{{"user", st.user}, {"realm", st.realm}, {"serial", st.serial}, {"type", st.typ}} {
		if p[1] != "" {
			kv = append(kv, p[0], p[1])
		}
	}
	path := "/validate/check"
	if st.trigger {
		path = "/validate/triggerchallenge"
	} else {
		kv = append(kv, "pass", st.pass)
	}
	if st.answer {
		kv = append(kv, "transaction_id", txid)
	}
	method := "POST"
	if st.poll {
		method, path, kv = "GET", "/validate/polltransaction?"+form("transaction_id", txid), nil
	}
	req := httptest.NewRequest(method, path, strings.NewReader(form(kv...)))
	req.RemoteAddr = "127.0.0.1:40000"
	req.Header.Set("Content-Type", formType)
	req.Header.Set("User-Agent", parityUA)
	if st.trigger {
		req.Header.Set("Authorization", tok)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	r := reply{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	if err := json.Unmarshal(r.body, &r.json); err != nil {
		t.Fatalf("%s: %v %s", path, err, r.body)
	}
	if at(r.json, "result.status") != true {
		code, _ := at(r.json, "result.error.code").(float64)
		msg, _ := at(r.json, "result.error.message").(string)
		return parityOutcome{errCode: int(code), errMsg: msg}
	}
	o := parityOutcome{value: at(r.json, "result.value")}
	if n, ok := o.value.(float64); ok {
		o.value = int(n)
	}
	o.message, _ = at(r.json, "detail.message").(string)
	o.txid, _ = at(r.json, "detail.transaction_id").(string)
	if st.poll {
		o.txid = txid
	}
	return o
}

// parityVolatile are the audit columns that differ between two runs.
var parityVolatile = map[string]bool{"date": true, "startdate": true, "duration": true, "thread_id": true, "number": true,
	"sig_check": true, "missing_line": true}

// TestLibraryHTTPParity: every authentication and authorization policy
// decides the same through the library (Validator().Check with a caller)
// and through HTTP, on two fresh servers with the same inputs, and writes
// the same audit rows.
func TestLibraryHTTPParity(t *testing.T) {
	ok := func(otp int) parityStep {
		return parityStep{user: "alice", realm: "realm1", pass: "pin" + rfcHOTP[otp]}
	}
	wrong := parityStep{user: "alice", realm: "realm1", pass: "pin000000"}
	for _, tc := range []struct {
		name     string
		policies [][]string
		steps    []parityStep
		// want are the decisions (value or error code) of the steps.
		want []string
	}{
		{name: "no policy", steps: []parityStep{ok(0), wrong, {user: "alice", realm: "realm1", pass: "nip" + rfcHOTP[1]}},
			want: []string{"true", "false", "false"}},
		{name: "auth_max_fail", policies: [][]string{{"maxfail", "authorization", "auth_max_fail=2/10m"}},
			steps: []parityStep{wrong, wrong, wrong, ok(0)}, want: []string{"false", "false", "false", "false"}},
		{name: "auth_max_success", policies: [][]string{{"maxsucc", "authorization", "auth_max_success=1/10m"}},
			steps: []parityStep{ok(0), ok(1), {user: "alice", realm: "realm1", pass: "pin" + rfcHOTP[2], advance: 11 * time.Minute}},
			want:  []string{"true", "false", "true"}},
		{name: "passOnNoUser", policies: [][]string{{"pnu", "authentication", "passOnNoUser"}},
			steps: []parityStep{{user: "nobody", realm: "realm1", pass: "x"}}, want: []string{"true"}},
		{name: "unknown user", steps: []parityStep{{user: "nobody", realm: "realm1", pass: "x"}}, want: []string{"904"}},
		{name: "passOnNoToken", policies: [][]string{{"pnt", "authentication", "passOnNoToken"}},
			steps: []parityStep{{user: "bob", realm: "realm1", pass: "x"}}, want: []string{"true"}},
		{name: "passthru userstore", policies: [][]string{{"pt", "authentication", "passthru=userstore"}},
			steps: []parityStep{{user: "bob", realm: "realm1", pass: "bob-pw"}, {user: "bob", realm: "realm1", pass: "nope"}},
			want:  []string{"true", "false"}},
		{name: "otppin userstore", policies: [][]string{{"op", "authentication", "otppin=userstore"}},
			steps: []parityStep{{user: "alice", realm: "realm1", pass: "alice-pw" + rfcHOTP[0]}, ok(1)}, want: []string{"true", "false"}},
		{name: "otppin none", policies: [][]string{{"op", "authentication", "otppin=none"}},
			steps: []parityStep{{user: "alice", realm: "realm1", pass: rfcHOTP[0]}, ok(1)}, want: []string{"true", "false"}},
		{name: "last_auth", policies: [][]string{{"la", "authorization", "last_auth=1h"}},
			steps: []parityStep{ok(0), {user: "alice", realm: "realm1", pass: "pin" + rfcHOTP[1], advance: 2 * time.Hour}},
			want:  []string{"true", "false"}},
		{name: "serial", policies: [][]string{{"sr", "authorization", "serial=^X"}}, steps: []parityStep{ok(0)}, want: []string{"303"}},
		{name: "tokentype", policies: [][]string{{"tt", "authorization", "tokentype=totp"}}, steps: []parityStep{ok(0)}, want: []string{"303"}},
		{name: "tokeninfo", policies: [][]string{{"ti", "authorization", "tokeninfo=foo/^bar$/"}}, steps: []parityStep{ok(0)}, want: []string{"303"}},
		{name: "authorized deny_access", policies: [][]string{{"deny", "authorization", "authorized=deny_access"}},
			steps: []parityStep{ok(0)}, want: []string{"401"}},
		{name: "no_detail_on_success", policies: [][]string{{"nd", "authorization", "no_detail_on_success"}},
			steps: []parityStep{ok(0), wrong}, want: []string{"true", "false"}},
		{name: "no_detail_on_fail", policies: [][]string{{"nd", "authorization", "no_detail_on_fail"}},
			steps: []parityStep{ok(0), wrong}, want: []string{"true", "false"}},
		{name: "hide_specific_error_message", policies: [][]string{{"hide", "authentication", "hide_specific_error_message"}},
			steps: []parityStep{wrong, {user: "nobody", realm: "realm1", pass: "x"}}, want: []string{"false", "403"}},
		{name: "add_user_in_response", policies: [][]string{{"au", "authorization", "add_user_in_response"}, {"ar", "authorization", "add_resolver_in_response"}},
			steps: []parityStep{ok(0)}, want: []string{"true"}},
		{name: "application_tokentype", policies: [][]string{{"at", "authorization", "application_tokentype"}},
			steps: []parityStep{{user: "alice", realm: "realm1", pass: "pin" + rfcHOTP[0], typ: "totp"}, {user: "alice", realm: "realm1", pass: "pin" + rfcHOTP[0], typ: "hotp"}},
			want:  []string{"false", "true"}},
		{name: "challenge_response", policies: [][]string{{"cr", "authentication", "challenge_response=hotp"}},
			steps: []parityStep{{user: "alice", realm: "realm1", pass: "pin"}, {user: "alice", realm: "realm1", pass: rfcHOTP[0], answer: true}},
			want:  []string{"false", "true"}},
		{name: "triggerchallenge", policies: [][]string{{"cr", "authentication", "challenge_response=hotp"}},
			steps: []parityStep{{user: "alice", realm: "realm1", trigger: true}, {user: "alice", realm: "realm1", pass: rfcHOTP[0], answer: true},
				{user: "nobody", realm: "realm1", trigger: true}},
			want: []string{"1", "true", "905"}},
		{name: "polltransaction", policies: [][]string{{"cr", "authentication", "challenge_response=hotp"}},
			steps: []parityStep{{user: "alice", realm: "realm1", pass: "pin"}, {poll: true}, {user: "alice", realm: "realm1", pass: rfcHOTP[0], answer: true}, {poll: true}},
			want:  []string{"false", "false", "true", "false"}},
		{name: "serial path", steps: []parityStep{{serial: "P1", pass: "pin" + rfcHOTP[0]}, {serial: "P1", pass: "pin000000"}},
			want: []string{"true", "false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib, _ := parityEnv(t, tc.policies)
			web, tok := parityEnv(t, tc.policies)
			libStart, webStart := len(auditRows(t, lib, 0)), len(auditRows(t, web, 0))
			var libTx, webTx string
			for i, st := range tc.steps {
				lib.clk.add(st.advance)
				web.clk.add(st.advance)
				lo := parityLib(t, lib, st, libTx)
				wo := parityHTTP(t, web, tok, st, webTx)
				if lo.txid != "" || wo.txid != "" {
					libTx, webTx = lo.txid, wo.txid
				}
				if lo.String() != wo.String() {
					t.Errorf("step %d: library %s, HTTP %s", i, lo, wo)
				}
				got := fmt.Sprint(lo.value)
				if lo.errCode != 0 {
					got = fmt.Sprint(lo.errCode)
				}
				if got != tc.want[i] {
					t.Errorf("step %d: decision %s (%s), want %s", i, got, lo, tc.want[i])
				}
			}
			lr, wr := auditRows(t, lib, libStart), auditRows(t, web, webStart)
			if len(lr) != len(tc.steps) || len(wr) != len(tc.steps) {
				t.Fatalf("audit rows: library %d, HTTP %d, want %d", len(lr), len(wr), len(tc.steps))
			}
			for i := range lr {
				for col, lv := range lr[i] {
					if parityVolatile[col] {
						continue
					}
					if wv := wr[i][col]; fmt.Sprint(lv) != fmt.Sprint(wv) {
						t.Errorf("row %d column %s: library %v, HTTP %v", i, col, lv, wv)
					}
				}
				if lr[i]["sig_check"] != "OK" || wr[i]["sig_check"] != "OK" {
					t.Errorf("row %d signature: library %v, HTTP %v", i, lr[i]["sig_check"], wr[i]["sig_check"])
				}
			}
			if tc.name == "auth_max_fail" {
				if got := lr[3]["info"]; got != "Only 2 failed authentications per 0:10:00 allowed." {
					t.Errorf("last row info %v", got)
				}
			}
		})
	}
}
