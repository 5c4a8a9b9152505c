package validate_test

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

var autoResync = token.Settings{AutoResync: true}

// challengeOf checks a single-challenge answer and returns its
// transaction id.
func challengeOf(t *testing.T, res validate.Response, serial, message string) string {
	t.Helper()
	txid := res.TransactionID
	if res.Value || !res.Challenge || !txidRe.MatchString(txid) || res.Message != message {
		t.Fatalf("want a challenge %q, got value %v challenge %v detail %v", message, res.Value, res.Challenge, res)
	}
	multi := res.Challenges
	if len(multi) != 1 || multi[0].Message != message || multi[0].Serial != serial || multi[0].TransactionID != txid || multi[0].ClientMode != "interactive" {
		t.Fatalf("multi_challenge %v", res.Challenges)
	}
	return txid
}

func info(t *testing.T, e *env, serial, key string) string {
	t.Helper()
	return e.get(t, serial).Info[key]
}

func TestAutoResyncUserPath(t *testing.T) {
	e := newEnv(t, autoResync)
	e.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")
	alice := func(pass string) validate.Response {
		return e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: pass})
	}

	// A wrong PIN with a value of the sync window is not remembered.
	want(t, alice("pim"+hotpAt(t, rfcKey, 20)), false, "wrong otp pin")
	if c := info(t, e, "H1", token.InfoOTP1C); c != "" {
		t.Fatalf("otp1c %s remembered with a wrong PIN", c)
	}
	want(t, alice("pin"+hotpAt(t, rfcKey, 21)), false, "wrong otp value")
	want(t, alice("pin"+hotpAt(t, rfcKey, 23)), false, "wrong otp value")
	// The right PIN: the first value fails as usual and is remembered.
	want(t, alice("pin"+hotpAt(t, rfcKey, 30)), false, "wrong otp value")
	wantFail(t, e, "H1", 4)
	if c := info(t, e, "H1", token.InfoOTP1C); c != "30" {
		t.Fatalf("otp1c %q, want 30", c)
	}
	// The second needs the PIN too.
	want(t, alice("pim"+hotpAt(t, rfcKey, 31)), false, "wrong otp pin")
	res := alice("pin" + hotpAt(t, rfcKey, 31))
	want(t, res, true, "matching 1 tokens")
	if res.Serial != "H1" {
		t.Fatalf("detail %v", res)
	}
	if tok := e.get(t, "H1"); tok.Count != 32 || tok.FailCount != 0 {
		t.Fatalf("count %d failcount %d, want 32 and 0", tok.Count, tok.FailCount)
	}
	want(t, alice("pin"+hotpAt(t, rfcKey, 31)), false, "wrong otp value. previous otp used again")
	want(t, alice("pin"+hotpAt(t, rfcKey, 30)), false, "wrong otp value. previous otp used again")
	want(t, alice("pin"+hotpAt(t, rfcKey, 32)), true, "matching 1 tokens")
}

func TestAutoResyncDueDateValidate(t *testing.T) {
	e := newEnv(t, autoResync)
	e.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")
	check := func(c uint64) validate.Response {
		return e.check(t, validate.Request{Serial: "H1", Pass: "pin" + hotpAt(t, rfcKey, c)})
	}
	want(t, check(40), false, "wrong otp value")
	e.clk.Add(5*time.Minute + time.Second)
	want(t, check(41), false, "wrong otp value")
	if tok := e.get(t, "H1"); tok.Count != 0 {
		t.Fatalf("count %d after the due date", tok.Count)
	}
	want(t, check(42), true, "matching 1 tokens")
}

