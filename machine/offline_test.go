package machine_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// rfcKey is the RFC 4226 test key; its values from counter 0 are
// 755224 287082 359152 969429 338314 254676 287922 162583 399871 520489.
const rfcKey = "3132333435363738393031323334353637383930"

var hex80 = regexp.MustCompile(`^[0-9a-f]{80}$`)

type offlineEnv struct {
	st     store.Store
	tokens *token.Service
	off    *machine.Offline
}

// newOfflineEnv enrolls the HOTP token OATH1 (RFC 4226 key, PIN "test",
// owner alice) and builds the offline application.
func newOfflineEnv(t *testing.T, pinAfterOTP bool) *offlineEnv {
	t.Helper()
	st := storetest.Open(t)
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	h, err := secret.NewHasher(secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}})
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }
	tokens := token.New(token.Config{Store: st, Sealer: sealer, Hasher: h, Now: now})
	alice := user.User{Login: "alice", Realm: "realm1", Resolver: "r1", UID: "1"}
	if _, _, err := tokens.Init(t.Context(), token.InitRequest{Type: "hotp", Serial: "OATH1", Owner: &alice,
		Params: token.Params{"otpkey": rfcKey, "pin": "test"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tokens.Init(t.Context(), token.InitRequest{Type: "spass", Serial: "SPASS1",
		Params: token.Params{"pin": "test"}}); err != nil {
		t.Fatal(err)
	}
	off := machine.NewOffline(machine.OfflineConfig{Tokens: tokens, Rand: rand.Reader, Now: now, PINAfterOTP: pinAfterOTP})
	return &offlineEnv{st: st, tokens: tokens, off: off}
}

func (e *offlineEnv) token(t *testing.T) *token.Token {
	t.Helper()
	tk, err := e.tokens.Get(t.Context(), "OATH1")
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// rfcOTP is the RFC 4226 value at counter c.
func rfcOTP(c uint64) string {
	key := []byte("12345678901234567890")
	return otp.HOTP(key, c, 6, otp.SHA1)
}

// checkValues verifies that resp holds exactly the counters from..to-1,
// each the hash of pin and the value at that counter (in the order
// pinAfterOTP says), in Go and, when python is set, with Python's hashlib.
func checkValues(t *testing.T, resp map[string]string, from, to uint64, pin string, pinAfterOTP, python bool) {
	t.Helper()
	if len(resp) != int(to-from) {
		t.Fatalf("%d values, want %d (counters %d..%d)", len(resp), to-from, from, to-1)
	}
	var cases []pyCase
	for c := from; c < to; c++ {
		h, ok := resp[strconv.FormatUint(c, 10)]
		if !ok {
			t.Fatalf("no value for counter %d in %v", c, resp)
		}
		if !passlibFormat.MatchString(h) {
			t.Fatalf("value %d = %q: not passlib's pbkdf2-sha512 format", c, h)
		}
		pw := pin + rfcOTP(c)
		if pinAfterOTP {
			pw = rfcOTP(c) + pin
		}
		if ok, err := machine.PBKDF2Verify(h, pw); err != nil || !ok {
			t.Errorf("value %d does not verify for PIN and OTP: %v %v", c, ok, err)
		}
		if ok, _ := machine.PBKDF2Verify(h, "x"+pw); ok {
			t.Errorf("value %d verifies a wrong PIN", c)
		}
		cases = append(cases, pyCase{Hash: h, Password: pw, Want: true}, pyCase{Hash: h, Password: pin + rfcOTP(c+1000), Want: false})
	}
	if python {
		pythonVerify(t, cases)
	}
}

func TestParseOfflineOptions(t *testing.T) {
	for _, tc := range []struct {
		name          string
		opts          map[string]string
		count, rounds int
		ok            bool
	}{
		{"defaults", nil, 100, 6549, true},
		{"set", map[string]string{"count": "10", "rounds": " 20 "}, 10, 20, true},
		{"empty values", map[string]string{"count": "", "rounds": ""}, 100, 6549, true},
		{"max count", map[string]string{"count": "1000", "rounds": "10000"}, 1000, 10000, true},
		{"count zero", map[string]string{"count": "0"}, 0, 0, false},
		{"count too big", map[string]string{"count": "1001"}, 0, 0, false},
		{"count negative", map[string]string{"count": "-5"}, 0, 0, false},
		{"count text", map[string]string{"count": "ten"}, 0, 0, false},
		{"rounds zero", map[string]string{"rounds": "0"}, 0, 0, false},
		{"rounds too big", map[string]string{"rounds": "1000001"}, 0, 0, false},
		{"too much work", map[string]string{"count": "1000", "rounds": "10001"}, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := machine.ParseOfflineOptions(tc.opts)
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if tc.ok && (o.Count != tc.count || o.Rounds != tc.rounds) {
				t.Errorf("= %+v, want count %d rounds %d", o, tc.count, tc.rounds)
			}
		})
	}
}

func TestOfflineIssue(t *testing.T) {
	for _, pinAfter := range []bool{false, true} {
		t.Run("pinAfterOTP="+strconv.FormatBool(pinAfter), func(t *testing.T) {
			e := newOfflineEnv(t, pinAfter)
			it, err := e.off.Issue(t.Context(), "OATH1", "test", machine.OfflineOptions{Count: 10, Rounds: 50})
			if err != nil {
				t.Fatal(err)
			}
			checkValues(t, it.Response, 0, 10, "test", pinAfter, true)
			tk := e.token(t)
			if tk.Count != 10 {
				t.Errorf("counter = %d, want 10", tk.Count)
			}
			if !hex80.MatchString(it.RefillToken) || tk.Info[machine.InfoRefillToken] != it.RefillToken {
				t.Errorf("refill token %q, stored %q", it.RefillToken, tk.Info[machine.InfoRefillToken])
			}
			if it.User != "alice" || it.Map()["username"] != "alice" || it.Map()["user"] != "alice" {
				t.Errorf("item user = %q, map %v", it.User, it.Map())
			}
			// The next issue continues where this one ended.
			it2, err := e.off.Issue(t.Context(), "OATH1", "", machine.OfflineOptions{Count: 3, Rounds: 5})
			if err != nil {
				t.Fatal(err)
			}
			checkValues(t, it2.Response, 10, 13, "", pinAfter, false)
			if it2.RefillToken == it.RefillToken {
				t.Error("the refill token was not renewed")
			}
		})
	}
	t.Run("not hotp", func(t *testing.T) {
		e := newOfflineEnv(t, false)
		if _, err := e.off.Issue(t.Context(), "SPASS1", "", machine.OfflineOptions{Count: 3, Rounds: 5}); !errors.Is(err, machine.ErrOfflineType) {
			t.Errorf("err = %v, want ErrOfflineType", err)
		}
	})
}

func TestOfflineIssueConcurrent(t *testing.T) {
	e := newOfflineEnv(t, false)
	const n, count = 6, 5
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			it, err := e.off.Issue(t.Context(), "OATH1", "test", machine.OfflineOptions{Count: count, Rounds: 2})
			if errors.Is(err, machine.ErrOfflineBusy) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for k := range it.Response {
				seen[k]++
			}
		})
	}
	wg.Wait()
	// Every counter handed out once, and the counter past all of them.
	for k, c := range seen {
		if c != 1 {
			t.Errorf("counter %s handed out %d times", k, c)
		}
	}
	if got := e.token(t).Count; got != uint64(len(seen)) || len(seen) == 0 || len(seen)%count != 0 {
		t.Errorf("counter %d after %d values handed out", got, len(seen))
	}
}

