package server_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
)

// The tests of assignment on use over HTTP: ENROLL autoassignment and AUTH
// passthru_assign (against a real FreeRADIUS).

const (
	msgAutoassigned = "Token assigned to user via Autoassignment"
	msgNoTokens     = "The user has no tokens assigned"
)

// freeToken enrolls an unassigned RFC 4226 HOTP token in the token realm
// realm ("" for none).
func freeToken(t *testing.T, e *env, tok, serial, realm string) {
	t.Helper()
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", serial, "otpkey", rfcKeyHex, "pin", "old-pin")))
	if realm != "" {
		wantOK(t, e.admin(t, tok, "POST", "/token/realm/"+serial, form("realms", realm)))
	}
}

// owner returns "login@realm" of a token, "" when unassigned.
func owner(t *testing.T, e *env, tok, serial string) string {
	t.Helper()
	row := listOne(t, e, tok, serial)
	if row["username"] == "" {
		return ""
	}
	return row["username"].(string) + "@" + row["user_realm"].(string)
}

// lastCheckAudit returns the newest /validate/check audit entry.
func lastCheckAudit(t *testing.T, e *env, tok string) map[string]any {
	t.Helper()
	v := wantOK(t, e.admin(t, tok, "GET", "/audit/?action=*validate/check*", "")).(map[string]any)
	rows := v["auditdata"].([]any)
	if len(rows) == 0 {
		t.Fatal("no /validate/check audit entry")
	}
	return rows[0].(map[string]any)
}

// noSecret checks that a secret appears in neither the audit log nor the
// server log.
func noSecret(t *testing.T, e *env, tok string, secrets ...string) {
	t.Helper()
	audit := e.admin(t, tok, "GET", "/audit/?page_size=1000", "")
	for _, s := range secrets {
		if strings.Contains(string(audit.body), s) || strings.Contains(e.log.String(), s) {
			t.Errorf("%q appears in the audit or the log", s)
		}
	}
}

func TestValidateAutoAssignAnyPIN(t *testing.T) {
	e, tok := tokenEnv(t)
	freeToken(t, e, tok, "AA-NOREALM", "")
	freeToken(t, e, tok, "AA-REALM2", "realm2")
	freeToken(t, e, tok, "FREE", "realm1")
	setPolicy(t, e, tok, "aa", "enrollment", "autoassignment=any_pin", "realm", "realm1")

	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "S3cret"+rfcHOTP[0])
	wantAuth(t, r, true, msgAutoassigned)
	wantDetail(t, r, map[string]any{"message": msgAutoassigned, "otplen": 6, "serial": "FREE", "type": "hotp"})
	if at(r.json, "result.authentication") != "ACCEPT" {
		t.Errorf("authentication %v", at(r.json, "result.authentication"))
	}
	if o := owner(t, e, tok, "FREE"); o != "alice@realm1" {
		t.Fatalf("FREE owner %q", o)
	}
	for _, s := range []string{"AA-NOREALM", "AA-REALM2"} {
		if o := owner(t, e, tok, s); o != "" {
			t.Errorf("%s owner %q", s, o)
		}
	}
	a := lastCheckAudit(t, e, tok)
	if a["success"] != float64(1) || a["serial"] != "FREE" || a["token_type"] != "hotp" || a["user"] != "alice" ||
		a["info"] != msgAutoassigned || !strings.Contains(a["policies"].(string), "aa") {
		t.Errorf("audit entry %v", a)
	}

	// Replay of the same value: refused by the (now normal) token check.
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "S3cret"+rfcHOTP[0]), false, "wrong otp value. previous otp used again")
	// The PIN given became the token PIN.
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "old-pin"+rfcHOTP[1]), false, "wrong otp pin")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "S3cret"+rfcHOTP[1]), true, "matching 1 tokens")
	noSecret(t, e, tok, "S3cret")
}