func TestAutoResyncTOTPValidate(t *testing.T) {
	e := newEnv(t, autoResync)
	e.enroll(t, "totp", "T1", "bob", "realm1", rfcKey, "pin")
	key, _ := hex.DecodeString(rfcKey)
	T := otp.TOTPCounter(e.clk.Now(), 30, 0)
	step := func(s uint64) string { return "pin" + otp.HOTP(key, s, 6, otp.SHA1) }

	// The token's clock is 15 steps behind.
	want(t, e.check(t, validate.Request{User: "bob", Pass: step(T - 15)}), false, "wrong otp value")
	e.clk.Add(30 * time.Second)
	want(t, e.check(t, validate.Request{User: "bob", Pass: step(T - 14)}), true, "matching 1 tokens")
	tok := e.get(t, "T1")
	if tok.Count != T-14 || tok.Info[token.InfoTimeShift] != "-450" {
		t.Fatalf("count %d timeShift %s, want %d and -450", tok.Count, tok.Info[token.InfoTimeShift], T-14)
	}
	want(t, e.check(t, validate.Request{User: "bob", Pass: step(T - 14)}), false, "wrong otp value. previous otp used again")
	want(t, e.check(t, validate.Request{User: "bob", Pass: step(T - 15)}), false, "wrong otp value. previous otp used again")
	e.clk.Add(30 * time.Second)
	want(t, e.check(t, validate.Request{User: "bob", Pass: step(T - 13)}), true, "matching 1 tokens")
}

func TestResyncViaMultichallenge(t *testing.T) {
	t.Run("without AutoResync the policy does nothing", func(t *testing.T) {
		e := newEnv(t, token.Settings{})
		e.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")
		e.policy(t, "mcr", "resync_via_multichallenge")
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + hotpAt(t, rfcKey, 20)}), false, "wrong otp value")
	})

	e := newEnv(t, autoResync)
	e.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")
	e.policy(t, "mcr", "resync_via_multichallenge")

	t.Run("a value outside the sync window stays a failure", func(t *testing.T) {
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + hotpAt(t, rfcKey, 5000)}), false, "wrong otp value")
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin000000"}), false, "wrong otp value")
	})

	res := e.check(t, validate.Request{User: "alice", Pass: "pin" + hotpAt(t, rfcKey, 20)})
	txid := challengeOf(t, res, "H1", validate.MsgResyncChallenge)
	wantFail(t, e, "H1", 3)
	chs, err := e.tokens.Challenges(t.Context(), token.ChallengeFilter{TransactionID: txid})
	if err != nil || len(chs) != 1 || chs[0].Challenge != token.ChallengeResync || chs[0].Serial != "H1" {
		t.Fatalf("stored challenges %+v %v", chs, err)
	}

	// A wrong answer fails and the challenge stays.
	want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: "520111"}), false, validate.MsgResponseNoMatch)
	// The next value (OTP only) resyncs.
	want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: hotpAt(t, rfcKey, 21)}), true, validate.MsgFoundChallenge)
	if tok := e.get(t, "H1"); tok.Count != 22 || tok.FailCount != 0 || tok.Info[token.InfoOTP1C] != "" {
		t.Fatalf("after the answer: count %d failcount %d otp1c %q", tok.Count, tok.FailCount, tok.Info[token.InfoOTP1C])
	}
	// Neither the answer nor the first value works again.
	want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: hotpAt(t, rfcKey, 21)}), false, validate.MsgWrongPIN)
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + hotpAt(t, rfcKey, 21)}), false, "wrong otp value. previous otp used again")
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + hotpAt(t, rfcKey, 20)}), false, "wrong otp value. previous otp used again")
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + hotpAt(t, rfcKey, 22)}), true, "matching 1 tokens")

	t.Run("parallel answers: one success", func(t *testing.T) {
		res := e.check(t, validate.Request{User: "alice", Pass: "pin" + hotpAt(t, rfcKey, 200)})
		txid := challengeOf(t, res, "H1", validate.MsgResyncChallenge)
		e.setMaxFail(t, "H1", 100)
		const n = 16
		ok := e.parallelAccepted(t, n, validate.Request{User: "alice", TransactionID: txid, Pass: hotpAt(t, rfcKey, 201)})
		if ok != 1 {
			t.Fatalf("%d of %d parallel answers accepted, want 1", ok, n)
		}
		if c := e.get(t, "H1").Count; c != 202 {
			t.Fatalf("count %d, want 202", c)
		}
	})

	t.Run("expired challenge", func(t *testing.T) {
		res := e.check(t, validate.Request{User: "alice", Pass: "pin" + hotpAt(t, rfcKey, 300)})
		txid := challengeOf(t, res, "H1", validate.MsgResyncChallenge)
		e.clk.Add(121 * time.Second)
		want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: hotpAt(t, rfcKey, 301)}), false, validate.MsgResponseNoMatch)
		if c := e.get(t, "H1").Count; c != 202 {
			t.Fatalf("count %d after an expired answer", c)
		}
	})
}

