package server_test

// Reliability catalogue R1–R5, B1 and B2 of shared/spec/reliability.md §5
// for the /validate endpoints.

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/token"
)

// rfcKey is the RFC 4226 secret as bytes.
var rfcKey = func() []byte { b, _ := hex.DecodeString(rfcKeyHex); return b }()

// hotpAt is the 6-digit RFC 4226 value at counter c.
func hotpAt(c uint64) string { return otp.HOTP(rfcKey, c, 6, otp.SHA1) }

// totpAt is the 6-digit SHA-1 TOTP value (30 s steps) of the RFC key at tm.
func totpAt(tm time.Time) string { return otp.TOTP(rfcKey, tm, 30, 0, 6, otp.SHA1) }

// raceReply is one answer of a raced request (no t.Fatal off the test
// goroutine).
type raceReply struct {
	status int
	json   map[string]any
	err    error
}

// race sends n requests at once: all goroutines wait on one channel. body
// returns the form body of request i.
func race(e *env, n int, path string, hdr map[string]string, body func(i int) string) []raceReply {
	out := make([]raceReply, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		req := httptest.NewRequest("POST", path, strings.NewReader(body(i)))
		req.Header.Set("Content-Type", formType)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, req)
			out[i].status = rec.Code
			out[i].err = json.Unmarshal(rec.Body.Bytes(), &out[i].json)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// countValues counts the raced answers whose result.value is true and
// checks every answer is a 200 authentication answer.
func countValues(t *testing.T, replies []raceReply) (accepted int) {
	t.Helper()
	for i, r := range replies {
		if r.err != nil || r.status != 200 || at(r.json, "result.status") != true {
			t.Errorf("request %d: %d %v %v", i, r.status, r.err, r.json)
			continue
		}
		if at(r.json, "result.value") == true {
			accepted++
		}
	}
	return accepted
}

// auditCount counts audit entries matching the filters.
func auditCount(t *testing.T, e *env, filters map[string]string) int {
	t.Helper()
	res, err := e.s.Audit().Search(t.Context(), audit.Query{Filters: filters, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return res.Count
}

// auditViaAPI counts entries through GET /audit/ with an admin token.
func auditViaAPI(t *testing.T, e *env, tok string, query url.Values) int {
	t.Helper()
	query.Set("page_size", "1")
	v := wantOK(t, e.admin(t, tok, "GET", "/audit/?"+query.Encode(), "")).(map[string]any)
	n, ok := v["count"].(float64)
	if !ok {
		t.Fatalf("audit count %v", v["count"])
	}
	return int(n)
}

func stored(t *testing.T, e *env, serial string) *token.Token {
	t.Helper()
	tk, err := e.s.Tokens().Get(t.Context(), serial)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// R1: one OTP value, 64 parallel requests, exactly one success, and the
// audit tells the same story.
func TestValidateSameOTPConcurrent(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "hotp", "serial", "R1HOTP", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "1234")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "totp", "serial", "R1TOTP", "otpkey", rfcKeyHex, "user", "bob", "realm", "realm1", "pin", "1234")))
	// maxfail above the number of losers: every loser is a replay that
	// names the serial (a blocked token's answer names none).
	for _, serial := range []string{"R1HOTP", "R1TOTP"} {
		wantOK(t, e.admin(t, tok, "POST", "/token/set", form("serial", serial, "max_failcount", "100")))
	}
	const n = 64
	for _, tc := range []struct{ serial, user, otp string }{
		{"R1HOTP", "alice", rfcHOTP[0]},
		{"R1TOTP", "bob", totpAt(e.clk.now())},
	} {
		t.Run(tc.serial, func(t *testing.T) {
			replies := race(e, n, "/validate/check", nil, func(int) string {
				return form("user", tc.user, "realm", "realm1", "pass", "1234"+tc.otp)
			})
			if got := countValues(t, replies); got != 1 {
				t.Fatalf("%d successes for one OTP value, want exactly 1", got)
			}
			for _, r := range replies {
				if at(r.json, "result.value") == false {
					if m := at(r.json, "detail.message"); m != "wrong otp value. previous otp used again" || at(r.json, "detail.serial") != tc.serial {
						t.Errorf("loser detail %v", at(r.json, "detail"))
					}
				}
			}
			ok := auditViaAPI(t, e, tok, url.Values{"action": {"*/validate/check"}, "serial": {tc.serial}, "success": {"1"}})
			failed := auditViaAPI(t, e, tok, url.Values{"action": {"*/validate/check"}, "serial": {tc.serial}, "success": {"0"}})
			if ok != 1 || failed != n-1 {
				t.Errorf("audit: %d successes and %d failures for %s, want 1 and %d", ok, failed, tc.serial, n-1)
			}
			if n := auditViaAPI(t, e, tok, url.Values{"action": {"*/validate/check"}, "user": {tc.user}}); n != 64 {
				t.Errorf("%d audit entries for %s, want 64", n, tc.user)
			}
			// Every loser counted as a failure.
			if fc := stored(t, e, tc.serial).FailCount; fc != n-1 {
				t.Errorf("failcount %d, want %d", fc, n-1)
			}
		})
	}
}

