package token_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

var rfc4226 = []string{"755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"}

func TestHOTPKnownAnswersInOrderAndReplay(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tok, detail := e.initToken(t, "hotp", "OATH0001", token.Params{"otpkey": rfcKey, "pin": "pin"})
	if tok.Count != 0 || tok.OTPLen != 6 || tok.CountWindow != 10 || tok.MaxFail != 10 || tok.SyncWindow != 1000 || !tok.Active {
		t.Fatalf("defaults: %+v", tok)
	}
	g := detail["googleurl"].(map[string]any)["value"]
	if g != "otpauth://hotp/OATH0001?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&counter=1&digits=6&creator=privacyidea&issuer=authsrv&serial=OATH0001" {
		t.Fatalf("googleurl = %v", g)
	}
	if v := detail["otpkey"].(map[string]any)["value"]; v != "seed://"+rfcKey {
		t.Fatalf("otpkey = %v", v)
	}
	for i, v := range rfc4226 {
		r, err := e.svc.CheckOTP(ctx, "OATH0001", v, nil)
		if err != nil || !r.OK {
			t.Fatalf("counter %d: %+v %v", i, r, err)
		}
		if r.Token.Count != uint64(i+1) {
			t.Fatalf("count after %d = %d", i, r.Token.Count)
		}
		r, err = e.svc.CheckOTP(ctx, "OATH0001", v, nil)
		if err != nil || r.OK || r.Message != token.MsgReplayed {
			t.Fatalf("replay %d accepted: %+v %v", i, r, err)
		}
	}
	got, _ := e.svc.Get(ctx, "OATH0001")
	if got.Info[token.InfoCountAuthSuccess] != "10" || got.Info[token.InfoCountAuth] != "20" || got.FailCount != 1 {
		// each replay counts as a failure; each success resets the count
		t.Fatalf("counters: success=%s failcount=%d", got.Info[token.InfoCountAuthSuccess], got.FailCount)
	}
	if ok, err := e.svc.CheckPIN(ctx, got, "pin"); err != nil || !ok {
		t.Fatalf("pin: %v %v", ok, err)
	}
	if ok, _ := e.svc.CheckPIN(ctx, got, "pim"); ok {
		t.Fatal("wrong pin accepted")
	}
	if strings.Contains(got.PIN, "pin$") || !strings.HasPrefix(got.PIN, "$argon2id$") {
		t.Fatalf("pin not an argon2id hash: %q", got.PIN)
	}
}

func TestHOTPWindowAndSkip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.initToken(t, "hotp", "W1", token.Params{"otpkey": rfcKey})
	if r, _ := e.svc.CheckOTP(ctx, "W1", rfc4226[9], nil); !r.OK { // last value of the window
		t.Fatal("counter 9 within window refused")
	}
	if r, _ := e.svc.CheckOTP(ctx, "W1", rfc4226[3], nil); r.OK {
		t.Fatal("older value accepted after skipping ahead")
	}
	e.initToken(t, "hotp", "W2", token.Params{"otpkey": rfcKey, "otplen": "8"})
	if r, _ := e.svc.CheckOTP(ctx, "W2", "94287082", nil); !r.OK {
		t.Fatal("8-digit counter 1 refused")
	}
	if r, _ := e.svc.CheckOTP(ctx, "W2", "287082", nil); r.OK {
		t.Fatal("6-digit value accepted by 8-digit token")
	}
}