func TestValidateAutoAssignUserstore(t *testing.T) {
	e, tok := tokenEnv(t)
	freeToken(t, e, tok, "FREE", "realm1")
	setPolicy(t, e, tok, "aa", "enrollment", "autoassignment=userstore")

	// A wrong user store password: no assignment, the message of a user
	// without tokens.
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "alice-Pw2"+rfcHOTP[0]), false, msgNoTokens)
	if o := owner(t, e, tok, "FREE"); o != "" {
		t.Fatalf("assigned to %q with a wrong password", o)
	}
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "alice-Pw1"+rfcHOTP[0])
	wantAuth(t, r, true, msgAutoassigned)
	if o := owner(t, e, tok, "FREE"); o != "alice@realm1" {
		t.Fatalf("FREE owner %q", o)
	}
	// The token keeps its PIN (old-pin): the password is not stored on it.
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "old-pin"+rfcHOTP[1]), true, "matching 1 tokens")
	noSecret(t, e, tok, "alice-Pw1", "alice-Pw2")
}

func TestValidateAutoAssignParallel(t *testing.T) {
	e, tok := tokenEnv(t)
	freeToken(t, e, tok, "FREE", "realm1")
	setPolicy(t, e, tok, "aa", "enrollment", "autoassignment=any_pin")
	const n = 16
	var mu sync.Mutex
	values := map[any]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			r := e.do(t, "POST", "/validate/check", formType, form("user", "alice", "realm", "realm1", "pass", "1234"+rfcHOTP[0]), nil)
			mu.Lock()
			defer mu.Unlock()
			if r.status != 200 {
				values["status"]++
				return
			}
			values[at(r.json, "result.value")]++
			if at(r.json, "result.value") == true && at(r.json, "detail.message") != msgAutoassigned {
				values["message"]++
			}
		})
	}
	wg.Wait()
	if values[true] != 1 || values[false] != n-1 {
		t.Fatalf("results %v, want exactly one assignment", values)
	}
	if o := owner(t, e, tok, "FREE"); o != "alice@realm1" {
		t.Fatalf("FREE owner %q", o)
	}
	row := listOne(t, e, tok, "FREE")
	if row["count"] != float64(1) {
		t.Errorf("count %v, want 1", row["count"])
	}
}

func TestValidateAutoAssignNotForUserWithToken(t *testing.T) {
	e, tok := tokenEnv(t)
	freeToken(t, e, tok, "FREE", "realm1")
	hotp(t, e, tok, "ALICE1", "alice", "pin")
	setPolicy(t, e, tok, "aa", "enrollment", "autoassignment=any_pin")
	// alice's own token has the same seed, but not this PIN: the failure
	// stays, FREE stays unassigned.
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "1234"+rfcHOTP[0]), false, "wrong otp pin")
	if o := owner(t, e, tok, "FREE"); o != "" {
		t.Fatalf("FREE owner %q", o)
	}
}

func TestValidateAutoAssignBadPolicyValue(t *testing.T) {
	e, tok := tokenEnv(t)
	freeToken(t, e, tok, "FREE", "realm1")
	setPolicy(t, e, tok, "aa", "enrollment", "autoassignment=always")
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "1234"+rfcHOTP[0])
	wantError(t, r, 403, 303, `ERR303: The value "always" of the policy action autoassignment is not valid.`)
	if o := owner(t, e, tok, "FREE"); o != "" {
		t.Fatalf("FREE owner %q", o)
	}
	if row := listOne(t, e, tok, "FREE"); row["count"] != float64(0) {
		t.Errorf("count %v: the value was used", row["count"])
	}
}