func TestOfflineAuthItem(t *testing.T) {
	e := newOfflineEnv(t, false)
	b := machine.Binding{ID: 1, Serial: "OATH1", Application: machine.OfflineName, Options: map[string]string{"count": "4", "rounds": "7"}}
	// The challenge is PIN and OTP: the PIN is split from it by the OTP
	// length.
	item, ok, err := e.off.AuthItem(t.Context(), b, e.token(t), machine.AuthItemRequest{Challenge: "test755224"})
	if err != nil || !ok {
		t.Fatalf("AuthItem = %v, %v", ok, err)
	}
	resp, _ := item["response"].(map[string]string)
	checkValues(t, resp, 0, 4, "test", false, false)
	if item["username"] != "alice" || !hex80.MatchString(item["refilltoken"].(string)) {
		t.Errorf("item = %v", item)
	}
	spass, err := e.tokens.Get(t.Context(), "SPASS1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.off.AuthItem(t.Context(), b, spass, machine.AuthItemRequest{}); ok || err != nil {
		t.Errorf("an spass token gave an item: %v %v", ok, err)
	}
	bad := b
	bad.Options = map[string]string{"count": "5000"}
	if _, _, err := e.off.AuthItem(t.Context(), bad, e.token(t), machine.AuthItemRequest{}); err == nil {
		t.Error("count 5000 accepted")
	}
	if _, err := e.tokens.SetActive(t.Context(), "OATH1", false); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := e.off.AuthItem(t.Context(), b, e.token(t), machine.AuthItemRequest{}); ok || err != nil {
		t.Errorf("a disabled token gave an item: %v %v", ok, err)
	}
	if got := e.token(t).Count; got != 4 {
		t.Errorf("counter = %d, want 4", got)
	}
	opts, err := e.off.Options(t.Context())
	if err != nil || opts["hotp"]["count"].Type != machine.OptionStr || opts["hotp"]["rounds"].Type != machine.OptionStr {
		t.Errorf("Options = %v, %v", opts, err)
	}
}