// R2: RFC 4226 vectors through /validate/check: accept c, refuse c again
// and c-1, accept ahead inside the count window, refuse beyond it; resync
// only with two consecutive values inside the sync window.
func TestHOTPReplayAndWindow(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "R2", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	chk := func(otpValue string) reply {
		return check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+otpValue)
	}
	count := func() float64 { return listOne(t, e, tok, "R2")["count"].(float64) }

	wantAuth(t, chk(rfcHOTP[1]), true, "matching 1 tokens") // spec 7.1: pin287082 at counter 1 of a fresh token
	if c := count(); c != 2 {
		t.Fatalf("count %v after counter 1", c)
	}
	wantAuth(t, chk(rfcHOTP[1]), false, "wrong otp value. previous otp used again")
	wantAuth(t, chk(rfcHOTP[0]), false, "wrong otp value. previous otp used again")
	wantAuth(t, chk(rfcHOTP[9]), true, "matching 1 tokens") // 7 ahead, inside the window of 10
	if c := count(); c != 10 {
		t.Fatalf("count %v after counter 9", c)
	}
	wantAuth(t, chk(rfcHOTP[8]), false, "wrong otp value. previous otp used again")
	wantAuth(t, chk(hotpAt(20)), false, "wrong otp value")  // count+10: one beyond the window
	wantAuth(t, chk(hotpAt(19)), true, "matching 1 tokens") // count+9: the last value of the window
	if c := count(); c != 20 {
		t.Fatalf("count %v after counter 19", c)
	}

	resync := func(a, b uint64) any {
		return wantOK(t, e.admin(t, tok, "POST", "/token/resync", form("serial", "R2", "otp1", hotpAt(a), "otp2", hotpAt(b))))
	}
	for _, bad := range []struct {
		name string
		a, b uint64
	}{
		{"not consecutive", 50, 52},
		{"reversed", 51, 50},
		{"the same value twice", 50, 50},
		{"beyond the sync window of 1000", 20 + 1000, 20 + 1001},
		{"behind the counter", 10, 11},
	} {
		if v := resync(bad.a, bad.b); v != false {
			t.Errorf("resync %s (%d, %d) = %v", bad.name, bad.a, bad.b, v)
		}
		if c := count(); c != 20 {
			t.Fatalf("a refused resync (%s) moved the counter to %v", bad.name, c)
		}
	}
	if v := resync(20+999, 20+1000); v != true { // otp1 at the last counter of the sync window
		t.Fatalf("resync at the window edge = %v", v)
	}
	if c := count(); c != 1021 {
		t.Fatalf("count %v after resync, want 1021 (past the second value)", c)
	}
	wantAuth(t, chk(hotpAt(1020)), false, "wrong otp value. previous otp used again")
	wantAuth(t, chk(hotpAt(1021)), true, "matching 1 tokens")
}

// R3: TOTP: the same code twice in one step, the window edges with the
// injected clock, and the drift stored and applied.
func TestTOTPReplayAndWindow(t *testing.T) {
	e, tok := tokenEnv(t)
	now := e.clk.now()
	step := 30 * time.Second
	init := func(serial string) {
		wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "totp", "serial", serial, "otpkey", rfcKeyHex, "user", "bob", "realm", "realm1", "pin", serial)))
	}
	chk := func(serial, code string) reply {
		return check(t, e, "serial", serial, "pass", serial+code)
	}

	t.Run("same code twice in one step", func(t *testing.T) {
		init("T1")
		code := totpAt(now)
		wantAuth(t, chk("T1", code), true, "matching 1 tokens")
		e.clk.add(10 * time.Second) // still the same step
		wantAuth(t, chk("T1", code), false, "wrong otp value. previous otp used again")
		// audited as a reuse
		if n := auditCount(t, e, map[string]string{"serial": "T1", "success": "0", "info": "*previous otp used again*"}); n != 1 {
			t.Errorf("%d audit entries record the reuse", n)
		}
		e.clk.add(step)
		wantAuth(t, chk("T1", code), false, "wrong otp value. previous otp used again")
		wantAuth(t, chk("T1", totpAt(e.clk.now())), true, "matching 1 tokens")
		e.clk.add(-10*time.Second - step)
	})
	t.Run("window edges", func(t *testing.T) {
		// window 180 s / step 30 s: steps T-6 … T+5 (asymmetric).
		init("T2")
		wantAuth(t, chk("T2", totpAt(now.Add(-7*step))), false, "wrong otp value")
		wantAuth(t, chk("T2", totpAt(now.Add(-6*step))), true, "matching 1 tokens")
		init("T3")
		wantAuth(t, chk("T3", totpAt(now.Add(6*step))), false, "wrong otp value")
		wantAuth(t, chk("T3", totpAt(now.Add(5*step))), true, "matching 1 tokens")
	})
	t.Run("drift recorded and applied", func(t *testing.T) {
		// T3 matched at T+5: timeShift = 150 s re-centres the window there.
		if ts := at(listOne(t, e, tok, "T3"), "info.timeShift"); ts != "150" {
			t.Fatalf("timeShift %v, want 150", ts)
		}
		wantAuth(t, chk("T3", totpAt(now.Add(10*step))), true, "matching 1 tokens") // T+10 = (T+5)+5
		// T2 matched at T-6: timeShift -180 s; T+0 is now beyond its window.
		wantAuth(t, chk("T2", totpAt(now.Add(0))), false, "wrong otp value")
		wantAuth(t, chk("T2", totpAt(now.Add(-2*step))), true, "matching 1 tokens")
	})
	// AutoResync needs its system setting: its own env.
	t.Run("autoresync", testTOTPAutoResync)
}

// R4: lockout under parallel guessing.
func TestValidateLockoutConcurrent(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "R4", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "1234")))
	wantOK(t, e.admin(t, tok, "POST", "/token/set", form("serial", "R4", "max_failcount", "10")))
	replies := race(e, 64, "/validate/check", nil, func(i int) string {
		return form("user", "alice", "realm", "realm1", "pass", fmt.Sprintf("1234%06d", 100000+i))
	})
	if got := countValues(t, replies); got != 0 {
		t.Fatalf("%d wrong OTPs accepted", got)
	}
	rec := listOne(t, e, tok, "R4")
	if rec["failcount"] != float64(10) {
		t.Fatalf("failcount %v after 64 parallel failures, want exactly maxfail 10", rec["failcount"])
	}
	if at(rec, "info.failcounter_exceeded") == nil {
		t.Error("failcounter_exceeded not stamped")
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "1234"+rfcHOTP[0]), false, "Failcounter exceeded")
	wantAuth(t, check(t, e, "serial", "R4", "pass", "1234"+rfcHOTP[0]), false, "Failcounter exceeded")
	rec = listOne(t, e, tok, "R4")
	if rec["count"] != float64(0) || rec["failcount"] != float64(10) {
		t.Errorf("locked token changed: count %v failcount %v", rec["count"], rec["failcount"])
	}

	t.Run("disabled token failures do not count", func(t *testing.T) {
		wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "R4D", "otpkey", rfcKeyHex, "user", "bob", "realm", "realm1", "pin", "1234")))
		wantOK(t, e.admin(t, tok, "POST", "/token/disable", form("serial", "R4D")))
		for i := range 5 {
			wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", fmt.Sprintf("1234%06d", i)), false, "Token is disabled")
		}
		wantAuth(t, check(t, e, "serial", "R4D", "pass", "1234"+rfcHOTP[0]), false, "Token is disabled")
		if fc := listOne(t, e, tok, "R4D")["failcount"]; fc != float64(0) {
			t.Errorf("disabled token failcount %v", fc)
		}
		wantOK(t, e.admin(t, tok, "POST", "/token/enable", form("serial", "R4D")))
		wantAuth(t, check(t, e, "user", "bob", "realm", "realm1", "pass", "1234"+rfcHOTP[0]), true, "matching 1 tokens")
	})
}