// TestValidatePassthruAssignRADIUS: a RADIUS server that knows the users'
// PIN+OTP passwords (the old system of a migration); the first accepted
// login assigns the matching token of the realm with the PIN.
func TestValidatePassthruAssignRADIUS(t *testing.T) {
	rad := testsvc.FreeRADIUS(t, map[string]string{
		"alice":       "7777" + rfcHOTP[0],  // pin:6
		"bob":         rfcHOTP[3] + "pin-b", // 6:pin
		"carol.smith": "8888" + "000000",    // matches no token
		"müller":      "9999" + rfcHOTP[9],  // outside a window of 1
	})
	e, tok := tokenEnv(t)
	if err := e.s.Notify().SetRadius(t.Context(), notify.RadiusServer{Identifier: "rad1", Server: "127.0.0.1", Port: rad.Port,
		Secret: string(rad.Secret), Timeout: 1, Retries: 1}); err != nil {
		t.Fatal(err)
	}
	freeToken(t, e, tok, "AA-REALM2", "realm2")
	freeToken(t, e, tok, "FREE", "realm1")
	setPolicy(t, e, tok, "ptrad", "authentication", "passthru=rad1, passthru_assign=pin:6")

	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "7777"+rfcHOTP[0])
	wantAuth(t, r, true, "auto-assigned FREE, against RADIUS server rad1 due to 'ptrad'")
	if o := owner(t, e, tok, "FREE"); o != "alice@realm1" {
		t.Fatalf("FREE owner %q", o)
	}
	if o := owner(t, e, tok, "AA-REALM2"); o != "" {
		t.Fatalf("AA-REALM2 owner %q", o)
	}
	// alice now has a token: no passthru any more, the RADIUS password
	// (a used value) is refused, PIN 7777 with the next value works.
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "7777"+rfcHOTP[0]), false, "wrong otp value. previous otp used again")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "7777"+rfcHOTP[1]), true, "matching 1 tokens")

	// Nothing matches: a plain passthru.
	wantAuth(t, check(t, e, "user", "carol.smith", "realm", "realm1", "pass", "8888000000"), true, "against RADIUS server rad1 due to 'ptrad'")
	// RADIUS rejects: no passthru, no assignment.
	freeToken(t, e, tok, "FREE2", "realm1")
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "pin-b"+rfcHOTP[3]), false, msgNoTokens)
	if o := owner(t, e, tok, "FREE2"); o != "" {
		t.Fatalf("FREE2 owner %q after a RADIUS reject", o)
	}

	// OTP first, then the PIN.
	setPolicy(t, e, tok, "ptrad", "authentication", "passthru=rad1, passthru_assign=6:pin")
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", rfcHOTP[3]+"pin-b"), true, "auto-assigned FREE2, against RADIUS server rad1 due to 'ptrad'")
	if o := owner(t, e, tok, "FREE2"); o != "bob@realm1" {
		t.Fatalf("FREE2 owner %q", o)
	}
	wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "pin-b"+rfcHOTP[4]), true, "matching 1 tokens")

	// The window: counter 9 is outside a window of 1, inside the
	// token's own count window (10).
	freeToken(t, e, tok, "FREE3", "realm1")
	setPolicy(t, e, tok, "ptrad", "authentication", "passthru=rad1, passthru_assign=pin:6:1")
	wantAuth(t, check(t, e, "user", "müller", "realm", "realm1", "pass", "9999"+rfcHOTP[9]), true, "against RADIUS server rad1 due to 'ptrad'")
	if o := owner(t, e, tok, "FREE3"); o != "" {
		t.Fatalf("FREE3 owner %q with window 1", o)
	}
	setPolicy(t, e, tok, "ptrad", "authentication", "passthru=rad1, passthru_assign=pin:6")
	wantAuth(t, check(t, e, "user", "müller", "realm", "realm1", "pass", "9999"+rfcHOTP[9]), true, "auto-assigned FREE3, against RADIUS server rad1 due to 'ptrad'")
	if row := listOne(t, e, tok, "FREE3"); row["count"] != float64(10) {
		t.Errorf("FREE3 count %v, want 10", row["count"])
	}

	// A bad value is a policy error, whatever the password.
	setPolicy(t, e, tok, "ptrad", "authentication", "passthru=rad1, passthru_assign=pin:6:many")
	wantError(t, check(t, e, "user", "carol.smith", "realm", "realm1", "pass", "8888000000"), 403, 303,
		`ERR303: The value "pin:6:many" of the policy action passthru_assign is not valid.`)
	noSecret(t, e, tok, "7777"+rfcHOTP[0], "pin-b", "8888000000")
}
