package server_test

// /validate/check with the system setting AutoResync, the AUTH policies
// resync_via_multichallenge and change_pin_via_validate (spec 5.4, 5.5),
// and the autoresync row of the reliability catalogue (R3).

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/token"
)

// resyncEnv is an env with AutoResync on and realm1 (mem1: alice, bob).
func resyncEnv(t *testing.T, set token.Settings) (*env, string) {
	t.Helper()
	set.AutoResync = true
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes()), authsrv.WithTokenSettings(set)})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	return e, tok
}

// totpStep is the 6-digit SHA-1 value of the RFC key at time step s.
func totpStep(s uint64) string { return otp.HOTP(rfcKey, s, 6, otp.SHA1) }

// wantChallenge checks a single-challenge answer and returns its
// transaction id.
func wantChallenge(t *testing.T, r reply, serial, message string) string {
	t.Helper()
	wantAuth(t, r, false, message)
	if at(r.json, "result.authentication") != "CHALLENGE" {
		t.Fatalf("authentication %v: %s", at(r.json, "result.authentication"), r.body)
	}
	txid, _ := at(r.json, "detail.transaction_id").(string)
	mc, _ := at(r.json, "detail.multi_challenge").([]any)
	if len(txid) != 20 || len(mc) != 1 {
		t.Fatalf("challenge detail %s", r.body)
	}
	if at(mc[0], "message") != message || at(mc[0], "serial") != serial || at(mc[0], "transaction_id") != txid || at(mc[0], "client_mode") != "interactive" {
		t.Fatalf("multi_challenge %v", mc[0])
	}
	return txid
}

func TestValidateAutoResyncHOTP(t *testing.T) {
	e, tok := resyncEnv(t, token.Settings{})
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "AR1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	chk := func(c uint64) reply { return check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+hotpAt(c)) }

	r := chk(20)
	wantAuth(t, r, false, "wrong otp value")
	if at(r.json, "detail.serial") != "AR1" || at(r.json, "result.authentication") != "REJECT" {
		t.Fatalf("first value: %s", r.body)
	}
	rec := listOne(t, e, tok, "AR1")
	due := testStart.Add(300 * time.Second).Unix()
	if at(rec, "info.otp1c") != "20" || at(rec, "info.dueDate") != strconv.FormatInt(due, 10) || rec["failcount"] != float64(1) || rec["count"] != float64(0) {
		t.Fatalf("after the first value: %v", rec)
	}
	for k, v := range rec["info"].(map[string]any) {
		if s, _ := v.(string); strings.Contains(s, hotpAt(20)) {
			t.Fatalf("tokeninfo %s holds the OTP value", k)
		}
	}

	r = chk(21)
	wantAuth(t, r, true, "matching 1 tokens")
	if at(r.json, "detail.serial") != "AR1" {
		t.Fatalf("success detail %s", r.body)
	}
	rec = listOne(t, e, tok, "AR1")
	if rec["count"] != float64(22) || rec["failcount"] != float64(0) || at(rec, "info.otp1c") != nil || at(rec, "info.dueDate") != nil {
		t.Fatalf("after the resync: %v", rec)
	}
	wantAuth(t, chk(21), false, "wrong otp value. previous otp used again")
	wantAuth(t, chk(20), false, "wrong otp value. previous otp used again")
	wantAuth(t, chk(22), true, "matching 1 tokens")

	t.Run("due date", func(t *testing.T) {
		wantAuth(t, chk(100), false, "wrong otp value")
		e.clk.add(300 * time.Second)
		wantAuth(t, chk(101), false, "wrong otp value")
		if c := listOne(t, e, tok, "AR1")["count"]; c != float64(23) {
			t.Fatalf("count %v after the due date", c)
		}
		wantAuth(t, chk(102), true, "matching 1 tokens") // 101 became the first value
	})
}