// pinChangeEnv is alice's HOTP token H1 (PIN "pin") whose PIN change was
// due a minute ago.
func pinChangeEnv(t *testing.T) (*env, string) {
	t.Helper()
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")
	due := token.FormatValidity(e.clk.Now().Add(-time.Minute))
	if err := e.tokens.SetInfo(t.Context(), "H1", token.InfoNextPinChange, due); err != nil {
		t.Fatal(err)
	}
	return e, due
}

func TestPinChangeDetail(t *testing.T) {
	e, due := pinChangeEnv(t)
	res := e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]})
	want(t, res, true, "matching 1 tokens")
	if res.NextPINChange != due || !res.PINChange {
		t.Fatalf("detail %v, want next_pin_change %s and pin_change true", res, due)
	}
	later := token.FormatValidity(e.clk.Now().Add(48 * time.Hour))
	if err := e.tokens.SetInfo(t.Context(), "H1", token.InfoNextPinChange, later); err != nil {
		t.Fatal(err)
	}
	res = e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[1]})
	if !res.Value || res.NextPINChange != later || res.PINChange {
		t.Fatalf("detail %v, want next_pin_change %s and pin_change false", res, later)
	}
	if err := e.tokens.DeleteInfo(t.Context(), "H1", token.InfoNextPinChange); err != nil {
		t.Fatal(err)
	}
	res = e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[2]})
	want(t, res, true, "matching 1 tokens")
	if res.PINChange || res.NextPINChange != "" {
		t.Fatalf("detail %v without next_pin_change tokeninfo", res)
	}
}

func TestPinChangeViaValidate(t *testing.T) {
	e, _ := pinChangeEnv(t)
	e.policy(t, "cpv", "change_pin_via_validate")
	e.scopedPolicy(t, "every", policy.ScopeEnrollment, "change_pin_every=90d")
	e.scopedPolicy(t, "pinlen", policy.ScopeUser, "otp_pin_minlength=6")

	res := e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]})
	tx1 := challengeOf(t, res, "H1", validate.MsgNewPIN)
	if c := e.get(t, "H1").Count; c != 1 {
		t.Fatalf("the OTP was not used up: count %d", c)
	}

	// The PIN rules of the user scope apply.
	_, err := e.v.Check(t.Context(), validate.Request{User: "alice", TransactionID: tx1, Pass: "abc"})
	wantErr(t, err, 303, "The provided PIN is too short.")

	res = e.check(t, validate.Request{User: "alice", TransactionID: tx1, Pass: "secret1"})
	tx2 := challengeOf(t, res, "H1", validate.MsgNewPINAgain)
	if tx2 == tx1 {
		t.Fatal("the repeat uses the first transaction id")
	}
	// The first transaction is used up.
	want(t, e.check(t, validate.Request{User: "alice", TransactionID: tx1, Pass: "other12"}), false, validate.MsgWrongPIN)
	// The challenge data holds no PIN in clear.
	chs, err := e.tokens.Challenges(t.Context(), token.ChallengeFilter{TransactionID: tx2})
	if err != nil || len(chs) != 1 {
		t.Fatalf("challenges %v %v", chs, err)
	}
	data, err := e.tokens.OpenChallengeData(&chs[0])
	if err != nil || len(data) == 0 || bytes.Contains(data, []byte("secret1")) {
		t.Fatalf("challenge data %q %v", data, err)
	}

	// A different repeat fails; the challenge stays for another try.
	res = e.check(t, validate.Request{User: "alice", TransactionID: tx2, Pass: "secret2"})
	want(t, res, false, validate.MsgPINsDiffer)
	if res.Serial != "H1" {
		t.Fatalf("detail %v", res)
	}
	if ok, _ := e.tokens.CheckPIN(t.Context(), e.get(t, "H1"), "pin"); !ok {
		t.Fatal("the PIN changed on a mismatch")
	}
	res = e.check(t, validate.Request{User: "alice", TransactionID: tx2, Pass: "secret1"})
	want(t, res, true, validate.MsgPINSet)
	if res.Serial != "H1" {
		t.Fatalf("detail %v", res)
	}
	tok := e.get(t, "H1")
	if ok, _ := e.tokens.CheckPIN(t.Context(), tok, "secret1"); !ok {
		t.Fatal("new PIN not set")
	}
	if want := token.FormatValidity(e.clk.Now().Add(90 * 24 * time.Hour)); tok.Info[token.InfoNextPinChange] != want {
		t.Fatalf("next_pin_change %q, want %q", tok.Info[token.InfoNextPinChange], want)
	}
	// The answer cannot be given twice.
	want(t, e.check(t, validate.Request{User: "alice", TransactionID: tx2, Pass: "secret1"}), false, validate.MsgWrongPIN)

	// The new PIN works; the old one does not; no further change is due.
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[1]}), false, validate.MsgWrongPIN)
	res = e.check(t, validate.Request{User: "alice", Pass: "secret1" + rfcHOTP[2]})
	want(t, res, true, "matching 1 tokens")
	if res.PINChange {
		t.Fatalf("detail %v", res)
	}
}