func TestTOTPKnownAnswers(t *testing.T) {
	keys := map[string]string{
		"sha1":   "3132333435363738393031323334353637383930",
		"sha256": "3132333435363738393031323334353637383930313233343536373839303132",
		"sha512": "31323334353637383930313233343536373839303132333435363738393031323334353637383930313233343536373839303132333435363738393031323334",
	}
	vectors := []struct {
		unix                 int64
		sha1, sha256, sha512 string
	}{
		{59, "94287082", "46119246", "90693936"},
		{1111111109, "07081804", "68084774", "25091201"},
		{1111111111, "14050471", "67062674", "99943326"},
		{1234567890, "89005924", "91819424", "93441116"},
		{2000000000, "69279037", "90698825", "38618901"},
		{20000000000, "65353130", "77737706", "47863826"},
	}
	ctx := context.Background()
	for _, digits := range []int{8, 6} {
		for _, h := range []string{"sha1", "sha256", "sha512"} {
			for i, v := range vectors {
				e := newEnv(t)
				serial := "T" + h
				e.initToken(t, "totp", serial, token.Params{"otpkey": keys[h], "hashlib": h, "otplen": map[int]string{6: "6", 8: "8"}[digits], "timeStep": "30"})
				e.clock.Set(time.Unix(v.unix, 0))
				want := map[string]string{"sha1": v.sha1, "sha256": v.sha256, "sha512": v.sha512}[h]
				want = want[8-digits:]
				r, err := e.svc.CheckOTP(ctx, serial, want, nil)
				if err != nil || !r.OK {
					t.Fatalf("%s digits=%d vector %d: %+v %v", h, digits, i, r, err)
				}
				r, _ = e.svc.CheckOTP(ctx, serial, want, nil)
				if r.OK || r.Message != token.MsgReplayed {
					t.Fatalf("%s vector %d replay: %+v", h, i, r)
				}
			}
		}
	}
}

func TestTOTPWindowShiftAndLastUsed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, detail := e.initToken(t, "totp", "TS", token.Params{"otpkey": rfcKey, "otplen": "8", "timeStep": "30"})
	if g := detail["googleurl"].(map[string]any)["value"]; g != "otpauth://totp/TS?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&period=30&digits=8&creator=privacyidea&issuer=authsrv&serial=TS" {
		t.Fatalf("googleurl %v", g)
	}
	if o := detail["oathurl"].(map[string]any)["value"]; o != "oathtoken:///addToken?name=TS&lockdown=true&key="+rfcKey+"&timeBased=true" {
		t.Fatalf("oathurl %v", o)
	}
	// The token clock is 150 s ahead: the value of t+150 is accepted and
	// re-centres the window.
	e.clock.Set(time.Unix(1111111111-150, 0))
	r, _ := e.svc.CheckOTP(ctx, "TS", "14050471", nil)
	if !r.OK || r.Token.Info[token.InfoTimeShift] == "0" {
		t.Fatalf("drifted value: %+v", r)
	}
	// 6 steps ahead is outside the default 180 s window from the new centre? No:
	// the shift moved the centre; the value of an older step is refused.
	if r, _ := e.svc.CheckOTP(ctx, "TS", "07081804", nil); r.OK {
		t.Fatal("older step accepted after a newer one")
	}
}

func TestParallelSameOTPExactlyOneSuccess(t *testing.T) {
	for _, typ := range []string{"hotp", "totp"} {
		t.Run(typ, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.initToken(t, typ, "RACE", token.Params{"otpkey": rfcKey, "otplen": "8", "timeStep": "30"})
			e.clock.Set(time.Unix(59, 0))
			var ok, fail atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r, err := e.svc.CheckOTP(ctx, "RACE", "94287082", nil)
					if err != nil {
						t.Error(err)
						return
					}
					if r.OK {
						ok.Add(1)
					} else {
						fail.Add(1)
					}
				}()
			}
			close(start)
			wg.Wait()
			if ok.Load() != 1 || fail.Load() != 63 {
				t.Fatalf("successes = %d, failures = %d; want exactly 1 success", ok.Load(), fail.Load())
			}
		})
	}
}

func TestInitBadInputStoresNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cases := []struct {
		typ, serial string
		p           token.Params
		num         int
	}{
		{"nosuch", "X1", token.Params{"otpkey": rfcKey}, 1610},
		{"hotp", "bad serial!", token.Params{"otpkey": rfcKey}, 905},
		{"hotp", "X2", token.Params{"otpkey": "zz12"}, 905},
		{"hotp", "X3", token.Params{"otpkey": rfcKey, "otplen": "5"}, 905},
		{"hotp", "X4", token.Params{"otpkey": rfcKey, "otplen": "abc"}, 905},
		{"hotp", "X5", token.Params{"otpkey": rfcKey, "hashlib": "md5"}, 905},
		{"totp", "X6", token.Params{"otpkey": rfcKey, "timeStep": "45"}, 905},
		{"hotp", "X7", token.Params{"otpkey": "GEZDGNBVGY3TQOJQ", "otpkeyformat": "base32check"}, 905},
		{"hotp", "X8", token.Params{"otpkey": rfcKey, "validity_period_end": "tomorrow"}, 905},
	}
	for _, c := range cases {
		_, _, err := e.svc.Init(ctx, token.InitRequest{Type: c.typ, Serial: c.serial, Params: c.p})
		var ae *apierr.Error
		if !errors.As(err, &ae) || ae.Number() != c.num {
			t.Errorf("%s %s %v: err = %v, want number %d", c.typ, c.serial, c.p, err, c.num)
			continue
		}
		if strings.Contains(err.Error(), rfcKey) {
			t.Errorf("error reveals the key: %v", err)
		}
		if ok, _ := e.svc.Exists(ctx, c.serial); ok {
			t.Errorf("%s stored despite the error", c.serial)
		}
	}
	e.initToken(t, "hotp", "SAME", token.Params{"otpkey": rfcKey})
	_, _, err := e.svc.Init(ctx, token.InitRequest{Type: "totp", Serial: "SAME", Params: token.Params{"otpkey": rfcKey}})
	if !apierr.Is(err, apierr.TokenAdmin) || !strings.Contains(err.Error(), "already exists with type hotp") {
		t.Fatalf("type change: %v", err)
	}
}

func TestGeneratedSerialsAndKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range 3 {
		tok, detail, err := e.svc.Init(ctx, token.InitRequest{Type: "hotp", Params: token.Params{"genkey": "1", "hashlib": "sha256"}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok.Serial, "OATH000"+string(rune('0'+i))) || len(tok.Serial) != 12 || seen[tok.Serial] {
			t.Fatalf("serial %q (#%d)", tok.Serial, i)
		}
		seen[tok.Serial] = true
		if v := detail["otpkey"].(map[string]any)["value"].(string); len(v) != len("seed://")+64 {
			t.Fatalf("sha256 default key size: %q", v)
		}
	}
	tok, _, err := e.svc.Init(ctx, token.InitRequest{Type: "totp", Params: token.Params{}})
	if err != nil || !strings.HasPrefix(tok.Serial, "TOTP0000") {
		t.Fatalf("totp without key: %v %v", tok, err)
	}
}

func TestReinitSameTypeResetsCounters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.initToken(t, "hotp", "RE", token.Params{"otpkey": rfcKey})
	e.svc.CheckOTP(ctx, "RE", rfc4226[0], nil)
	e.svc.CheckOTP(ctx, "RE", "000000", nil)
	tok, _ := e.svc.Get(ctx, "RE")
	if tok.Count != 1 || tok.FailCount != 1 {
		t.Fatalf("before: %+v", tok)
	}
	e.initToken(t, "hotp", "RE", token.Params{"otpkey": rfcKey})
	tok, _ = e.svc.Get(ctx, "RE")
	if tok.Count != 0 || tok.FailCount != 0 || tok.ID != 1 {
		t.Fatalf("after re-init: %+v", tok)
	}
}

func TestCorruptOrForeignSeedNeverUsable(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.initToken(t, "hotp", "C1", token.Params{"otpkey": rfcKey})
	// Flip a byte of the sealed seed in the store.
	err := e.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket("tokens")
		rec, err := token.DecodeRecord("C1", b.Get([]byte("C1")))
		if err != nil {
			return err
		}
		s := rec.Sealed["otpkey"]
		s[len(s)-3] ^= 0x01
		return b.Put([]byte("C1"), token.EncodeRecord(rec))
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.svc.CheckOTP(ctx, "C1", rfc4226[0], nil)
	if r.OK {
		t.Fatal("corrupt seed accepted an OTP")
	}
	_ = err
	// The same store read with another enckey.
	e2 := newEnv(t)
	e2.initToken(t, "hotp", "C2", token.Params{"otpkey": rfcKey})
	other := token.New(token.Config{Store: e2.st, Sealer: otherSealer(t), Hasher: nil, Now: e2.clock.Now})
	r, _ = other.CheckOTP(ctx, "C2", rfc4226[0], nil)
	if r.OK {
		t.Fatal("seed opened with a foreign key")
	}
}