// Sixteen parallel requests with the same second value: one success.
func TestValidateAutoResyncParallel(t *testing.T) {
	e, tok := resyncEnv(t, token.Settings{})
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "ARP", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	wantOK(t, e.admin(t, tok, "POST", "/token/set", form("serial", "ARP", "max_failcount", "100")))
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+hotpAt(500)), false, "wrong otp value")
	replies := race(e, 16, "/validate/check", nil, func(int) string {
		return form("user", "alice", "realm", "realm1", "pass", "pin"+hotpAt(501))
	})
	if got := countValues(t, replies); got != 1 {
		t.Fatalf("%d successes for one second value, want exactly 1", got)
	}
	for _, r := range replies {
		if at(r.json, "result.value") == false && at(r.json, "detail.message") != "wrong otp value. previous otp used again" {
			t.Errorf("loser detail %v", at(r.json, "detail"))
		}
	}
	if c := stored(t, e, "ARP").Count; c != 502 {
		t.Fatalf("count %d, want 502", c)
	}
}

func TestValidateResyncViaMultichallenge(t *testing.T) {
	e, tok := resyncEnv(t, token.Settings{})
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "MC1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	wantOK(t, e.admin(t, tok, "POST", "/token/set", form("serial", "MC1", "max_failcount", "100")))
	setPolicy(t, e, tok, "mcr", "authentication", "resync_via_multichallenge")

	// privacyIDEA's own test: counter 8 with a count window of 5.
	wantOK(t, e.admin(t, tok, "POST", "/token/set", form("serial", "MC1", "count_window", "5", "sync_window", "10")))
	txid := wantChallenge(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[8]), "MC1",
		"To resync your token, please enter the next OTP value")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", "520111"), false, "Response did not match the challenge.")
	r := check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", rfcHOTP[9])
	wantAuth(t, r, true, "Found matching challenge")
	if at(r.json, "result.authentication") != "ACCEPT" || listOne(t, e, tok, "MC1")["count"] != float64(10) {
		t.Fatalf("answer %s", r.body)
	}
	// The answer, also as state, and the first value are used up.
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "state", txid, "pass", rfcHOTP[9]), false, "wrong otp pin")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[8]), false, "wrong otp value. previous otp used again")

	t.Run("parallel answers", func(t *testing.T) {
		txid := wantChallenge(t, check(t, e, "serial", "MC1", "pass", "pin"+hotpAt(15)), "MC1",
			"To resync your token, please enter the next OTP value")
		replies := race(e, 16, "/validate/check", nil, func(int) string {
			return form("serial", "MC1", "transaction_id", txid, "pass", hotpAt(16))
		})
		if got := countValues(t, replies); got != 1 {
			t.Fatalf("%d successes for one answer, want exactly 1", got)
		}
		if c := stored(t, e, "MC1").Count; c != 17 {
			t.Fatalf("count %d, want 17", c)
		}
	})
}