// R4: with a failcounter clear timeout the first attempt after it clears
// the lock.
func TestValidateLockoutClearTimeout(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes()), authsrv.WithTokenSettings(token.Settings{FailcounterClearTime: time.Minute})})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "CT", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "1234")))
	wantOK(t, e.admin(t, tok, "POST", "/token/set", form("serial", "CT", "max_failcount", "3")))
	for range 3 {
		check(t, e, "user", "alice", "pass", "1234000000")
	}
	wantAuth(t, check(t, e, "user", "alice", "pass", "1234"+rfcHOTP[0]), false, "Failcounter exceeded")
	e.clk.add(61 * time.Second)
	wantAuth(t, check(t, e, "user", "alice", "pass", "1234"+rfcHOTP[0]), true, "matching 1 tokens")
	for range 3 {
		check(t, e, "user", "alice", "pass", "1234000000")
	}
	e.clk.add(61 * time.Second)
	wantAuth(t, check(t, e, "user", "alice", "pass", "1234000000"), false, "wrong otp value")
	if fc := listOne(t, e, tok, "CT")["failcount"]; fc != float64(1) {
		t.Errorf("failcount %v after the timeout and one wrong attempt, want 1", fc)
	}
}

// mailEnv is a tokenEnv with an SMTP sink as SMTP server "mail" and e-mail
// tokens EA (alice, PIN mailpin) and EB (bob, PIN bobpin).
func mailEnv(t *testing.T) (*env, string, *testsvc.SMTPSink) {
	t.Helper()
	e, tok := tokenEnv(t)
	sink := testsvc.NewSMTPSink(t)
	if err := e.s.Notify().SetSMTP(t.Context(), notify.SMTPServer{Identifier: "mail", Server: "127.0.0.1", Port: sink.Port, Sender: "authsrv@example.org", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "email", "serial", "EA", "email", "alice@example.org",
		"email.identifier", "mail", "user", "alice", "realm", "realm1", "pin", "mailpin")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "email", "serial", "EB", "email", "bob@example.org",
		"email.identifier", "mail", "user", "bob", "realm", "realm1", "pin", "bobpin")))
	return e, tok, sink
}

var sixDigits = regexp.MustCompile(`\b\d{6}\b`)

// mailChallenge triggers a challenge with kv (user, realm, pass …) and
// returns the transaction id and the OTP of the new mail to rcpt.
func mailChallenge(t *testing.T, e *env, sink *testsvc.SMTPSink, rcpt string, kv ...string) (string, string) {
	t.Helper()
	before := len(sink.Messages())
	r := check(t, e, kv...)
	txid, _ := at(r.json, "detail.transaction_id").(string)
	if at(r.json, "result.value") != false || len(txid) != 20 {
		t.Fatalf("no challenge: %s", r.body)
	}
	msgs := sink.Messages()
	if len(msgs) != before+1 || len(msgs[before].To) != 1 || msgs[before].To[0] != rcpt {
		t.Fatalf("mails %d -> %d (%v)", before, len(msgs), msgs)
	}
	code := sixDigits.FindString(msgs[before].Data)
	if code == "" {
		t.Fatal("no OTP in the mail")
	}
	return txid, code
}