func TestPinChangeWithoutEveryPolicy(t *testing.T) {
	e, _ := pinChangeEnv(t)
	e.policy(t, "cpv", "change_pin_via_validate")
	// The serial path asks as well.
	tx1 := challengeOf(t, e.check(t, validate.Request{Serial: "H1", Pass: "pin" + rfcHOTP[0]}), "H1", validate.MsgNewPIN)
	tx2 := challengeOf(t, e.check(t, validate.Request{Serial: "H1", TransactionID: tx1, Pass: "np"}), "H1", validate.MsgNewPINAgain)
	want(t, e.check(t, validate.Request{Serial: "H1", TransactionID: tx2, Pass: "np"}), true, validate.MsgPINSet)
	if _, ok := e.get(t, "H1").Info[token.InfoNextPinChange]; ok {
		t.Fatal("next_pin_change kept without change_pin_every")
	}
	want(t, e.check(t, validate.Request{Serial: "H1", Pass: "np" + rfcHOTP[1]}), true, "matching 1 tokens")
}

func TestPinChangeExpiredAndParallel(t *testing.T) {
	e, _ := pinChangeEnv(t)
	e.policy(t, "cpv", "change_pin_via_validate")
	e.setMaxFail(t, "H1", 100)

	tx1 := challengeOf(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), "H1", validate.MsgNewPIN)
	e.clk.Add(121 * time.Second)
	// Expired: the answer is an ordinary (wrong) challenge answer.
	want(t, e.check(t, validate.Request{User: "alice", TransactionID: tx1, Pass: "newpin"}), false, validate.MsgResponseNoMatch)
	if ok, _ := e.tokens.CheckPIN(t.Context(), e.get(t, "H1"), "pin"); !ok {
		t.Fatal("PIN changed through an expired challenge")
	}

	tx1 = challengeOf(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[1]}), "H1", validate.MsgNewPIN)
	tx2 := challengeOf(t, e.check(t, validate.Request{User: "alice", TransactionID: tx1, Pass: "newpin"}), "H1", validate.MsgNewPINAgain)
	const n = 8
	ok := e.parallelAccepted(t, n, validate.Request{User: "alice", TransactionID: tx2, Pass: "newpin"})
	if ok != 1 {
		t.Fatalf("%d of %d parallel PIN confirmations accepted, want 1", ok, n)
	}
}

func TestPinChangeRevokedOrDisabled(t *testing.T) {
	e, _ := pinChangeEnv(t)
	e.policy(t, "cpv", "change_pin_via_validate")
	tx1 := challengeOf(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), "H1", validate.MsgNewPIN)
	if _, err := e.tokens.SetActive(t.Context(), "H1", false); err != nil {
		t.Fatal(err)
	}
	res := e.check(t, validate.Request{User: "alice", TransactionID: tx1, Pass: "newpin"})
	if res.Value || res.Challenge {
		t.Fatalf("a disabled token went on with the PIN change: %+v", res)
	}
	if ok, _ := e.tokens.CheckPIN(t.Context(), e.get(t, "H1"), "pin"); !ok {
		t.Fatal("PIN of a disabled token changed")
	}
}
