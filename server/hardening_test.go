package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
)

// wantVersion checks whether an envelope carries the version keys:
// version in both success and error bodies, versionnumber only in
// successes.
func wantVersion(t *testing.T, r reply, shown bool) {
	t.Helper()
	if r.json == nil {
		t.Fatalf("no JSON body: %d %s", r.status, r.body)
	}
	_, v := r.json["version"]
	_, vn := r.json["versionnumber"]
	success := at(r.json, "result.status") == true
	switch {
	case !shown && (v || vn):
		t.Errorf("version shown: %s", r.body)
	case shown && (r.json["version"] != authsrv.Product+" "+authsrv.Version || vn != success):
		t.Errorf("version not as without the policy: %s", r.body)
	}
	// No header reveals the version either (we set no Server header).
	for k, vals := range r.header {
		for _, val := range vals {
			if strings.EqualFold(k, "Server") || strings.Contains(val, authsrv.Version) {
				t.Errorf("header %s: %s", k, val)
			}
		}
	}
}

func TestHardeningHideVersion(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "HV1", "alice", "pin")
	anonymous := func(t *testing.T, shown bool) {
		t.Helper()
		wantVersion(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), shown)
		wantVersion(t, check(t, e, "user", "eve", "realm", "realm1", "pass", "x"), shown)
		wantVersion(t, check(t, e, "user", "alice", "realm", "realm1"), shown) // missing pass
		wantVersion(t, e.do(t, "GET", "/validate/polltransaction?transaction_id=123", "", "", nil), shown)
		wantVersion(t, e.do(t, "POST", "/auth", formType, form("username", "admin", "password", "wrong"), nil), shown)
		wantVersion(t, e.do(t, "POST", "/auth", formType, form("username", "admin", "password", adminPass), nil), shown)
		wantVersion(t, e.do(t, "GET", "/token/", "", "", nil), shown) // no token: nobody logged in
		wantVersion(t, e.do(t, "GET", "/token/", "", "", map[string]string{"Authorization": "garbage"}), shown)
		wantVersion(t, e.do(t, "GET", "/no/such/path", "", "", nil), shown)
		wantVersion(t, e.do(t, "PUT", "/validate/check", "", "", nil), shown)
	}
	t.Run("without the policy", func(t *testing.T) {
		anonymous(t, true)
		wantVersion(t, e.admin(t, tok, "GET", "/token/", ""), true)
	})
	t.Run("with the policy", func(t *testing.T) {
		setPolicy(t, e, tok, "hv", "hardening", "hide_version")
		anonymous(t, false)
		// A success keeps its value and its detail.
		r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0])
		wantAuth(t, r, true, "matching 1 tokens")
		wantVersion(t, r, false)
		// Logged-in callers still see the version, also in errors.
		wantVersion(t, e.admin(t, tok, "GET", "/token/", ""), true)
		wantVersion(t, e.admin(t, tok, "POST", "/token/init", form("type", "nosuchtype")), true)
	})
	t.Run("policy for other clients", func(t *testing.T) {
		setPolicy(t, e, tok, "hv", "hardening", "hide_version", "client", "10.0.0.0/8")
		anonymous(t, true)
		delPolicy(t, e, tok, "hv") // POST /policy keeps fields not sent
	})
	t.Run("inactive policy", func(t *testing.T) {
		setPolicy(t, e, tok, "hv", "hardening", "hide_version")
		wantOK(t, e.admin(t, tok, "POST", "/policy/disable/hv", ""))
		anonymous(t, true)
		wantOK(t, e.admin(t, tok, "POST", "/policy/enable/hv", ""))
		anonymous(t, false)
		delPolicy(t, e, tok, "hv")
		anonymous(t, true)
	})
}