// R5: a challenge is used once, only for its transaction and user, only
// before it expires and only while its token is enabled.
func TestChallengeUsedOnce(t *testing.T) {
	e, tok, sink := mailEnv(t)
	alice := []string{"user", "alice", "realm", "realm1"}
	answer := func(user []string, txid, code string) reply {
		return check(t, e, append(user, "transaction_id", txid, "pass", code)...)
	}
	// The losers of a race and the wrong answers raise the fail counters
	// (spec 5.6); each subtest starts unblocked.
	reset := func(t *testing.T) {
		for _, s := range []string{"EA", "EB"} {
			wantOK(t, e.admin(t, tok, "POST", "/token/reset", form("serial", s)))
		}
	}

	t.Run("parallel answers", func(t *testing.T) {
		reset(t)
		txid, code := mailChallenge(t, e, sink, "alice@example.org", append(alice, "pass", "mailpin")...)
		replies := race(e, 16, "/validate/check", nil, func(int) string {
			return form("user", "alice", "realm", "realm1", "transaction_id", txid, "pass", code)
		})
		if got := countValues(t, replies); got != 1 {
			t.Fatalf("%d successes for one challenge answer, want 1", got)
		}
		wantAuth(t, answer(alice, txid, code), false, "wrong otp pin")
	})
	t.Run("another user's transaction", func(t *testing.T) {
		reset(t)
		txid, code := mailChallenge(t, e, sink, "bob@example.org", "user", "bob", "realm", "realm1", "pass", "bobpin")
		wantAuth(t, answer(alice, txid, code), false, "wrong otp pin")
		// also as state, and on the serial path with alice's token
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "state", txid, "pass", code), false, "wrong otp pin")
		wantAuth(t, check(t, e, "serial", "EA", "transaction_id", txid, "pass", code), false, "wrong otp pin")
		// bob's challenge is untouched
		wantAuth(t, answer([]string{"user", "bob", "realm", "realm1"}, txid, code), true, "Found matching challenge")
	})
	t.Run("expired", func(t *testing.T) {
		reset(t)
		txid, code := mailChallenge(t, e, sink, "alice@example.org", append(alice, "pass", "mailpin")...)
		e.clk.add(121 * time.Second) // email.validtime 120 s
		wantAuth(t, answer(alice, txid, code), false, "Response did not match the challenge.")
	})
	t.Run("disabled token", func(t *testing.T) {
		reset(t)
		txid, code := mailChallenge(t, e, sink, "alice@example.org", append(alice, "pass", "mailpin")...)
		wantOK(t, e.admin(t, tok, "POST", "/token/disable", form("serial", "EA")))
		r := answer(alice, txid, code)
		wantAuth(t, r, false, "")
		wantOK(t, e.admin(t, tok, "POST", "/token/enable", form("serial", "EA")))
	})
	t.Run("polling does not count", func(t *testing.T) {
		reset(t)
		txid, code := mailChallenge(t, e, sink, "alice@example.org", append(alice, "pass", "mailpin")...)
		wantAuth(t, answer(alice, txid, code), true, "Found matching challenge")
		for range 3 {
			r := e.do(t, "GET", "/validate/polltransaction?transaction_id="+txid, "", "", nil)
			if r.status != 200 || at(r.json, "result.value") != false {
				t.Fatalf("poll %d %s", r.status, r.body)
			}
		}
		if fc := listOne(t, e, tok, "EA")["failcount"]; fc != float64(0) {
			t.Errorf("failcount %v after polls", fc)
		}
	})
}

// The request cannot choose what its challenge says, how long it lives or
// how strong it is: privacyIDEA reads email.validtime from the system
// config and the texts and indexedsecret_count from policies, never from
// /validate/check parameters.
func TestChallengeOptionsNotFromRequest(t *testing.T) {
	e, _, sink := mailEnv(t)
	before := len(sink.Messages())
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "mailpin",
		"email.validtime", "86400", "emailtext", "EVILTEXT {otp}", "emailsubject", "EVILSUBJECT", "email_challenge_text", "EVILPROMPT")
	txid, _ := at(r.json, "detail.transaction_id").(string)
	msgs := sink.Messages()
	if txid == "" || len(msgs) != before+1 {
		t.Fatalf("no challenge: %s", r.body)
	}
	mail := msgs[before].Data
	code := sixDigits.FindString(mail)
	var leaks []string
	if strings.Contains(mail, "EVILTEXT") {
		leaks = append(leaks, "emailtext becomes the mail body")
	}
	if strings.Contains(mail, "EVILSUBJECT") {
		leaks = append(leaks, "emailsubject becomes the mail subject")
	}
	if strings.Contains(string(r.body), "EVILPROMPT") {
		leaks = append(leaks, "email_challenge_text becomes detail.message (the RADIUS Reply-Message / PAM prompt)")
	}
	e.clk.add(121 * time.Second)
	r = check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", code)
	if at(r.json, "result.value") == true {
		leaks = append(leaks, "email.validtime=86400 keeps the challenge valid after 120 s")
	}
	if len(leaks) == 0 {
		wantAuth(t, r, false, "Response did not match the challenge.")
	}

	// indexedsecret: the request must not shrink the challenge to one
	// position (indexedsecret_count is an authentication policy).
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "indexedsecret", "serial", "IX", "otpkey", "abcdefghijklmnop",
		"user", "carol.smith", "realm", "realm1", "pin", "ixpin")))
	r = check(t, e, "user", "carol.smith", "realm", "realm1", "pass", "ixpin", "indexedsecret_count", "1",
		"indexedsecret_challenge_text", "EVILPROMPT {0}")
	positions, _ := at(r.json, "detail.attributes.random_positions").([]any)
	if len(positions) == 0 {
		t.Fatalf("indexedsecret challenge: %s", r.body)
	}
	if len(positions) == 1 {
		leaks = append(leaks, "indexedsecret_count=1 asks for a single character of the secret")
	}
	if strings.Contains(string(r.body), "EVILPROMPT") {
		leaks = append(leaks, "indexedsecret_challenge_text becomes detail.message")
	}
	if len(leaks) > 0 {
		t.Error("anonymous /validate/check parameters reach the challenge: " + strings.Join(leaks, "; "))
	}
	if len(positions) != 2 {
		t.Errorf("positions %v, want the default 2", positions)
	}
}

// ---- B1 / B2: bad inputs ----

// badEnv is a tokenEnv with alice's HOTP token B1A (PIN 1234) and bob's B1B.
func badEnv(t *testing.T) (*env, string) {
	t.Helper()
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "B1A", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "1234")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "B1B", "otpkey", rfcKeyHex, "user", "bob", "realm", "realm1", "pin", "1234")))
	return e, tok
}

// snapshot is the state a bad request may not change.
type snapshot struct {
	tokens     int
	count, fc  map[string]uint64
	audits     int
	challenges int
}