// issued hands out counters 0..9 of OATH1 with PIN "test" and returns the
// refill token.
func issued(t *testing.T, e *offlineEnv) string {
	t.Helper()
	it, err := e.off.Issue(t.Context(), "OATH1", "test", machine.OfflineOptions{Count: 10, Rounds: 5})
	if err != nil {
		t.Fatal(err)
	}
	return it.RefillToken
}

func TestOfflineRefill(t *testing.T) {
	opts := machine.OfflineOptions{Count: 10, Rounds: 5}
	t.Run("success", func(t *testing.T) {
		e := newOfflineEnv(t, false)
		refill := issued(t, e)
		// The client used the values of counters 0..3.
		it, err := e.off.Refill(t.Context(), machine.RefillRequest{Serial: "OATH1", RefillToken: refill, Pass: "test" + rfcOTP(3),
			Attached: true, Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		checkValues(t, it.Response, 10, 14, "test", false, true)
		tk := e.token(t)
		if tk.Count != 14 {
			t.Errorf("counter = %d, want 14", tk.Count)
		}
		if it.RefillToken == refill || !hex80.MatchString(it.RefillToken) || tk.Info[machine.InfoRefillToken] != it.RefillToken {
			t.Errorf("refill token not rotated: %q -> %q (stored %q)", refill, it.RefillToken, tk.Info[machine.InfoRefillToken])
		}
		if it.Serial != "OATH1" {
			t.Errorf("serial = %q", it.Serial)
		}
		// The old refill token is used up.
		_, err = e.off.Refill(t.Context(), machine.RefillRequest{Serial: "OATH1", RefillToken: refill, Pass: "test" + rfcOTP(5),
			Attached: true, Options: opts})
		if !errors.Is(err, machine.ErrRefillRefused) {
			t.Errorf("reused refill token: err = %v", err)
		}
		// The new one works, with a value of the window 4..13.
		it2, err := e.off.Refill(t.Context(), machine.RefillRequest{Serial: "OATH1", RefillToken: it.RefillToken, Pass: "test" + rfcOTP(13),
			Attached: true, Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		checkValues(t, it2.Response, 14, 24, "test", false, false)
	})
	type refusal struct {
		name    string
		prepare func(t *testing.T, e *offlineEnv)
		req     func(refill string) machine.RefillRequest
		want    error
	}
	req := func(serial, refill, pass string, attached bool) machine.RefillRequest {
		return machine.RefillRequest{Serial: serial, RefillToken: refill, Pass: pass, Attached: attached, Options: opts}
	}
	for _, tc := range []refusal{
		{"unknown token", nil, func(r string) machine.RefillRequest { return req("NOPE", r, "test"+rfcOTP(3), true) }, machine.ErrRefillNoToken},
		{"disabled token", func(t *testing.T, e *offlineEnv) {
			if _, err := e.tokens.SetActive(t.Context(), "OATH1", false); err != nil {
				t.Fatal(err)
			}
		}, func(r string) machine.RefillRequest { return req("OATH1", r, "test"+rfcOTP(3), true) }, machine.ErrRefillInvalid},
		{"not attached", nil, func(r string) machine.RefillRequest { return req("OATH1", r, "test"+rfcOTP(3), false) }, machine.ErrRefillRefused},
		{"wrong refill token", nil, func(r string) machine.RefillRequest { return req("OATH1", r[:79]+"x", "test"+rfcOTP(3), true) }, machine.ErrRefillRefused},
		{"empty refill token", nil, func(string) machine.RefillRequest { return req("OATH1", "", "test"+rfcOTP(3), true) }, machine.ErrRefillRefused},
		{"wrong OTP", nil, func(r string) machine.RefillRequest { return req("OATH1", r, "test000000", true) }, machine.ErrRefillWrongOTP},
		{"value not handed out", nil, func(r string) machine.RefillRequest { return req("OATH1", r, "test"+rfcOTP(10), true) }, machine.ErrRefillWrongOTP},
		{"wrong PIN", nil, func(r string) machine.RefillRequest { return req("OATH1", r, "tost"+rfcOTP(3), true) }, machine.ErrRefillWrongOTP},
		{"short password", nil, func(r string) machine.RefillRequest { return req("OATH1", r, "12345", true) }, machine.ErrRefillWrongOTP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newOfflineEnv(t, false)
			refill := issued(t, e)
			if tc.prepare != nil {
				tc.prepare(t, e)
			}
			before := e.token(t)
			_, err := e.off.Refill(t.Context(), tc.req(refill))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			after := e.token(t)
			if after.Count != before.Count || after.Info[machine.InfoRefillToken] != refill {
				t.Errorf("a refused refill changed the token: counter %d -> %d, refill token changed %v",
					before.Count, after.Count, after.Info[machine.InfoRefillToken] != refill)
			}
		})
	}
}

func TestOfflineRefillParallel(t *testing.T) {
	e := newOfflineEnv(t, false)
	refill := issued(t, e)
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var wins []machine.OfflineItem
	var refused, other int
	for range n {
		wg.Go(func() {
			it, err := e.off.Refill(t.Context(), machine.RefillRequest{Serial: "OATH1", RefillToken: refill, Pass: "test" + rfcOTP(5),
				Attached: true, Options: machine.OfflineOptions{Count: 10, Rounds: 5}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins = append(wins, it)
			case errors.Is(err, machine.ErrRefillRefused):
				refused++
			default:
				t.Error(err)
				other++
			}
		})
	}
	wg.Wait()
	if len(wins) != 1 || refused != n-1 {
		t.Fatalf("%d refills succeeded and %d were refused; want exactly 1 success", len(wins), refused)
	}
	tk := e.token(t)
	if tk.Count != 16 || tk.Info[machine.InfoRefillToken] != wins[0].RefillToken {
		t.Errorf("counter %d (want 16), stored refill token is the winner's: %v", tk.Count, tk.Info[machine.InfoRefillToken] == wins[0].RefillToken)
	}
	checkValues(t, wins[0].Response, 10, 16, "test", false, false)
}