func TestHardeningAuthErrorStatus(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "HA1", "alice", "pin")
	cases := []struct {
		name   string
		do     func() reply
		status int // without the policy
		code   int
		msg    string
	}{
		{"unknown user", func() reply { return check(t, e, "user", "eve", "realm", "realm1", "pass", "x") },
			400, 904, "ERR904: User <eve@realm1> does not exist."},
		{"missing pass", func() reply { return check(t, e, "user", "alice", "realm", "realm1") },
			400, 905, "ERR905: Missing parameter: pass"},
		{"no target", func() reply { return check(t, e, "pass", "x") },
			400, 905, "ERR905: You need to specify a serial, user or credential_id."},
		{"unknown serial", func() reply { return check(t, e, "serial", "NOPE", "pass", "x") },
			404, 601, ""},
		{"samlcheck", func() reply {
			return e.do(t, "GET", "/validate/samlcheck?"+form("user", "eve", "realm", "realm1", "pass", "x"), "", "", nil)
		}, 400, 904, "ERR904: User <eve@realm1> does not exist."},
		{"radiuscheck", func() reply {
			return e.do(t, "POST", "/validate/radiuscheck", formType, form("user", "eve", "realm", "realm1", "pass", "x"), nil)
		}, 400, 904, "ERR904: User <eve@realm1> does not exist."},
		{"polltransaction", func() reply { return e.do(t, "GET", "/validate/polltransaction", "", "", nil) },
			400, 905, "ERR905: Missing parameter: transaction_id"},
		{"triggerchallenge as admin", func() reply {
			return e.admin(t, tok, "POST", "/validate/triggerchallenge", form("realm", "realm1"))
		}, 400, 905, "ERR905: You need to specify a serial, user or credential_id."},
		{"auth wrong credentials", func() reply {
			return e.do(t, "POST", "/auth", formType, form("username", "admin", "password", "wrong"), nil)
		}, 401, 4031, "ERR4031: Authentication failure. Wrong credentials"},
	}
	// Endpoints outside /validate and POST /auth keep their status.
	untouched := []struct {
		name   string
		do     func() reply
		status int
	}{
		{"token init", func() reply { return e.admin(t, tok, "POST", "/token/init", form("type", "nosuchtype")) }, 400},
		{"missing token", func() reply { return e.do(t, "GET", "/token/", "", "", nil) }, 401},
		{"unknown path", func() reply { return e.do(t, "GET", "/validate/nosuchthing", "", "", nil) }, 404},
		{"policy denied", func() reply { return e.admin(t, tok, "DELETE", "/policy/nosuchpolicy", "") }, 404},
	}
	run := func(t *testing.T, on bool) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := tc.do()
				want := tc.status
				if on {
					want = 401
				}
				if r.status != want || at(r.json, "result.error.code") != float64(tc.code) {
					t.Fatalf("%d %s, want %d and code %d", r.status, r.body, want, tc.code)
				}
				if tc.msg != "" {
					// The body is the same as without the policy.
					wantError(t, r, want, tc.code, tc.msg)
				}
			})
		}
		for _, tc := range untouched {
			t.Run(tc.name, func(t *testing.T) {
				if r := tc.do(); r.status != tc.status {
					t.Errorf("%d %s, want %d", r.status, r.body, tc.status)
				}
			})
		}
	}
	t.Run("without the policy", func(t *testing.T) { run(t, false) })
	setPolicy(t, e, tok, "ha", "hardening", "hide_auth_error_status")
	t.Run("with the policy", func(t *testing.T) { run(t, true) })
	// Successes and authentication failures are untouched.
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), false, "wrong otp value")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), true, "matching 1 tokens")
	// api_key_required's 403 is a client error too.
	setPolicy(t, e, tok, "apikey", "authorization", "api_key_required")
	wantError(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "x"), 401, 303, errNoKey)
}

