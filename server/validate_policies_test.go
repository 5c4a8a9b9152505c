package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
)

// setPolicy stores an active policy; kv adds JSON string fields (realm,
// user, ...).
func setPolicy(t *testing.T, e *env, tok, name, scope, action string, kv ...string) {
	t.Helper()
	body := map[string]any{"scope": scope, "action": action, "active": true}
	for i := 0; i+1 < len(kv); i += 2 {
		body[kv[i]] = kv[i+1]
	}
	raw, _ := json.Marshal(body)
	wantOK(t, e.admin(t, tok, "POST", "/policy/"+name, string(raw)))
}

func delPolicy(t *testing.T, e *env, tok, name string) {
	t.Helper()
	wantOK(t, e.admin(t, tok, "DELETE", "/policy/"+name, ""))
}

// hotp enrolls an RFC 4226 HOTP token for user@realm1.
func hotp(t *testing.T, e *env, tok, serial, user, pin string) {
	t.Helper()
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", serial, "otpkey", rfcKeyHex, "user", user, "realm", "realm1", "pin", pin)))
}

// wantDetail checks that detail is exactly want (threadid aside).
func wantDetail(t *testing.T, r reply, want map[string]any) {
	t.Helper()
	d, _ := r.json["detail"].(map[string]any)
	got := map[string]any{}
	for k, v := range d {
		if k != "threadid" {
			got[k] = v
		}
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("detail %s, want %s", g, w)
	}
}

func TestValidatePolicyMangle(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "M1", "alice", "pin")
	// "example.com" is no realm: the whole string is the login until the
	// mangle policy strips the domain. Two policies: both apply.
	setPolicy(t, e, tok, "mangle-user", "authentication", `mangle=user/@example\.com$//`)
	setPolicy(t, e, tok, "mangle-pass", "authentication", "mangle=pass/^PFX-//")
	wantAuth(t, check(t, e, "user", "alice@example.com", "pass", "PFX-pin"+rfcHOTP[0]), true, "matching 1 tokens")
	wantAuth(t, check(t, e, "user", "alice@example.com", "pass", "pin"+rfcHOTP[1]), true, "matching 1 tokens")
	// the realm, with a Python-style group reference in the replacement
	setPolicy(t, e, tok, "mangle-realm", "authentication", `mangle=realm/^r(\d)$/realm\1/`)
	wantAuth(t, check(t, e, "user", "alice", "realm", "r1", "pass", "pin"+rfcHOTP[2]), true, "matching 1 tokens")
	// without the policy, r1 is an unknown realm
	delPolicy(t, e, tok, "mangle-realm")
	r := check(t, e, "user", "alice", "realm", "r1", "pass", "pin"+rfcHOTP[3])
	wantError(t, r, 400, 904, "ERR904: User <alice@r1> does not exist.")
}