func snap(t *testing.T, e *env) snapshot {
	t.Helper()
	s := snapshot{count: map[string]uint64{}, fc: map[string]uint64{}}
	page, err := e.s.Tokens().List(t.Context(), token.Filter{}, "", false, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	s.tokens = page.Count
	for _, tk := range page.Tokens {
		s.count[tk.Serial], s.fc[tk.Serial] = tk.Count, uint64(tk.FailCount)
	}
	s.audits = auditCount(t, e, nil)
	chs, err := e.s.Tokens().Challenges(t.Context(), token.ChallengeFilter{IncludeExpired: true})
	if err != nil {
		t.Fatal(err)
	}
	s.challenges = len(chs)
	return s
}

// outcome classifies an answer.
type outcome int

const (
	outError  outcome = iota // privacyIDEA error envelope
	outReject                // 200, value false (or 0, or auth false)
	outAccept                // 200, value true
)

// sane checks the pass condition of every B test and classifies r.
func sane(t *testing.T, r reply, took time.Duration) outcome {
	t.Helper()
	if took >= time.Second {
		t.Errorf("took %v", took)
	}
	if r.status >= 500 {
		t.Fatalf("server error %d: %s", r.status, r.body)
	}
	if r.json == nil || r.json["jsonrpc"] != "2.0" {
		t.Fatalf("not a privacyIDEA envelope: %d %q", r.status, r.body)
	}
	noNulls(t, r.json, "$")
	if at(r.json, "result.status") == false {
		code, _ := at(r.json, "result.error.code").(float64)
		msg, _ := at(r.json, "result.error.message").(string)
		// The one 200 error: triggerchallenge for an unknown user (product
		// description, "Validate endpoints").
		triggerNoUser := r.status == 200 && msg == "ERR905: The user can not be found in any resolver in this realm!"
		if r.status < 400 && !triggerNoUser || code == 0 || code != float64(int(code)) || msg == "" {
			t.Fatalf("malformed error envelope %d: %s", r.status, r.body)
		}
		if strings.Contains(msg, "runtime error") || strings.Contains(msg, "panic") || strings.Contains(msg, "invalid character") {
			t.Errorf("Go internals in the error message %q", msg)
		}
		return outError
	}
	if r.status != 200 || at(r.json, "result.status") != true {
		t.Fatalf("neither error nor answer: %d %s", r.status, r.body)
	}
	switch v := at(r.json, "result.value").(type) {
	case bool:
		if v {
			return outAccept
		}
	case float64: // triggerchallenge: number of challenges
		if v > 0 {
			return outAccept
		}
	case map[string]any: // samlcheck
		if v["auth"] == true {
			return outAccept
		}
	default:
		t.Fatalf("result.value %T: %s", v, r.body)
	}
	return outReject
}

// transport sends params one way.
type transport struct {
	name string
	send func(t *testing.T, e *env, path string, hdr map[string]string, raw string, js string) reply
}

var transports = []transport{
	{"form", func(t *testing.T, e *env, path string, hdr map[string]string, raw, _ string) reply {
		return e.do(t, "POST", path, formType, raw, hdr)
	}},
	{"query", func(t *testing.T, e *env, path string, hdr map[string]string, raw, _ string) reply {
		return e.do(t, "GET", path+"?"+raw, "", "", hdr)
	}},
	{"json", func(t *testing.T, e *env, path string, hdr map[string]string, _, js string) reply {
		return e.do(t, "POST", path, "application/json", js, hdr)
	}},
}

// badCase is one B1 input. kv are sent in every transport (form and
// query url-encoded, JSON as strings) unless raw/js replace them for a
// transport; "{otp}" stands for alice's currently valid OTP. skip names
// transports that do not apply.
type badCase struct {
	name string
	kv   []string
	raw  string // url-encoded form/query instead of kv
	js   string // JSON body instead of kv
	skip string
	// check is the expectation on /validate/check: nil means only the
	// pass condition (error, or a rejection with an audited failure).
	check func(t *testing.T, tr string, r reply, o outcome)
	// accept: the request must succeed on /validate/check.
	accept bool
	// failcount: the rejection raises B1A's failcount (spec says so).
	failcount bool
}

// isError expects an error envelope with code (0: any) and message ("": any).
func isError(code int, msg string) func(t *testing.T, tr string, r reply, o outcome) {
	return func(t *testing.T, tr string, r reply, o outcome) {
		t.Helper()
		got, _ := at(r.json, "result.error.message").(string)
		if o != outError || (code != 0 && at(r.json, "result.error.code") != float64(code)) || (msg != "" && got != msg) {
			t.Errorf("%s: want error %d %q, got %d %s", tr, code, msg, r.status, r.body)
		}
	}
}

func isReject(msg string) func(t *testing.T, tr string, r reply, o outcome) {
	return func(t *testing.T, tr string, r reply, o outcome) {
		t.Helper()
		if o != outReject || (msg != "" && at(r.json, "detail.message") != msg) {
			t.Errorf("%s: want value false %q, got %d %s", tr, msg, r.status, r.body)
		}
	}
}

func errorOrReject(t *testing.T, tr string, r reply, o outcome) {
	t.Helper()
	if o == outAccept {
		t.Errorf("%s: accepted: %s", tr, r.body)
	}
}

func jsonObj(kv ...any) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(",")
		}
		k, _ := json.Marshal(kv[i])
		v, _ := json.Marshal(kv[i+1])
		b.Write(k)
		b.WriteString(":")
		b.Write(v)
	}
	b.WriteString("}")
	return b.String()
}

func manyParams(n int) (raw, js string) {
	var f, j strings.Builder
	f.WriteString("user=alice&pass=1234")
	j.WriteString(`{"user":"alice","pass":"1234"`)
	for i := range n {
		fmt.Fprintf(&f, "&p%d=1", i)
		fmt.Fprintf(&j, `,"p%d":"1"`, i)
	}
	j.WriteString("}")
	return f.String(), j.String()
}