func TestFailcounterMaxAndClearTimeout(t *testing.T) {
	e := newEnv(t, func(c *token.Config) { c.Settings.FailcounterClearTime = 10 * time.Minute })
	ctx := context.Background()
	e.initToken(t, "hotp", "F1", token.Params{"otpkey": rfcKey})
	if err := e.svc.SetFields(ctx, "F1", token.Fields{MaxFail: ptr(3)}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		e.svc.CheckOTP(ctx, "F1", "000000", nil)
	}
	tok, _ := e.svc.Get(ctx, "F1")
	if tok.FailCount != 3 || tok.Info[token.InfoFailcounterExceed] == "" {
		t.Fatalf("failcount %d info %v", tok.FailCount, tok.Info)
	}
	if r, _ := e.svc.CheckOTP(ctx, "F1", rfc4226[0], nil); r.OK || r.Message != token.MsgFailcounter {
		t.Fatalf("blocked token: %+v", r)
	}
	e.clock.Add(11 * time.Minute)
	if r, _ := e.svc.CheckOTP(ctx, "F1", "111111", nil); r.OK {
		t.Fatal("wrong otp accepted")
	}
	tok, _ = e.svc.Get(ctx, "F1")
	if tok.FailCount != 1 {
		t.Fatalf("after clear timeout and one wrong attempt: failcount %d", tok.FailCount)
	}
	if r, _ := e.svc.CheckOTP(ctx, "F1", rfc4226[0], nil); !r.OK {
		t.Fatalf("after clear: %+v", r)
	}
}

func TestStateChecks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.initToken(t, "hotp", "S1", token.Params{"otpkey": rfcKey, "validity_period_end": "2026-11-01T00:00+0000"})
	if r, _ := e.svc.CheckOTP(ctx, "S1", rfc4226[0], nil); r.OK || r.Message != token.MsgValidity {
		t.Fatalf("expired: %+v", r)
	}
	e.initToken(t, "hotp", "S2", token.Params{"otpkey": rfcKey})
	if ch, _ := e.svc.SetActive(ctx, "S2", false); !ch {
		t.Fatal("disable did not change")
	}
	if r, _ := e.svc.CheckOTP(ctx, "S2", rfc4226[0], nil); r.OK || r.Message != token.MsgDisabled {
		t.Fatalf("disabled: %+v", r)
	}
	e.svc.SetActive(ctx, "S2", true)
	if r, _ := e.svc.CheckOTP(ctx, "S2", rfc4226[0], nil); !r.OK {
		t.Fatalf("enabled: %+v", r)
	}
	if err := e.svc.Revoke(ctx, "S2"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetActive(ctx, "S2", true); !errors.Is(err, token.ErrLocked) {
		t.Fatalf("enable revoked: %v", err)
	}
	if r, _ := e.svc.CheckOTP(ctx, "S2", rfc4226[1], nil); r.OK {
		t.Fatal("revoked token accepted")
	}
	e.initToken(t, "hotp", "S3", token.Params{"otpkey": rfcKey})
	e.svc.SetFields(ctx, "S3", token.Fields{CountAuthSuccessMax: ptr(1)})
	e.svc.CheckOTP(ctx, "S3", rfc4226[0], nil)
	if r, _ := e.svc.CheckOTP(ctx, "S3", rfc4226[1], nil); r.OK || r.Message != token.MsgAuthCounter {
		t.Fatalf("count_auth_success_max: %+v", r)
	}
}