func TestValidatePolicyAuthCache(t *testing.T) {
	st := storetest.Open(t)
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes()), authsrv.WithStore(st)})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	hotp(t, e, tok, "AC1", "alice", "pin")
	pass := "pin" + rfcHOTP[0]

	t.Run("max uses", func(t *testing.T) {
		setPolicy(t, e, tok, "cache", "authentication", "auth_cache=4h/2")
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pass), true, "matching 1 tokens")
		for range 2 {
			wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pass), true, "Authenticated by AuthCache.")
		}
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pass), false, "wrong otp value. previous otp used again")
		// other credentials are checked as usual
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[2]), true, "matching 1 tokens")
	})
	t.Run("window", func(t *testing.T) {
		setPolicy(t, e, tok, "cache", "authentication", "auth_cache=4h")
		pass := "pin" + rfcHOTP[3]
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pass), true, "matching 1 tokens")
		e.clk.add(3 * time.Hour)
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pass), true, "Authenticated by AuthCache.")
		e.clk.add(time.Hour)
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pass), false, "wrong otp value. previous otp used again")
	})
	t.Run("last use", func(t *testing.T) {
		tok := e.login(t) // the clock went past the JWT's lifetime
		setPolicy(t, e, tok, "cache", "authentication", "auth_cache=4h/5m")
		pass := "pin" + rfcHOTP[4]
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pass), true, "matching 1 tokens")
		e.clk.add(4 * time.Minute)
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pass), true, "Authenticated by AuthCache.")
		e.clk.add(4 * time.Minute) // 4 minutes after the last use
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pass), true, "Authenticated by AuthCache.")
		e.clk.add(6 * time.Minute)
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", pass), false, "wrong otp value. previous otp used again")
	})
	t.Run("no password stored", func(t *testing.T) {
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[5]), true, "matching 1 tokens")
		n := 0
		err := st.View(t.Context(), func(tx store.Tx) error {
			return tx.Bucket("authcache").ForEach(nil, func(k, v []byte) error {
				n++
				for i := range 10 {
					if bytes.Contains(k, []byte(rfcHOTP[i])) || bytes.Contains(v, []byte(rfcHOTP[i])) {
						t.Errorf("an OTP is stored in the auth cache")
					}
				}
				if bytes.Contains(k, []byte("pin")) || bytes.Contains(v, []byte("pin")) {
					t.Errorf("the PIN is stored in the auth cache")
				}
				return nil
			})
		})
		if err != nil || n == 0 {
			t.Fatalf("%d auth cache entries, %v", n, err)
		}
	})
	t.Run("expired entries are swept", func(t *testing.T) {
		tok := e.login(t)
		setPolicy(t, e, tok, "cache", "authentication", "auth_cache=1h")
		hotp(t, e, tok, "AC2", "bob", "bpin")
		wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "bpin"+rfcHOTP[0]), true, "matching 1 tokens")
		e.clk.add(5 * time.Hour)
		// alice's new entry sweeps bob's and her own expired ones
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[6]), true, "matching 1 tokens")
		n := 0
		_ = st.View(t.Context(), func(tx store.Tx) error {
			return tx.Bucket("authcache").ForEach(nil, func(_, _ []byte) error { n++; return nil })
		})
		if n != 1 {
			t.Errorf("%d auth cache entries after the sweep, want 1", n)
		}
	})
}

func TestValidatePolicyAuthMaxFailSuccess(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "AM1", "alice", "pin")
	setPolicy(t, e, tok, "maxfail", "authorization", "auth_max_fail=2/1m")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), false, "wrong otp value")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "nip000000"), false, "wrong otp pin")
	// two failures within the minute: even the right OTP is refused
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), false, "Only 2 failed authentications per 0:01:00 allowed.")
	// another user is not affected
	hotp(t, e, tok, "AM2", "bob", "bpin")
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "bpin"+rfcHOTP[0]), true, "matching 1 tokens")
	e.clk.add(61 * time.Second)
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[1]), true, "matching 1 tokens")

	// Triggered challenges are no failures.
	setPolicy(t, e, tok, "cr", "authentication", "challenge_response=hotp")
	for range 3 {
		r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin")
		if at(r.json, "result.authentication") != "CHALLENGE" {
			t.Fatalf("challenge: %s", r.body)
		}
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[2]), true, "matching 1 tokens")

	delPolicy(t, e, tok, "maxfail")
	setPolicy(t, e, tok, "maxsucc", "authorization", "auth_max_success=2/10m")
	e.clk.add(11 * time.Minute)
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[3]), true, "matching 1 tokens")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[4]), true, "matching 1 tokens")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[5]), false, "Only 2 successful authentications per 0:10:00 allowed.")
	// a failure is not affected by the success limit
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), false, "wrong otp value")
	setPolicy(t, e, tok, "maxsucc", "authorization", "auth_max_success=bad")
	wantError(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[6]), 403, 303,
		`ERR303: The value "bad" of the policy action auth_max_success is not valid.`)
}