func TestValidatePinChange(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "PC1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	past := token.FormatValidity(testStart.Add(-time.Hour))
	wantOK(t, e.admin(t, tok, "POST", "/token/info/PC1/next_pin_change", form("value", past)))
	chk := func(kv ...string) reply {
		return check(t, e, append([]string{"user", "alice", "realm", "realm1"}, kv...)...)
	}

	// Without the policy: the success says the change is due.
	r := chk("pass", "pin"+rfcHOTP[0])
	wantAuth(t, r, true, "matching 1 tokens")
	if at(r.json, "detail.next_pin_change") != past || at(r.json, "detail.pin_change") != true {
		t.Fatalf("success detail %s", r.body)
	}

	setPolicy(t, e, tok, "cpv", "authentication", "change_pin_via_validate")
	setPolicy(t, e, tok, "every", "enrollment", "change_pin_every=30d")
	setPolicy(t, e, tok, "pinrules", "user", "otp_pin_minlength=5, otp_pin_contents=cn")
	tx1 := wantChallenge(t, chk("pass", "pin"+rfcHOTP[1]), "PC1", "Please enter a new PIN")
	if c := listOne(t, e, tok, "PC1")["count"]; c != float64(2) {
		t.Fatalf("count %v: the OTP was not used up", c)
	}

	wantError(t, chk("transaction_id", tx1, "pass", "ab1"), 403, 303, "ERR303: The provided PIN is too short.")
	wantError(t, chk("transaction_id", tx1, "pass", "abcdef"), 403, 303, "ERR303: The provided PIN does not contain the required characters: cn")
	tx2 := wantChallenge(t, chk("transaction_id", tx1, "pass", "newpin1"), "PC1", "Please enter the new PIN again")
	if tx2 == tx1 {
		t.Fatal("same transaction id for the repeat")
	}
	r = chk("transaction_id", tx2, "pass", "newpin2")
	wantAuth(t, r, false, "PINs do not match")
	if at(r.json, "detail.serial") != "PC1" {
		t.Fatalf("mismatch detail %s", r.body)
	}
	r = chk("transaction_id", tx2, "pass", "newpin1")
	wantAuth(t, r, true, "PIN successfully set.")
	if at(r.json, "detail.serial") != "PC1" || at(r.json, "result.authentication") != "ACCEPT" {
		t.Fatalf("final answer %s", r.body)
	}
	next := token.FormatValidity(testStart.Add(30 * 24 * time.Hour))
	if got := at(listOne(t, e, tok, "PC1"), "info.next_pin_change"); got != next {
		t.Fatalf("next_pin_change %v, want %s", got, next)
	}

	// The new PIN authenticates without a further change; the old one
	// does not.
	wantAuth(t, chk("pass", "pin"+rfcHOTP[2]), false, "wrong otp pin")
	r = chk("pass", "newpin1"+rfcHOTP[3])
	wantAuth(t, r, true, "matching 1 tokens")
	if at(r.json, "detail.next_pin_change") != next || at(r.json, "detail.pin_change") != false {
		t.Fatalf("detail %s", r.body)
	}
	// No PIN in any log line.
	if strings.Contains(e.log.String(), "newpin1") || strings.Contains(e.log.String(), "newpin2") {
		t.Fatal("a PIN reached the log")
	}
}

// R3, autoresync (spec/reliability.md §5): two consecutive TOTP codes
// within 300 s resync; codes that are not consecutive, come too late, or
// lie at or below the last used step never do (privacyIDEA 3.6.3 accepted
// old codes this way); no code is accepted twice.
func testTOTPAutoResync(t *testing.T) {
	e, tok := resyncEnv(t, token.Settings{})
	step := 30 * time.Second
	T := otp.TOTPCounter(e.clk.now(), 30, 0)
	init := func(serial string) {
		wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "totp", "serial", serial, "otpkey", rfcKeyHex, "user", "bob", "realm", "realm1", "pin", serial)))
	}
	chk := func(serial string, s uint64) reply { return check(t, e, "serial", serial, "pass", serial+totpStep(s)) }

	// The token runs 40 steps (20 minutes) ahead.
	init("RS1")
	wantAuth(t, chk("RS1", T+40), false, "wrong otp value")
	wantAuth(t, chk("RS1", T+42), false, "wrong otp value") // not consecutive
	e.clk.add(step)
	wantAuth(t, chk("RS1", T+43), true, "matching 1 tokens") // follows T+42
	rec := listOne(t, e, tok, "RS1")
	if rec["count"] != float64(T+43) || at(rec, "info.timeShift") != "1260" {
		t.Fatalf("after resync: count %v timeShift %v, want %d and 1260", rec["count"], at(rec, "info.timeShift"), T+43)
	}
	for _, s := range []uint64{T + 43, T + 42, T + 40} {
		wantAuth(t, chk("RS1", s), false, "wrong otp value. previous otp used again")
	}
	e.clk.add(step)
	wantAuth(t, chk("RS1", T+44), true, "matching 1 tokens") // the drift is applied

	// Too late: the second code after AutoResyncTimeout.
	init("RS2")
	wantAuth(t, chk("RS2", T+60), false, "wrong otp value")
	e.clk.add(300 * time.Second)
	wantAuth(t, chk("RS2", T+61), false, "wrong otp value")
	if rec := listOne(t, e, tok, "RS2"); rec["count"] != float64(0) {
		t.Fatalf("count %v after a late second code", rec["count"])
	}

	// Never at or below the last used step.
	init("RS3")
	now := otp.TOTPCounter(e.clk.now(), 30, 0)
	wantAuth(t, chk("RS3", now), true, "matching 1 tokens")
	wantAuth(t, chk("RS3", now-30), false, "wrong otp value")
	wantAuth(t, chk("RS3", now-29), false, "wrong otp value")
	if rec := listOne(t, e, tok, "RS3"); rec["count"] != float64(now) || at(rec, "info.otp1c") != nil {
		t.Fatalf("old codes moved the token: %v", rec)
	}
}