// normalized is a body without its volatile members (time, threadid,
// signature), as canonical JSON.
func normalized(t *testing.T, r reply) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	delete(m, "time")
	delete(m, "signature")
	if d, ok := m["detail"].(map[string]any); ok {
		delete(d, "threadid")
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// TestHardeningUniformErrors is reliability S7: with hide_auth_error_status,
// hide_specific_error_message, no_detail_on_fail and hide_version on, an
// unknown user, a wrong PIN, a locked token and a disabled token cannot be
// told apart by what the answer says. privacyIDEA keeps one difference:
// an authentication failure of a known user is HTTP 200 with value false
// (RADIUS, SAML and other clients rely on it; hide_specific_error_message
// replaces its detail after no_detail_on_fail removed it), while an
// unknown user is an error (hide_specific_error_message makes it 401 with
// code 403). So the three token cases are identical, and the unknown user
// is the generic 401.
func TestHardeningUniformErrors(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "S7A", "alice", "pin")
	hotp(t, e, tok, "S7B", "bob", "pin")
	hotp(t, e, tok, "S7C", "carol.smith", "pin")
	// bob's token is locked by two wrong PINs, carol's is disabled.
	wantOK(t, e.admin(t, tok, "POST", "/token/set", form("serial", "S7B", "max_failcount", "2")))
	for range 2 {
		wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "nip"+rfcHOTP[0]), false, "wrong otp pin")
	}
	wantOK(t, e.admin(t, tok, "POST", "/token/disable", form("serial", "S7C")))

	cases := []struct {
		name string
		kv   []string
		// without the policies: status and detail.message or error message
		status int
		msg    string
	}{
		// the right OTP with a wrong PIN
		{"wrong PIN", []string{"user", "alice", "realm", "realm1", "pass", "nip" + rfcHOTP[0]}, 200, "wrong otp pin"},
		// the right PIN and OTP on a locked token
		{"locked token", []string{"user", "bob", "realm", "realm1", "pass", "pin" + rfcHOTP[0]}, 200, "Failcounter exceeded"},
		// the right PIN and OTP on a disabled token
		{"disabled token", []string{"user", "carol.smith", "realm", "realm1", "pass", "pin" + rfcHOTP[0]}, 200, "Token is disabled"},
		{"unknown user", []string{"user", "eve", "realm", "realm1", "pass", "pin" + rfcHOTP[0]}, 400, "ERR904: User <eve@realm1> does not exist."},
	}
	// Without the policies every case says what went wrong.
	for _, tc := range cases {
		r := check(t, e, tc.kv...)
		got, _ := at(r.json, "detail.message").(string)
		if tc.status != 200 {
			got, _ = at(r.json, "result.error.message").(string)
		}
		if r.status != tc.status || got != tc.msg {
			t.Fatalf("%s without the policies: %d %s, want %d %q", tc.name, r.status, r.body, tc.status, tc.msg)
		}
	}

	setPolicy(t, e, tok, "s7-hardening", "hardening", "hide_version, hide_auth_error_status")
	setPolicy(t, e, tok, "s7-authn", "authentication", "hide_specific_error_message")
	setPolicy(t, e, tok, "s7-authz", "authorization", "no_detail_on_fail")

	const (
		rejected = `{"detail":{"message":"Authentication failed."},"id":2,"jsonrpc":"2.0","result":{"authentication":"REJECT","status":true,"value":false}}`
		unknown  = `{"detail":null,"id":1,"jsonrpc":"2.0","result":{"error":{"code":403,"message":"ERR403: Authentication failed."},"status":false}}`
	)
	got := map[string]string{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The same answer, asked twice, by POST and by GET.
			for _, r := range []reply{
				check(t, e, tc.kv...),
				e.do(t, "GET", "/validate/check?"+form(tc.kv...), "", "", nil),
			} {
				status, body := 200, rejected
				if tc.name == "unknown user" {
					status, body = 401, unknown
				}
				n := normalized(t, r)
				if r.status != status || n != body {
					t.Errorf("%d %s\nwant %d %s", r.status, n, status, body)
				}
				if d, ok := r.json["detail"].(map[string]any); ok {
					if _, ok := d["threadid"].(float64); !ok {
						t.Errorf("detail without threadid: %s", r.body)
					}
				}
				wantVersion(t, r, false)
				if prev, ok := got[tc.name]; ok && prev != n {
					t.Errorf("answers differ between requests: %s and %s", prev, n)
				}
				got[tc.name] = n
			}
		})
	}
	// The three token cases are one answer.
	if got["wrong PIN"] != got["locked token"] || got["wrong PIN"] != got["disabled token"] {
		t.Errorf("token cases differ:\n%s\n%s\n%s", got["wrong PIN"], got["locked token"], got["disabled token"])
	}
	// The success still says it, without a version.
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[1])
	wantAuth(t, r, true, "matching 1 tokens")
	wantVersion(t, r, false)
	// Nothing was unlocked or enabled by the right OTPs.
	if fc, tok := listOne(t, e, tok, "S7B"), listOne(t, e, tok, "S7C"); fc["failcount"] != float64(2) || tok["active"] != false {
		t.Errorf("bob's token %v, carol's %v", fc, tok)
	}
}