func badCases() []badCase {
	tooMany, tooManyJSON := manyParams(10000)
	big := strings.Repeat("7", 1<<20)
	overCap := strings.Repeat("7", 65<<10)
	wrongType := isError(905, "")
	return []badCase{
		{name: "pass as number", js: `{"user":"alice","pass":1234755224}`, skip: "form query", check: wrongType},
		{name: "pass as array", js: `{"user":"alice","pass":["1234{otp}"]}`, skip: "form query", check: wrongType},
		{name: "pass as object", js: `{"user":"alice","pass":{"pin":"1234"}}`, skip: "form query", check: wrongType},
		{name: "pass as null", js: `{"user":"alice","pass":null}`, skip: "form query", check: wrongType},
		{name: "pass as bool", js: `{"user":"alice","pass":true}`, skip: "form query", check: wrongType},
		{name: "user as number", js: `{"user":42,"pass":"1234{otp}"}`, skip: "form query", check: wrongType},
		{name: "user as object", js: `{"user":{"$ne":""},"pass":"1234{otp}"}`, skip: "form query", check: wrongType},
		{name: "serial as array", js: `{"serial":["B1A"],"pass":"1234{otp}"}`, skip: "form query", check: wrongType},
		{name: "serial without user", kv: []string{"serial", "B1A", "pass", "12"}, check: isReject("wrong otp pin"), failcount: true},
		{name: "serial of another user", kv: []string{"user", "bob", "serial", "B1A", "pass", "1234{otp}"},
			check: isError(905, "ERR905: Given serial does not belong to given user!")},
		{name: "serial of another user (alice@realm2)", kv: []string{"user", "alice", "realm", "realm2", "serial", "B1A", "pass", "1234{otp}"},
			check: isError(905, "ERR905: Given serial does not belong to given user!")},
		{name: "unknown realm", kv: []string{"user", "alice", "realm", "nosuchrealm", "pass", "1234{otp}"},
			check: isError(904, "ERR904: User <alice@nosuchrealm> does not exist.")},
		{name: "empty pass", kv: []string{"user", "alice", "pass", ""}, check: isReject("wrong otp pin"), failcount: true},
		{name: "missing pass", kv: []string{"user", "alice"}, check: isError(905, "ERR905: Missing parameter: pass")},
		{name: "pass of 1 MiB", kv: []string{"user", "alice", "pass", big}, check: func(t *testing.T, tr string, r reply, o outcome) {
			if tr == "query" { // no body: the listener's header limit applies in production
				isReject("wrong otp pin")(t, tr, r, o)
				return
			}
			isError(905, "ERR905: request body too large")(t, tr, r, o)
		}, failcount: true},
		{name: "pass just over the 64 KiB cap", kv: []string{"user", "alice", "pass", overCap}, check: func(t *testing.T, tr string, r reply, o outcome) {
			if tr == "query" {
				isReject("wrong otp pin")(t, tr, r, o)
				return
			}
			isError(905, "ERR905: request body too large")(t, tr, r, o)
		}, failcount: true},
		{name: "10000 parameters", raw: tooMany, js: tooManyJSON, check: isError(905, "")},
		{name: "duplicated pass: the first wins (form, query)", raw: "user=alice&pass=1234{otp}&pass=1234000000", skip: "json", accept: true},
		{name: "duplicated pass: the last wins (JSON)", js: `{"user":"alice","pass":"1234000000","pass":"1234{otp}"}`, skip: "form query", accept: true},
		{name: "duplicated user", raw: "user=alice&user=bob&pass=1234{otp}", js: `{"user":"bob","user":"alice","pass":"1234{otp}"}`, accept: true},
		{name: "NUL in pass", kv: []string{"user", "alice", "pass", "1234\x00{otp}"}, check: isReject(""), failcount: true},
		{name: "NUL after pass", kv: []string{"user", "alice", "pass", "1234{otp}\x00"}, check: errorOrReject, failcount: true},
		{name: "NUL in user", kv: []string{"user", "alice\x00", "pass", "1234{otp}"}, check: isError(904, "")},
		{name: "NUL in serial", kv: []string{"serial", "B1A\x00", "pass", "1234{otp}"}, check: errorOrReject},
		{name: "invalid UTF-8 in pass", raw: "user=alice&pass=1234%FF{otp}", js: "{\"user\":\"alice\",\"pass\":\"1234\xff{otp}\"}", check: errorOrReject, failcount: true},
		{name: "invalid UTF-8 in user", raw: "user=al%FFice&pass=1234{otp}", js: "{\"user\":\"al\xffice\",\"pass\":\"1234{otp}\"}", check: isError(0, "")},
		{name: "overlong UTF-8 in user", raw: "user=alice%C0%AE&pass=1234{otp}", js: "{\"user\":\"alice\xc0\xae\",\"pass\":\"1234{otp}\"}", check: isError(0, "")},
		{name: "overlong slash in realm", raw: "user=alice&realm=realm1%C0%AF&pass=1234{otp}", js: "{\"user\":\"alice\",\"realm\":\"realm1\xc0\xaf\",\"pass\":\"1234{otp}\"}", check: isError(0, "")},
		{name: "zero-width space in user", kv: []string{"user", "alice\u200b", "pass", "1234{otp}"}, check: isError(904, "")},
		{name: "RTL override in user", kv: []string{"user", "\u202ealice", "pass", "1234{otp}"}, check: isError(904, "")},
		{name: "zero-width joiner in pass", kv: []string{"user", "alice", "pass", "1234\u200d{otp}"}, check: isReject(""), failcount: true},
		{name: "NFC müller", kv: []string{"user", "m\u00fcller", "pass", "x"}, check: isReject("The user has no tokens assigned")},
		{name: "NFD müller", kv: []string{"user", "mu\u0308ller", "pass", "x"}, check: errorOrReject},
		{name: "several @", kv: []string{"user", "alice@realm1@realm1", "pass", "1234{otp}"}, check: isError(904, "ERR904: User <alice@realm1@realm1> does not exist.")},
		{name: "@ without a realm", kv: []string{"user", "alice@", "pass", "1234{otp}"}, check: isError(904, "")},
		{name: "only @", kv: []string{"user", "@", "pass", "1234{otp}"}, check: isError(904, "")},
		{name: "OTP after a space", kv: []string{"user", "alice", "pass", "1234 {otp}"}, check: isReject(""), failcount: true},
		{name: "OTP with a trailing space", kv: []string{"user", "alice", "pass", "1234{otp} "}, check: isReject(""), failcount: true},
		{name: "OTP with a leading +", kv: []string{"user", "alice", "pass", "1234+{otp}"}, check: isReject(""), failcount: true},
		{name: "OTP in full-width digits", kv: []string{"user", "alice", "pass", "1234{fullwidth}"}, check: isReject(""), failcount: true},
		{name: "transaction_id non-numeric", kv: []string{"user", "alice", "transaction_id", "abc", "pass", "{otp}"}, check: isReject("wrong otp pin"), failcount: true},
		{name: "transaction_id negative", kv: []string{"user", "alice", "transaction_id", "-1", "pass", "{otp}"}, check: isReject("wrong otp pin"), failcount: true},
		{name: "transaction_id of 100 digits", kv: []string{"user", "alice", "transaction_id", strings.Repeat("9", 100), "pass", "{otp}"}, check: isReject("wrong otp pin"), failcount: true},
		{name: "transaction_id as number", js: `{"user":"alice","transaction_id":12345678901234567890,"pass":"{otp}"}`, skip: "form query", check: errorOrReject, failcount: true},
		{name: "state of 100 digits", kv: []string{"user", "alice", "state", strings.Repeat("1", 100), "pass", "{otp}"}, check: isReject("wrong otp pin"), failcount: true},
	}
}