// ENROLL change_pin_on_first_use (admin) and change_pin_every (user) set
// next_pin_change at /token/init and /token/setpin; /validate/check then
// asks for the new PIN.
func TestValidatePinChangePolicies(t *testing.T) {
	e, tok := tokenEnv(t)
	setPolicy(t, e, tok, "first", "enrollment", "change_pin_on_first_use")
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "FU1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	now := token.FormatValidity(testStart)
	if got := at(listOne(t, e, tok, "FU1"), "info.next_pin_change"); got != now {
		t.Fatalf("next_pin_change after an admin enrolled: %v, want %s", got, now)
	}
	// An admin's setpin makes it due again.
	wantOK(t, e.admin(t, tok, "POST", "/token/info/FU1/next_pin_change", form("value", "2099-01-01T00:00+0000")))
	wantOK(t, e.admin(t, tok, "POST", "/token/setpin", form("serial", "FU1", "otppin", "pin")))
	if got := at(listOne(t, e, tok, "FU1"), "info.next_pin_change"); got != now {
		t.Fatalf("next_pin_change after an admin set the PIN: %v, want %s", got, now)
	}

	e.clk.add(time.Minute)
	setPolicy(t, e, tok, "cpv", "authentication", "change_pin_via_validate")
	setPolicy(t, e, tok, "every", "enrollment", "change_pin_every=90d")
	tx1 := wantChallenge(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), "FU1", "Please enter a new PIN")
	tx2 := wantChallenge(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", tx1, "pass", "mine"), "FU1", "Please enter the new PIN again")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", tx2, "pass", "mine"), true, "PIN successfully set.")
	every := token.FormatValidity(testStart.Add(time.Minute + 90*24*time.Hour))
	if got := at(listOne(t, e, tok, "FU1"), "info.next_pin_change"); got != every {
		t.Fatalf("next_pin_change after the change: %v, want %s", got, every)
	}

	// A user who sets her PIN starts the change_pin_every period; the
	// admin's first-use policy does not apply to her.
	e.clk.add(time.Hour)
	tok = e.login(t) // the JWT lives an hour
	alice := userLogin(t, e, "alice@realm1", "alice-Pw1")
	wantOK(t, e.admin(t, alice, "POST", "/token/setpin", form("serial", "FU1", "otppin", "hers")))
	every = token.FormatValidity(testStart.Add(time.Minute + time.Hour + 90*24*time.Hour))
	if got := at(listOne(t, e, tok, "FU1"), "info.next_pin_change"); got != every {
		t.Fatalf("next_pin_change after the user set the PIN: %v, want %s", got, every)
	}
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "hers"+rfcHOTP[1])
	wantAuth(t, r, true, "matching 1 tokens")
	if at(r.json, "detail.pin_change") != false || at(r.json, "detail.next_pin_change") != every {
		t.Fatalf("detail %s", r.body)
	}

	// Without the policies nothing is written.
	delPolicy(t, e, tok, "first")
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "FU2", "otpkey", rfcKeyHex, "user", "bob", "realm", "realm1", "pin", "pin")))
	if got := at(listOne(t, e, tok, "FU2"), "info.next_pin_change"); got != nil {
		t.Fatalf("next_pin_change %v without change_pin_on_first_use", got)
	}
}