func TestAssignRealmsListAndRealmCheck(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice := user.User{Login: "alice", Realm: "realm1", Resolver: "r1", UID: "1000"}
	for _, s := range []string{"A1", "A2", "A3"} {
		e.initToken(t, "hotp", s, token.Params{"otpkey": rfcKey})
	}
	pin := "1234"
	if err := e.svc.Assign(ctx, "A1", alice, &pin, false, false); err != nil {
		t.Fatal(err)
	}
	err := e.svc.Assign(ctx, "A1", alice, nil, false, false)
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Number() != 1103 || !strings.Contains(err.Error(), "<alice.r1@realm1>") {
		t.Fatalf("second assign: %v", err)
	}
	if err := e.svc.Assign(ctx, "A2", alice, nil, false, false); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.SetRealms(ctx, "A3", []string{"realm2", "Realm3"}); err != nil {
		t.Fatal(err)
	}
	toks, err := e.svc.ByOwner(ctx, alice)
	if err != nil || len(toks) != 2 || toks[0].Serial != "A1" || toks[0].Realms[0] != "realm1" {
		t.Fatalf("by owner: %v %v", toks, err)
	}
	var has1, has2 bool
	e.st.View(ctx, func(tx store.Tx) error {
		has1, _ = token.RealmHasOwners(tx, "realm1")
		has2, _ = token.RealmHasOwners(tx, "realm2")
		return nil
	})
	if !has1 || has2 {
		t.Fatalf("realm owners: realm1=%v realm2=%v", has1, has2)
	}
	yes := true
	p, err := e.svc.List(ctx, token.Filter{Assigned: &yes}, "serial", true, 1, 1)
	if err != nil || p.Count != 2 || len(p.Tokens) != 1 || p.Tokens[0].Serial != "A2" || p.Next != 2 || p.Prev != 0 {
		t.Fatalf("page: %+v %v", p, err)
	}
	p, _ = e.svc.List(ctx, token.Filter{TokenRealm: "realm3"}, "", false, 1, 15)
	if p.Count != 1 || p.Tokens[0].Serial != "A3" {
		t.Fatalf("tokenrealm filter: %+v", p)
	}
	p, _ = e.svc.List(ctx, token.Filter{Visible: []string{"realm2"}}, "", false, 1, 15)
	if p.Count != 1 {
		t.Fatalf("visible filter: %+v", p)
	}
	p, _ = e.svc.List(ctx, token.Filter{Serial: "A*"}, "", false, 2, 2)
	if p.Count != 3 || len(p.Tokens) != 1 || p.Prev != 1 || p.Next != 0 {
		t.Fatalf("page 2: %+v", p)
	}
	if err := e.svc.Unassign(ctx, "A1"); err != nil {
		t.Fatal(err)
	}
	tok, _ := e.svc.Get(ctx, "A1")
	if tok.Assigned() || tok.PIN != "" || len(tok.Realms) != 1 {
		t.Fatalf("unassigned: %+v", tok)
	}
	if err := e.svc.Delete(ctx, "A2"); err != nil {
		t.Fatal(err)
	}
	e.st.View(ctx, func(tx store.Tx) error { has1, _ = token.RealmHasOwners(tx, "realm1"); return nil })
	if has1 {
		t.Fatal("owner index left behind")
	}
	if err := e.svc.Delete(ctx, "A2"); !apierr.Is(err, apierr.ResourceNotFound) || err.Error() != "No token found for serials: A2" {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestResyncAndGetSerial(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.initToken(t, "hotp", "RS", token.Params{"otpkey": rfcKey})
	// values 20 and 21 are outside the window of 10 (make them with the API)
	ok, err := e.svc.Resync(ctx, "RS", rfc4226[5], rfc4226[7])
	if err != nil || ok {
		t.Fatalf("non-consecutive resync: %v %v", ok, err)
	}
	ok, err = e.svc.Resync(ctx, "RS", rfc4226[5], rfc4226[6])
	if err != nil || !ok {
		t.Fatalf("resync: %v %v", ok, err)
	}
	tok, _ := e.svc.Get(ctx, "RS")
	if tok.Count != 7 {
		t.Fatalf("count after resync = %d", tok.Count)
	}
	if r, _ := e.svc.CheckOTP(ctx, "RS", rfc4226[6], nil); r.OK {
		t.Fatal("value used in resync accepted again")
	}
	serial, n, err := e.svc.GetSerial(ctx, rfc4226[8], token.GetSerialFilter{})
	if err != nil || serial != "RS" || n != 1 {
		t.Fatalf("getserial: %q %d %v", serial, n, err)
	}
	if tok2, _ := e.svc.Get(ctx, "RS"); tok2.Count != 7 {
		t.Fatal("getserial changed the counter")
	}
}

func TestTwoStepEnrollment(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tok, detail := e.initToken(t, "hotp", "TWO", token.Params{"genkey": "1", "2stepinit": "1"})
	if tok.RolloutState != token.StateClientWait || tok.Active || detail["2step_salt"] != 8 || detail["2step_difficulty"] != 10000 {
		t.Fatalf("first step: %+v %v", tok, detail)
	}
	if r, _ := e.svc.CheckOTP(ctx, "TWO", "123456", nil); r.Message != token.MsgNotEnrolled {
		t.Fatalf("clientwait token usable: %+v", r)
	}
	_, _, err := e.svc.Init(ctx, token.InitRequest{Type: "hotp", Serial: "TWO", Params: token.Params{"otpkey": "0102"}})
	if !apierr.Is(err, apierr.Parameter) {
		t.Fatalf("short client part: %v", err)
	}
	tok, _ = e.initToken(t, "hotp", "TWO", token.Params{"otpkey": "0102030405060708"})
	if tok.RolloutState != token.StateEnrolled || !tok.Active {
		t.Fatalf("second step: %+v", tok)
	}
}

func TestVerifyEnrollment(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tok, detail, err := e.svc.Init(ctx, token.InitRequest{Type: "hotp", Serial: "VE", Params: token.Params{"otpkey": rfcKey}, Verify: true})
	if err != nil || tok.RolloutState != token.StateVerify || detail["verify"] == nil {
		t.Fatalf("first call: %+v %v %v", tok, detail, err)
	}
	if _, _, err := e.svc.Init(ctx, token.InitRequest{Type: "hotp", Serial: "VE", Params: token.Params{"verify": "111111"}}); !errors.Is(err, token.ErrVerifyFailed) {
		t.Fatalf("wrong verify: %v", err)
	}
	tok, _, err = e.svc.Init(ctx, token.InitRequest{Type: "hotp", Serial: "VE", Params: token.Params{"verify": rfc4226[0]}})
	if err != nil || tok.RolloutState != token.StateEnrolled || tok.Count != 1 {
		t.Fatalf("verify: %+v %v", tok, err)
	}
}

func TestChallengeStore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tok, _ := e.initToken(t, "hotp", "CH", token.Params{"otpkey": rfcKey})
	txid, err := e.svc.NewTransactionID()
	if err != nil || len(txid) != 20 {
		t.Fatalf("txid %q %v", txid, err)
	}
	res, ch, err := e.svc.CreateChallenge(ctx, tok, txid, "", nil, nil)
	if err != nil || res.Message != "please enter otp: " || ch.TransactionID != txid {
		t.Fatalf("challenge: %+v %+v %v", res, ch, err)
	}
	list, _ := e.svc.Challenges(ctx, token.ChallengeFilter{TransactionID: txid})
	if len(list) != 1 || list[0].Serial != "CH" {
		t.Fatalf("list: %+v", list)
	}
	if err := e.svc.ChallengeAnswered(ctx, txid, "CH", false); err != nil {
		t.Fatal(err)
	}
	list, _ = e.svc.Challenges(ctx, token.ChallengeFilter{Serial: "CH"})
	if list[0].ReceivedCount != 1 || !list[0].OTPReceived {
		t.Fatalf("answered: %+v", list[0])
	}
	e.clock.Add(121 * time.Second)
	if list, _ = e.svc.Challenges(ctx, token.ChallengeFilter{Serial: "CH"}); len(list) != 0 {
		t.Fatal("expired challenge listed")
	}
	if n, _ := e.svc.CleanupChallenges(ctx); n != 1 {
		t.Fatalf("cleanup removed %d", n)
	}
	_, _, _ = e.svc.CreateChallenge(ctx, tok, txid, "", nil, nil)
	if n, _ := e.svc.DeleteTransaction(ctx, txid); n != 1 {
		t.Fatalf("delete transaction: %d", n)
	}
}

func ptr[T any](v T) *T { return &v }