var fullWidth = strings.NewReplacer("0", "０", "1", "１", "2", "２", "3", "３", "4", "４", "5", "５", "6", "６", "7", "７", "8", "８", "9", "９")

// TestValidateBadInputs is B1: every bad value in every transport on
// /validate/check, /validate/samlcheck and /validate/triggerchallenge.
func TestValidateBadInputs(t *testing.T) {
	for _, path := range []string{"/validate/check", "/validate/samlcheck", "/validate/triggerchallenge"} {
		t.Run(strings.TrimPrefix(path, "/validate/"), func(t *testing.T) {
			t.Parallel() // one store per endpoint
			e, tok := badEnv(t)
			var hdr map[string]string
			if strings.HasSuffix(path, "triggerchallenge") {
				hdr = map[string]string{"Authorization": tok}
			}
			for _, bc := range badCases() {
				for _, tr := range transports {
					if strings.Contains(bc.skip, tr.name) {
						continue
					}
					t.Run(bc.name+"/"+tr.name, func(t *testing.T) {
						runBad(t, e, path, hdr, bc, tr)
					})
				}
			}
		})
	}
}

func runBad(t *testing.T, e *env, path string, hdr map[string]string, bc badCase, tr transport) {
	t.Helper()
	if _, err := e.s.Tokens().Reset(t.Context(), "B1A"); err != nil {
		t.Fatal(err)
	}
	before := snap(t, e)
	cur := hotpAt(before.count["B1A"])
	fill := strings.NewReplacer("{otp}", cur, "{fullwidth}", fullWidth.Replace(cur))
	raw, js := fill.Replace(bc.raw), fill.Replace(bc.js)
	if raw == "" {
		v := url.Values{}
		for i := 0; i+1 < len(bc.kv); i += 2 {
			v.Add(bc.kv[i], fill.Replace(bc.kv[i+1]))
		}
		raw = v.Encode()
	}
	if js == "" {
		kv := make([]any, len(bc.kv))
		for i, s := range bc.kv {
			kv[i] = fill.Replace(s)
		}
		js = jsonObj(kv...)
	}
	began := time.Now()
	r := tr.send(t, e, path, hdr, raw, js)
	o := sane(t, r, time.Since(began))
	after := snap(t, e)

	if after.tokens != before.tokens {
		t.Errorf("token count %d -> %d", before.tokens, after.tokens)
	}
	if after.audits != before.audits+1 {
		t.Errorf("audit entries %d -> %d, want one more", before.audits, after.audits)
	}
	trigger := strings.HasSuffix(path, "triggerchallenge")
	for serial, c := range before.count {
		want := c
		if serial == "B1A" && bc.accept && !trigger {
			want = c + 1
		}
		if after.count[serial] != want {
			t.Errorf("%s counter %d -> %d", serial, c, after.count[serial])
		}
		fcWant := before.fc[serial]
		if serial == "B1A" && bc.failcount && o == outReject && !trigger {
			fcWant++
		}
		if after.fc[serial] != fcWant {
			t.Errorf("%s failcount %d -> %d, want %d (%d %s)", serial, before.fc[serial], after.fc[serial], fcWant, r.status, r.body)
		}
	}
	if !trigger && after.challenges != before.challenges {
		t.Errorf("challenges %d -> %d", before.challenges, after.challenges)
	}
	if trigger {
		return // triggerchallenge ignores pass: only the pass condition applies
	}
	if bc.accept {
		if o != outAccept {
			t.Errorf("%s: want accepted, got %d %s", tr.name, r.status, r.body)
		}
		return
	}
	if o == outAccept {
		t.Fatalf("%s: a bad input authenticated: %s", tr.name, r.body)
	}
	if bc.check != nil && path == "/validate/check" {
		bc.check(t, tr.name, r, o)
	}
}

