package token_test

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/token"
)

// rfcBytes is the RFC 4226 secret.
var rfcBytes = func() []byte { b, _ := hex.DecodeString(rfcKey); return b }()

func rfcAt(c uint64) string { return otp.HOTP(rfcBytes, c, 6, otp.SHA1) }

func rfcTOTPStep(step uint64) string { return otp.HOTP(rfcBytes, step, 6, otp.SHA1) }

// autoResyncEnv is a token service with AutoResync on.
func autoResyncEnv(t *testing.T) *env {
	t.Helper()
	return newEnv(t, func(c *token.Config) { c.Settings.AutoResync = true })
}

func checkOTP(t *testing.T, e *env, serial, value string) token.Result {
	t.Helper()
	r, err := e.svc.CheckOTP(context.Background(), serial, value, nil)
	if err != nil {
		t.Fatalf("CheckOTP %s: %v", serial, err)
	}
	return r
}

func wantResult(t *testing.T, r token.Result, ok bool, msg string) {
	t.Helper()
	if r.OK != ok || r.Message != msg {
		t.Fatalf("result OK=%v message %q, want %v %q", r.OK, r.Message, ok, msg)
	}
}

func stored(t *testing.T, e *env, serial string) *token.Token {
	t.Helper()
	tok, err := e.svc.Get(context.Background(), serial)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// pending returns the remembered first value of a token ("" when none).
func pending(t *testing.T, e *env, serial string) (otp1c, due string) {
	t.Helper()
	tok := stored(t, e, serial)
	return tok.Info[token.InfoOTP1C], tok.Info[token.InfoDueDate]
}

func TestAutoResyncSettingsDefault(t *testing.T) {
	e := autoResyncEnv(t)
	if got := e.svc.Settings().AutoResyncTimeout; got != 300*time.Second {
		t.Fatalf("AutoResyncTimeout default %v, want 300s", got)
	}
	if e2 := newEnv(t); e2.svc.Settings().AutoResync {
		t.Fatal("AutoResync on by default")
	}
}

func TestAutoResyncOffLeavesNothing(t *testing.T) {
	e := newEnv(t)
	e.initToken(t, "hotp", "OFF", token.Params{"otpkey": rfcKey})
	wantResult(t, checkOTP(t, e, "OFF", rfcAt(20)), false, token.MsgWrongOTP)
	wantResult(t, checkOTP(t, e, "OFF", rfcAt(21)), false, token.MsgWrongOTP)
	if c, d := pending(t, e, "OFF"); c != "" || d != "" {
		t.Fatalf("otp1c %q dueDate %q stored with AutoResync off", c, d)
	}
	if got := stored(t, e, "OFF").Count; got != 0 {
		t.Fatalf("count %d", got)
	}
}

func TestAutoResyncHOTP(t *testing.T) {
	e := autoResyncEnv(t)
	e.initToken(t, "hotp", "H", token.Params{"otpkey": rfcKey})

	// The first value, out of the count window but inside the sync window,
	// still fails as any wrong value does.
	wantResult(t, checkOTP(t, e, "H", rfcAt(20)), false, token.MsgWrongOTP)
	tok := stored(t, e, "H")
	if tok.FailCount != 1 || tok.Count != 0 {
		t.Fatalf("after the first value: failcount %d count %d", tok.FailCount, tok.Count)
	}
	c, d := pending(t, e, "H")
	wantDue := strconv.FormatInt(e.clock.Now().Add(300*time.Second).Unix(), 10)
	if c != "20" || d != wantDue {
		t.Fatalf("otp1c %q dueDate %q, want 20 and %s", c, d, wantDue)
	}
	for k, v := range tok.Info {
		if strings.Contains(v, rfcAt(20)) {
			t.Fatalf("tokeninfo %s holds the OTP value", k)
		}
	}

	// The next value resyncs: count := 22, the memory is gone.
	wantResult(t, checkOTP(t, e, "H", rfcAt(21)), true, "")
	tok = stored(t, e, "H")
	if tok.Count != 22 || tok.FailCount != 0 {
		t.Fatalf("after resync: count %d failcount %d, want 22 and 0", tok.Count, tok.FailCount)
	}
	if c, d := pending(t, e, "H"); c != "" || d != "" {
		t.Fatalf("otp1c %q dueDate %q kept after the resync", c, d)
	}

	// Neither value is accepted again; the next one is.
	wantResult(t, checkOTP(t, e, "H", rfcAt(21)), false, token.MsgReplayed)
	wantResult(t, checkOTP(t, e, "H", rfcAt(20)), false, token.MsgReplayed)
	wantResult(t, checkOTP(t, e, "H", rfcAt(22)), true, "")
}

func TestAutoResyncHOTPOnlyConsecutive(t *testing.T) {
	e := autoResyncEnv(t)
	e.initToken(t, "hotp", "H", token.Params{"otpkey": rfcKey})
	wantResult(t, checkOTP(t, e, "H", rfcAt(50)), false, token.MsgWrongOTP)
	// a gap of one
	wantResult(t, checkOTP(t, e, "H", rfcAt(52)), false, token.MsgWrongOTP)
	// the same value twice
	wantResult(t, checkOTP(t, e, "H", rfcAt(52)), false, token.MsgWrongOTP)
	// backwards
	wantResult(t, checkOTP(t, e, "H", rfcAt(51)), false, token.MsgWrongOTP)
	if got := stored(t, e, "H").Count; got != 0 {
		t.Fatalf("count moved to %d", got)
	}
	// 51 is remembered now, so 52 follows it.
	wantResult(t, checkOTP(t, e, "H", rfcAt(52)), true, "")
	if got := stored(t, e, "H").Count; got != 53 {
		t.Fatalf("count %d, want 53", got)
	}
}

func TestAutoResyncHOTPSyncWindow(t *testing.T) {
	e := autoResyncEnv(t)
	e.initToken(t, "hotp", "H", token.Params{"otpkey": rfcKey})
	// counters 0 … 999 are the sync window of 1000.
	wantResult(t, checkOTP(t, e, "H", rfcAt(1000)), false, token.MsgWrongOTP)
	if c, _ := pending(t, e, "H"); c != "" {
		t.Fatalf("a value beyond the sync window was remembered (otp1c %s)", c)
	}
	wantResult(t, checkOTP(t, e, "H", rfcAt(1001)), false, token.MsgWrongOTP)
	wantResult(t, checkOTP(t, e, "H", rfcAt(998)), false, token.MsgWrongOTP)
	wantResult(t, checkOTP(t, e, "H", rfcAt(999)), true, "")
	if got := stored(t, e, "H").Count; got != 1000 {
		t.Fatalf("count %d, want 1000", got)
	}
}

func TestAutoResyncDueDate(t *testing.T) {
	e := autoResyncEnv(t)
	e.initToken(t, "hotp", "LATE", token.Params{"otpkey": rfcKey})
	e.initToken(t, "hotp", "INTIME", token.Params{"otpkey": rfcKey})

	wantResult(t, checkOTP(t, e, "LATE", rfcAt(30)), false, token.MsgWrongOTP)
	wantResult(t, checkOTP(t, e, "INTIME", rfcAt(30)), false, token.MsgWrongOTP)
	e.clock.Add(299 * time.Second)
	wantResult(t, checkOTP(t, e, "INTIME", rfcAt(31)), true, "")
	e.clock.Add(1 * time.Second) // exactly the due date: too late
	wantResult(t, checkOTP(t, e, "LATE", rfcAt(31)), false, token.MsgWrongOTP)
	if got := stored(t, e, "LATE").Count; got != 0 {
		t.Fatalf("count moved to %d after the due date", got)
	}
	// The late value became the new first value, with a new due date.
	c, d := pending(t, e, "LATE")
	if c != "31" || d != strconv.FormatInt(e.clock.Now().Add(300*time.Second).Unix(), 10) {
		t.Fatalf("otp1c %q dueDate %q", c, d)
	}
	wantResult(t, checkOTP(t, e, "LATE", rfcAt(32)), true, "")
}

func TestAutoResyncTimeoutSetting(t *testing.T) {
	e := newEnv(t, func(c *token.Config) { c.Settings.AutoResync, c.Settings.AutoResyncTimeout = true, 10*time.Second })
	e.initToken(t, "hotp", "H", token.Params{"otpkey": rfcKey})
	wantResult(t, checkOTP(t, e, "H", rfcAt(40)), false, token.MsgWrongOTP)
	e.clock.Add(11 * time.Second)
	wantResult(t, checkOTP(t, e, "H", rfcAt(41)), false, token.MsgWrongOTP)
}

func TestAutoResyncVerifyWritesNothing(t *testing.T) {
	e := autoResyncEnv(t)
	e.initToken(t, "hotp", "H", token.Params{"otpkey": rfcKey})
	tok := stored(t, e, "H")
	m, err := e.svc.Verify(context.Background(), tok, rfcAt(20), nil, nil)
	if err != nil || m.OK || m.Remember == nil {
		t.Fatalf("Verify: %+v %v, want a failure that remembers", m, err)
	}
	if c, _ := pending(t, e, "H"); c != "" {
		t.Fatalf("Verify stored otp1c %s", c)
	}
	// A failure recorded without the Match's Remember (a wrong PIN)
	// remembers nothing either.
	if err := e.svc.Fail(context.Background(), "H", true); err != nil {
		t.Fatal(err)
	}
	if c, _ := pending(t, e, "H"); c != "" {
		t.Fatalf("Fail stored otp1c %s", c)
	}
}

func TestAutoResyncAfterNormalUse(t *testing.T) {
	e := autoResyncEnv(t)
	e.initToken(t, "hotp", "H", token.Params{"otpkey": rfcKey})
	wantResult(t, checkOTP(t, e, "H", rfcAt(20)), false, token.MsgWrongOTP)
	// Meanwhile the token is used normally up to counter 25: the
	// remembered counter 20 is used up and 21 must not resync.
	for c := uint64(0); c <= 25; c += 5 {
		wantResult(t, checkOTP(t, e, "H", rfcAt(c)), true, "")
	}
	wantResult(t, checkOTP(t, e, "H", rfcAt(21)), false, token.MsgReplayed)
	if got := stored(t, e, "H").Count; got != 26 {
		t.Fatalf("count %d, want 26", got)
	}
}

func TestAutoResyncParallel(t *testing.T) {
	e := autoResyncEnv(t)
	tok, _ := e.initToken(t, "hotp", "H", token.Params{"otpkey": rfcKey})
	maxFail := 100
	if err := e.svc.SetFields(context.Background(), tok.Serial, token.Fields{MaxFail: &maxFail}); err != nil {
		t.Fatal(err)
	}
	wantResult(t, checkOTP(t, e, "H", rfcAt(100)), false, token.MsgWrongOTP)
	const n = 16
	results := make([]token.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = e.svc.CheckOTP(context.Background(), "H", rfcAt(101), nil)
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if r.OK {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d parallel second values accepted, want exactly 1", ok, n)
	}
	if got := stored(t, e, "H").Count; got != 102 {
		t.Fatalf("count %d, want 102", got)
	}
}

func TestAutoResyncPaperAndNotEmail(t *testing.T) {
	e := autoResyncEnv(t)
	e.initToken(t, "paper", "P", token.Params{"otpkey": rfcKey})
	wantResult(t, checkOTP(t, e, "P", rfcAt(40)), false, token.MsgWrongOTP)
	wantResult(t, checkOTP(t, e, "P", rfcAt(41)), true, "")

	// e-mail values are sent one at a time: no AutoResync.
	e.initToken(t, "email", "M", token.Params{"otpkey": rfcKey, "email": "a@example.org"})
	wantResult(t, checkOTP(t, e, "M", rfcAt(40)), false, token.MsgWrongOTP)
	if c, _ := pending(t, e, "M"); c != "" {
		t.Fatalf("e-mail token remembered otp1c %s", c)
	}
	wantResult(t, checkOTP(t, e, "M", rfcAt(41)), false, token.MsgWrongOTP)
}

func TestAutoResyncTOTP(t *testing.T) {
	e := autoResyncEnv(t)
	e.initToken(t, "totp", "T", token.Params{"otpkey": rfcKey})
	now := e.clock.Now() // 08:00:00, a step boundary
	T := otp.TOTPCounter(now, 30, 0)

	// The token's clock runs 20 steps (10 minutes) ahead: outside the
	// window of ±6 steps.
	wantResult(t, checkOTP(t, e, "T", rfcTOTPStep(T+20)), false, token.MsgWrongOTP)
	if c, _ := pending(t, e, "T"); c != strconv.FormatUint(T+20, 10) {
		t.Fatalf("otp1c %q, want step %d", c, T+20)
	}
	// 30 s later the token shows the next step.
	e.clock.Add(30 * time.Second)
	wantResult(t, checkOTP(t, e, "T", rfcTOTPStep(T+21)), true, "")
	tok := stored(t, e, "T")
	if tok.Count != T+21 || tok.Info[token.InfoTimeShift] != "600" {
		t.Fatalf("after resync: count %d timeShift %s, want %d and 600", tok.Count, tok.Info[token.InfoTimeShift], T+21)
	}
	if c, d := pending(t, e, "T"); c != "" || d != "" {
		t.Fatalf("otp1c %q dueDate %q kept", c, d)
	}
	// Both values are used up; the shifted window accepts the next step.
	wantResult(t, checkOTP(t, e, "T", rfcTOTPStep(T+21)), false, token.MsgReplayed)
	wantResult(t, checkOTP(t, e, "T", rfcTOTPStep(T+20)), false, token.MsgReplayed)
	e.clock.Add(30 * time.Second)
	wantResult(t, checkOTP(t, e, "T", rfcTOTPStep(T+22)), true, "")
}

// privacyIDEA 3.6.3 accepted old TOTP values through autoresync: values
// at or below the last used step never take part.
func TestAutoResyncTOTPNeverOldValues(t *testing.T) {
	e := autoResyncEnv(t)
	e.initToken(t, "totp", "T", token.Params{"otpkey": rfcKey})
	T := otp.TOTPCounter(e.clock.Now(), 30, 0)
	wantResult(t, checkOTP(t, e, "T", rfcTOTPStep(T)), true, "")
	// Two consecutive steps from before the last used one.
	wantResult(t, checkOTP(t, e, "T", rfcTOTPStep(T-20)), false, token.MsgWrongOTP)
	if c, _ := pending(t, e, "T"); c != "" {
		t.Fatalf("an old step was remembered (otp1c %s)", c)
	}
	wantResult(t, checkOTP(t, e, "T", rfcTOTPStep(T-19)), false, token.MsgWrongOTP)
	// An old first value stored by hand does not help either.
	if err := e.svc.SetInfo(context.Background(), "T", token.InfoOTP1C, strconv.FormatUint(T-20, 10)); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.SetInfo(context.Background(), "T", token.InfoDueDate, strconv.FormatInt(e.clock.Now().Add(time.Minute).Unix(), 10)); err != nil {
		t.Fatal(err)
	}
	wantResult(t, checkOTP(t, e, "T", rfcTOTPStep(T-19)), false, token.MsgWrongOTP)
	if got := stored(t, e, "T").Count; got != T {
		t.Fatalf("count %d, want %d", got, T)
	}
}