var lastAuthRe = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}[+-]\d{4}$`)

func TestValidatePolicyLastAuth(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "LA1", "alice", "pin")
	// Every success stamps last_auth, with or without the policy.
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), true, "matching 1 tokens")
	first, _ := at(listOne(t, e, tok, "LA1"), "info.last_auth").(string)
	if !lastAuthRe.MatchString(first) {
		t.Fatalf("last_auth %q", first)
	}
	setPolicy(t, e, tok, "lastauth", "authorization", "last_auth=1h")
	e.clk.add(30 * time.Minute)
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[1]), true, "matching 1 tokens")
	stamp, _ := at(listOne(t, e, tok, "LA1"), "info.last_auth").(string)
	if stamp == first {
		t.Fatalf("last_auth not updated: %q", stamp)
	}
	e.clk.add(2 * time.Hour)
	want := "The last successful authentication was " + stamp + ". It is too long ago."
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[2])
	wantAuth(t, r, false, want)
	if at(r.json, "detail.serial") != "LA1" {
		t.Errorf("detail %s", r.body)
	}
	tok = e.login(t) // the clock went past the JWT's lifetime
	// the OTP is used up, last_auth stays
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[2]), false, "wrong otp value. previous otp used again")
	// the serial path too
	wantAuth(t, check(t, e, "serial", "LA1", "pass", "pin"+rfcHOTP[3]), false, want)
	delPolicy(t, e, tok, "lastauth")
	wantAuth(t, check(t, e, "serial", "LA1", "pass", "pin"+rfcHOTP[4]), true, "matching 1 tokens")
	// an unparsable value fails
	wantOK(t, e.admin(t, tok, "POST", "/token/info/LA1/last_auth", form("value", "yesterday")))
	setPolicy(t, e, tok, "lastauth", "authorization", "last_auth=7d")
	wantAuth(t, check(t, e, "serial", "LA1", "pass", "pin"+rfcHOTP[5]), false, "The last successful authentication was yesterday. It is too long ago.")
}

func TestValidatePolicyTokenChecks(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "PC1", "alice", "pin")
	for i, tc := range []struct {
		name, action string
		status, code int
		msg          string
	}{
		{"serial", "serial=^OATH", 403, 303, "ERR303: Serial is not allowed for authentication!"},
		{"tokentype", "tokentype=totp spass", 403, 303, "ERR303: Tokentype not allowed for authentication!"},
		{"tokeninfo", "tokeninfo=hashlib/^sha256$/", 403, 303, "ERR303: Tokeninfo field hashlib with contents does not match regular expression."},
		{"authorized", "authorized=deny_access", 400, 401, "ERR401: User is not authorized to authenticate under these conditions."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setPolicy(t, e, tok, "p-"+tc.name, "authorization", tc.action)
			wantError(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[2*i]), tc.status, tc.code, tc.msg)
			delPolicy(t, e, tok, "p-"+tc.name)
			wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[2*i+1]), true, "matching 1 tokens")
		})
	}
	// Matching values pass; a failed authentication is not checked.
	setPolicy(t, e, tok, "p-ok", "authorization", "serial=^PC, tokentype=hotp totp, tokeninfo=hashlib/sha1/")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[8]), true, "matching 1 tokens")
	setPolicy(t, e, tok, "p-ok", "authorization", "serial=^NOPE")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), false, "wrong otp value")
	// deny_access also answers failures
	setPolicy(t, e, tok, "p-ok", "authorization", "authorized=deny_access")
	wantError(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), 400, 401, "ERR401: User is not authorized to authenticate under these conditions.")
	setPolicy(t, e, tok, "p-ok", "authorization", "authorized=grant_access")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[9]), true, "matching 1 tokens")
}

func TestValidatePolicyResponseDetail(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "RD1", "alice", "pin")
	setPolicy(t, e, tok, "adduser", "authorization", "add_user_in_response, add_resolver_in_response")
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0])
	wantAuth(t, r, true, "matching 1 tokens")
	u, _ := at(r.json, "detail.user").(map[string]any)
	if u["email"] != "alice@example.org" || u["username"] != "alice" || at(r.json, "detail.user-resolver") != "mem1" || at(r.json, "detail.user-realm") != "realm1" {
		t.Errorf("detail %s", r.body)
	}
	if _, ok := u["password"]; ok || strings.Contains(string(r.body), "alice-Pw1") {
		t.Errorf("password in the response: %s", r.body)
	}
	// the serial path knows the owner too
	r = check(t, e, "serial", "RD1", "pass", "pin"+rfcHOTP[1])
	if at(r.json, "detail.user.email") != "alice@example.org" {
		t.Errorf("serial path detail %s", r.body)
	}
	// only on success
	r = check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000")
	wantDetail(t, r, map[string]any{"message": "wrong otp value", "otplen": 6, "serial": "RD1", "type": "hotp"})
	delPolicy(t, e, tok, "adduser")

	setPolicy(t, e, tok, "nodetail", "authorization", "no_detail_on_success")
	r = check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[2])
	if _, ok := r.json["detail"]; ok || at(r.json, "result.value") != true || at(r.json, "result.authentication") != "ACCEPT" {
		t.Errorf("no_detail_on_success %s", r.body)
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), false, "wrong otp value")
	setPolicy(t, e, tok, "nodetail", "authorization", "no_detail_on_fail")
	r = check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000")
	if _, ok := r.json["detail"]; ok || at(r.json, "result.value") != false {
		t.Errorf("no_detail_on_fail %s", r.body)
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[3]), true, "matching 1 tokens")
}

func TestValidatePolicyHideSpecificErrorMessage(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "HS1", "alice", "pin")
	setPolicy(t, e, tok, "hide", "authentication", "hide_specific_error_message")
	for _, pass := range []string{"pin000000", "nip000000"} {
		r := check(t, e, "user", "alice", "realm", "realm1", "pass", pass)
		wantAuth(t, r, false, "Authentication failed.")
		wantDetail(t, r, map[string]any{"message": "Authentication failed."})
		if _, ok := at(r.json, "detail.threadid").(float64); !ok {
			t.Errorf("no threadid: %s", r.body)
		}
	}
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "x"), false, "Authentication failed.")
	wantError(t, check(t, e, "user", "eve", "realm", "realm1", "pass", "x"), 401, 403, "ERR403: Authentication failed.")
	// successes and challenges keep their detail
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), true, "matching 1 tokens")
	setPolicy(t, e, tok, "cr", "authentication", "challenge_response=hotp")
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin")
	if at(r.json, "result.authentication") != "CHALLENGE" || at(r.json, "detail.transaction_id") == nil {
		t.Errorf("challenge %s", r.body)
	}
}

func TestValidatePolicyForceChallengeResponse(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "FC1", "alice", "pin")
	setPolicy(t, e, tok, "cr", "authentication", "challenge_response=hotp, force_challenge_response")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), false, "wrong otp pin")
	if fc := listOne(t, e, tok, "FC1")["failcount"]; fc != float64(1) {
		t.Errorf("failcount %v", fc)
	}
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin")
	txid, _ := at(r.json, "detail.transaction_id").(string)
	if txid == "" {
		t.Fatalf("no challenge: %s", r.body)
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", rfcHOTP[0]), true, "Found matching challenge")
	// the serial path is not affected
	wantAuth(t, check(t, e, "serial", "FC1", "pass", "pin"+rfcHOTP[1]), true, "matching 1 tokens")
}

func TestValidatePolicyChallengeTexts(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "CT1", "alice", "pin")
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "CT2", "otpkey", "4142434445464748494a4b4c4d4e4f5051525354", "user", "alice", "realm", "realm1", "pin", "pin")))
	setPolicy(t, e, tok, "cr", "authentication", `challenge_response=hotp, hotp_challenge_text=OTP please\, now`)
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin")
	wantAuth(t, r, false, "OTP please, now")
	if at(r.json, "detail.preferred_client_mode") != "interactive" || len(at(r.json, "detail.multi_challenge").([]any)) != 2 {
		t.Errorf("challenge %s", r.body)
	}
	setPolicy(t, e, tok, "texts", "authentication", "challenge_text_header=Choose one:<ul>, challenge_text_footer=</ul>, preferred_client_mode=poll interactive")
	r = check(t, e, "user", "alice", "realm", "realm1", "pass", "pin")
	wantAuth(t, r, false, "Choose one:<ul><li>OTP please, now</li>\n</ul>")
	if at(r.json, "detail.preferred_client_mode") != "interactive" {
		t.Errorf("preferred_client_mode %s", r.body)
	}
	setPolicy(t, e, tok, "texts", "authentication", "challenge_text_header=Your options:, challenge_text_footer=Good luck")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"), false, "Your options:\nOTP please, now\nGood luck")
	// no header for a plain failure
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "nip"), false, "wrong otp pin")
}

func TestValidatePolicyApplicationTokentype(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "AT1", "alice", "pin")
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "spass", "serial", "AT2", "user", "alice", "realm", "realm1", "pin", "static")))
	// without the policy the type parameter is ignored
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "type", "hotp", "pass", "static"), true, "matching 1 tokens")
	setPolicy(t, e, tok, "apptype", "authorization", "application_tokentype")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "type", "hotp", "pass", "static"), false, "wrong otp pin")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "type", "spass", "pass", "static"), true, "matching 1 tokens")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "type", "email", "pass", "static"), false, "The user has no tokens assigned")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "static"), true, "matching 1 tokens")
	// triggerchallenge: only the named type
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "AT3", "otpkey", "4142434445464748494a4b4c4d4e4f5051525354", "user", "alice", "realm", "realm1")))
	r := e.admin(t, tok, "POST", "/validate/triggerchallenge", form("user", "alice", "realm", "realm1"))
	if wantOK(t, r) != float64(2) {
		t.Errorf("two hotp challenges: %s", r.body)
	}
	r = e.admin(t, tok, "POST", "/validate/triggerchallenge", form("user", "alice", "realm", "realm1", "type", "spass"))
	if wantOK(t, r) != float64(0) || at(r.json, "result.authentication") != "REJECT" {
		t.Errorf("no spass challenge: %s", r.body)
	}
}

func TestValidatePassOnNoTokenIgnoringRolloutState(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "RS1", "alice", "pin")
	if _, err := e.s.Tokens().Update(t.Context(), "RS1", false, func(tk *token.Token) error { tk.RolloutState = token.StateClientWait; return nil }); err != nil {
		t.Fatal(err)
	}
	setPolicy(t, e, tok, "pont", "authentication", "passOnNoToken")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "x"), false, "Token is not yet enrolled")
	setPolicy(t, e, tok, "ignore", "authentication", "passonnotoken_ignore_rollout_state=clientwait")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "x"), true, "user has no token, accepted due to 'pont'")
	delPolicy(t, e, tok, "pont")
	delPolicy(t, e, tok, "ignore")
	setPolicy(t, e, tok, "pt", "authentication", "passthru=userstore, passthru_ignore_rollout_state=clientwait")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "alice-Pw1"), true, "against userstore due to 'pt'")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "wrong"), false, "Token is not yet enrolled")
}

func TestValidatePassthruRADIUS(t *testing.T) {
	rad := testsvc.FreeRADIUS(t, map[string]string{"bob": "bob-radius-pw"})
	e, tok := tokenEnv(t)
	if err := e.s.Notify().SetRadius(t.Context(), notify.RadiusServer{Identifier: "rad1", Server: "127.0.0.1", Port: rad.Port,
		Secret: string(rad.Secret), Timeout: 1, Retries: 1}); err != nil {
		t.Fatal(err)
	}
	setPolicy(t, e, tok, "ptrad", "authentication", "passthru=rad1")
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "bob-radius-pw"), true, "against RADIUS server rad1 due to 'ptrad'")
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "wrong"), false, "The user has no tokens assigned")
	// a user with a token is not passed through
	hotp(t, e, tok, "PR1", "bob", "pin")
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "bob-radius-pw"), false, "wrong otp pin")
	// an unknown server identifier is a failed passthru, not an error
	setPolicy(t, e, tok, "ptrad", "authentication", "passthru=nosuchserver")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "x"), false, "The user has no tokens assigned")
}

func TestValidateTriggerChallengeShapes(t *testing.T) {
	e, tok := tokenEnv(t)
	// Unknown user: HTTP 200 with status false and code 905 (the product
	// description), /validate/check keeps 400/904.
	r := e.admin(t, tok, "POST", "/validate/triggerchallenge", form("user", "eve", "realm", "realm1"))
	if r.status != 200 || at(r.json, "result.status") != false || at(r.json, "result.error.code") != float64(905) ||
		at(r.json, "result.error.message") != "ERR905: The user can not be found in any resolver in this realm!" {
		t.Errorf("unknown user: %d %s", r.status, r.body)
	}
	// No eligible token: value 0, REJECT, empty lists.
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "spass", "serial", "TS0", "user", "bob", "realm", "realm1", "pin", "x")))
	r = e.admin(t, tok, "POST", "/validate/triggerchallenge", form("user", "bob", "realm", "realm1"))
	if wantOK(t, r) != float64(0) || at(r.json, "result.authentication") != "REJECT" || r.json["id"] != float64(2) {
		t.Errorf("no token: %s", r.body)
	}
	wantDetail(t, r, map[string]any{"messages": []any{}, "multi_challenge": []any{}, "transaction_ids": []any{}})
	// One challenge: value 1, CHALLENGE.
	hotp(t, e, tok, "TS1", "alice", "pin")
	r = e.admin(t, tok, "GET", "/validate/triggerchallenge?user=alice&realm=realm1", "")
	txid, _ := at(r.json, "detail.transaction_id").(string)
	if wantOK(t, r) != float64(1) || at(r.json, "result.authentication") != "CHALLENGE" || txid == "" ||
		at(r.json, "detail.message") != "please enter otp: " || at(r.json, "detail.preferred_client_mode") != "interactive" {
		t.Errorf("one challenge: %s", r.body)
	}
	// deny_access applies to triggerchallenge too
	setPolicy(t, e, tok, "deny", "authorization", "authorized=deny_access")
	wantError(t, e.admin(t, tok, "POST", "/validate/triggerchallenge", form("serial", "TS1")), 400, 401, "ERR401: User is not authorized to authenticate under these conditions.")
	delPolicy(t, e, tok, "deny")

	// polltransaction: pending until a challenge of the transaction is
	// answered (as a push token does), unknown ids are pending.
	for _, target := range []string{"/validate/polltransaction?transaction_id=" + txid, "/validate/polltransaction/" + txid, "/validate/polltransaction/12345678901234567890"} {
		r = e.do(t, "GET", target, "", "", nil)
		if wantOK(t, r) != false || at(r.json, "detail.challenge_status") != "pending" || at(r.json, "result.authentication") != "REJECT" {
			t.Errorf("%s: %s", target, r.body)
		}
	}
	if err := e.s.Tokens().ChallengeAnswered(t.Context(), txid, "TS1", true); err != nil {
		t.Fatal(err)
	}
	r = e.do(t, "GET", "/validate/polltransaction/"+txid, "", "", nil)
	if wantOK(t, r) != true || at(r.json, "detail.challenge_status") != "accept" || at(r.json, "result.authentication") != "ACCEPT" {
		t.Errorf("answered: %s", r.body)
	}
	wantError(t, e.do(t, "GET", "/validate/polltransaction", "", "", nil), 400, 905, "ERR905: Missing parameter: transaction_id")
}

// recordingStore notes which buckets read-only and read-write
// transactions open.
type recordingStore struct {
	store.Store
	mu     sync.Mutex
	reads  map[string]int
	writes map[string]int
}

type recordingTx struct {
	store.Tx
	s *recordingStore
}

func (s *recordingStore) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.View(ctx, func(tx store.Tx) error { return fn(recordingTx{tx, s}) })
}

func (s *recordingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(recordingTx{tx, s}) })
}

func (t recordingTx) Bucket(name string) store.Bucket {
	t.s.mu.Lock()
	if t.Writable() {
		t.s.writes[name]++
	} else {
		t.s.reads[name]++
	}
	t.s.mu.Unlock()
	return t.Tx.Bucket(name)
}

func (s *recordingStore) reset() {
	s.mu.Lock()
	s.reads, s.writes = map[string]int{}, map[string]int{}
	s.mu.Unlock()
}

func (s *recordingStore) counts(bucket string) (reads, writes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[bucket], s.writes[bucket]
}

// TestValidateNoPolicyNoExtraReads: without policies, /validate/check
// reads neither the auth cache, the audit log nor the authentication
// records; with auth_cache and auth_max_fail it reads the cache and the
// records (not the audit log).
func TestValidateNoPolicyNoExtraReads(t *testing.T) {
	st := &recordingStore{Store: storetest.Open(t)}
	st.reset()
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes()), authsrv.WithStore(st)})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	hotp(t, e, tok, "NP1", "alice", "pin")
	// an admin policy does not count
	setPolicy(t, e, tok, "admins", "admin", "*", "adminuser", "admin")

	st.reset()
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), true, "matching 1 tokens")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), false, "wrong otp value")
	for _, b := range []string{"authcache", "audit", "authlog"} {
		if r, w := st.counts(b); r != 0 || (b == "authcache" && w != 0) {
			t.Errorf("without policies: bucket %s read %d, written %d times", b, r, w)
		}
	}
	setPolicy(t, e, tok, "cache", "authentication", "auth_cache=1h")
	setPolicy(t, e, tok, "maxfail", "authorization", "auth_max_fail=5/1m")
	st.reset()
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[1]), true, "matching 1 tokens")
	if r, _ := st.counts("authlog"); r == 0 {
		t.Error("auth_max_fail did not read the authentication records")
	}
	if _, w := st.counts("authcache"); w == 0 {
		t.Error("auth_cache did not write the cache")
	}
}

// TestValidateAuthMaxFailCountsUserLogins: failed POST /auth logins of a
// realm user count under auth_max_fail as failed checks do, and a
// successful login counts under auth_max_success.
func TestValidateAuthMaxFailCountsUserLogins(t *testing.T) {
	e, tok := tokenEnv(t)
	hotp(t, e, tok, "AL1", "alice", "pin")
	setPolicy(t, e, tok, "maxfail", "authorization", "auth_max_fail=2/1m")
	for range 2 {
		r := e.do(t, "POST", "/auth", formType, form("username", "alice@realm1", "password", "wrong"), nil)
		if r.status != 401 {
			t.Fatalf("wrong password: %d %s", r.status, r.body)
		}
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), false, "Only 2 failed authentications per 0:01:00 allowed.")
	e.clk.add(61 * time.Second)
	delPolicy(t, e, tok, "maxfail")
	setPolicy(t, e, tok, "maxsucc", "authorization", "auth_max_success=1/1m")
	userLogin(t, e, "alice@realm1", "alice-Pw1")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[1]), false, "Only 1 successful authentications per 0:01:00 allowed.")
}