// TestValidateContentTypes is B2.
func TestValidateContentTypes(t *testing.T) {
	e, _ := badEnv(t)
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("user", "alice")
	_ = mw.WriteField("pass", "1234{otp}")
	_ = mw.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(form("user", "alice", "pass", "1234{otp}")))
	_ = zw.Close()
	nested := `{"user":"alice","pass":"1234{otp}","x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "}"
	utf16 := []byte{0xff, 0xfe}
	for _, r := range `{"user":"alice","pass":"1234{otp}"}` {
		utf16 = append(utf16, byte(r), 0)
	}

	for _, tc := range []struct {
		name, ctype, body string
		hdr               map[string]string
		accept            bool
		code              int    // error code expected; 0: a rejection
		msg               string // error or detail message
	}{
		{name: "JSON type, form body", ctype: "application/json", body: form("user", "alice", "pass", "1234{otp}"), code: 905, msg: "ERR905: the JSON body is not valid JSON"},
		{name: "form type, JSON body", ctype: formType, body: `{"user":"alice","pass":"1234{otp}"}`, code: 905, msg: "ERR905: You need to specify a serial, user or credential_id."},
		{name: "multipart", ctype: mw.FormDataContentType(), body: mp.String(), accept: true},
		{name: "multipart without boundary", ctype: "multipart/form-data", body: mp.String(), code: 905},
		{name: "text/plain", ctype: "text/plain", body: form("user", "alice", "pass", "1234{otp}"), code: 905, msg: "ERR905: You need to specify a serial, user or credential_id."},
		{name: "no Content-Type", body: form("user", "alice", "pass", "1234{otp}"), code: 905, msg: "ERR905: You need to specify a serial, user or credential_id."},
		{name: "form in latin-1", ctype: formType + "; charset=iso-8859-1", body: "user=alice&pass=1234%E4{otp}", msg: "wrong otp pin"},
		{name: "form declared latin-1, UTF-8 content", ctype: formType + "; charset=iso-8859-1", body: form("user", "alice", "pass", "1234{otp}"), accept: true},
		{name: "JSON in UTF-16", ctype: "application/json; charset=utf-16", body: string(utf16), code: 905},
		{name: "gzip", ctype: formType, body: gz.String(), hdr: map[string]string{"Content-Encoding": "gzip"}, code: 905, msg: `ERR905: Content-Encoding "gzip" is not supported`},
		{name: "gzip on JSON", ctype: "application/json", body: gz.String(), hdr: map[string]string{"Content-Encoding": "gzip"}, code: 905},
		{name: "JSON with trailing garbage", ctype: "application/json", body: `{"user":"alice","pass":"1234{otp}"} x`, code: 905, msg: "ERR905: the JSON body has data after its end"},
		{name: "JSON with a second object", ctype: "application/json", body: `{"user":"alice"}{"pass":"1234{otp}"}`, code: 905},
		{name: "JSON nested 10000 levels", ctype: "application/json", body: nested, code: 905, msg: "ERR905: the JSON body is nested too deeply (more than 64 levels)"},
		{name: "JSON array", ctype: "application/json", body: `[{"user":"alice","pass":"1234{otp}"}]`, code: 905, msg: "ERR905: the JSON body must be an object"},
		{name: "JSON vendor type", ctype: "application/vnd.api+json", body: `{"user":"alice","pass":"1234{otp}"}`, accept: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.s.Tokens().Reset(t.Context(), "B1A"); err != nil {
				t.Fatal(err)
			}
			before := snap(t, e)
			cur := hotpAt(before.count["B1A"])
			body := strings.NewReplacer("{otp}", cur, "%7Botp%7D", cur).Replace(tc.body)
			if tc.name == "gzip" || tc.name == "gzip on JSON" {
				body = tc.body // compressed: no placeholder to fill
			}
			began := time.Now()
			r := e.do(t, "POST", "/validate/check", tc.ctype, body, tc.hdr)
			o := sane(t, r, time.Since(began))
			after := snap(t, e)
			if after.audits != before.audits+1 || after.tokens != before.tokens {
				t.Errorf("audits %d -> %d, tokens %d -> %d", before.audits, after.audits, before.tokens, after.tokens)
			}
			wantCount := before.count["B1A"]
			switch {
			case tc.accept:
				wantCount++
				if o != outAccept {
					t.Errorf("want accepted: %d %s", r.status, r.body)
				}
			case tc.code != 0:
				if o != outError || at(r.json, "result.error.code") != float64(tc.code) || (tc.msg != "" && at(r.json, "result.error.message") != tc.msg) {
					t.Errorf("want error %d %q: %d %s", tc.code, tc.msg, r.status, r.body)
				}
				if after.fc["B1A"] != before.fc["B1A"] {
					t.Errorf("an error changed the failcount")
				}
			default:
				if o != outReject || (tc.msg != "" && at(r.json, "detail.message") != tc.msg) {
					t.Errorf("want rejected %q: %d %s", tc.msg, r.status, r.body)
				}
			}
			if after.count["B1A"] != wantCount || after.count["B1B"] != before.count["B1B"] {
				t.Errorf("counters %v -> %v", before.count, after.count)
			}
		})
	}
}

// samlcheck's result.authentication and audit success follow value.auth
// (spec 1.1: the auth member decides), not the truthiness of the object.
func TestSAMLCheckAuthentication(t *testing.T) {
	e, tok := badEnv(t)
	r := e.do(t, "POST", "/validate/samlcheck", formType, form("user", "alice", "pass", "1234000000"), nil)
	if r.status != 200 || at(r.json, "result.value.auth") != false || at(r.json, "result.authentication") != "REJECT" {
		t.Errorf("failed samlcheck: %d %s", r.status, r.body)
	}
	r = e.do(t, "POST", "/validate/samlcheck", formType, form("user", "alice", "pass", "1234"+hotpAt(0)), nil)
	if r.status != 200 || at(r.json, "result.value.auth") != true || at(r.json, "result.authentication") != "ACCEPT" {
		t.Errorf("successful samlcheck: %d %s", r.status, r.body)
	}
	for success, want := range map[string]int{"0": 1, "1": 1} {
		if n := auditViaAPI(t, e, tok, url.Values{"action": {"*/validate/samlcheck"}, "success": {success}}); n != want {
			t.Errorf("%d samlcheck audit entries with success=%s, want %d", n, success, want)
		}
	}
}

// Checks that the OTP placeholders of the B tables reach the server as
// the current value: without this the accepting rows would prove nothing.
func TestBadInputsBaseline(t *testing.T) {
	e, _ := badEnv(t)
	for i, tr := range transports {
		c := uint64(i)
		raw := form("user", "alice", "pass", "1234"+hotpAt(c))
		js := jsonObj("user", "alice", "pass", "1234"+hotpAt(c))
		r := tr.send(t, e, "/validate/check", nil, raw, js)
		if o := sane(t, r, 0); o != outAccept {
			t.Errorf("%s: the valid request was not accepted: %s", tr.name, r.body)
		}
	}
	if c := stored(t, e, "B1A").Count; c != uint64(len(transports)) {
		t.Errorf("count %d", c)
	}
}
