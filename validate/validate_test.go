package validate_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/passwd"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
	"github.com/authsrv/authsrv/validate"
)

// rfcKey is the RFC 4226 test secret; rfcHOTP its first ten values.
const rfcKey = "3132333435363738393031323334353637383930"

var rfcHOTP = []string{"755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"}

// Other seeds for tokens that must not match the RFC values.
const (
	keyB = "4142434445464748494a4b4c4d4e4f5051525354"
	keyC = "6162636465666768696a6b6c6d6e6f7071727374"
)

var (
	cheap = secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}
	start = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// env is a Validator wired by hand on one test store: two passwd-file
// user stores, realm1 (pw1, the default realm) and realm2 (pw2).
//
//	pw1: alice/alice-pw, bob/bob-pw, carol/carol-pw
//	pw2: alice/alice2-pw, dave/dave-pw, mail@host/mail-pw
type env struct {
	v      *validate.Validator
	tokens *token.Service
	realms *realm.Service
	pol    *policy.Service
	clk    *clock
	st     store.Store
	sealer *secret.Sealer
	hasher *secret.Hasher
	audit  *audit.Log
}

func newEnv(t *testing.T, set token.Settings) *env {
	t.Helper()
	ctx := t.Context()
	st := storetest.Open(t)
	clk := &clock{t: start}
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	h, err := secret.NewHasher(secret.HasherConfig{Params: cheap})
	if err != nil {
		t.Fatal(err)
	}
	res := resolver.New(st, sealer, resolver.Registry{passwd.TypeName: passwd.Type()}, zerolog.Nop(), clk.Now)
	t.Cleanup(func() { _ = res.Close() })
	dir := t.TempDir()
	for name, users := range map[string][][2]string{
		"pw1": {{"alice", "alice-pw"}, {"bob", "bob-pw"}, {"carol", "carol-pw"}},
		"pw2": {{"alice", "alice2-pw"}, {"dave", "dave-pw"}, {"mail@host", "mail-pw"}},
	} {
		path := filepath.Join(dir, name)
		writePasswd(t, path, users)
		if _, err := res.Save(ctx, name, map[string]string{"type": passwd.TypeName, "fileName": path}); err != nil {
			t.Fatalf("resolver %s: %v", name, err)
		}
	}
	realms := realm.New(realm.Config{
		Store: st, Resolvers: res, Attrs: user.NewAttributes(st), LocalNode: "node1",
		NodeExists: func(_ context.Context, id string) (bool, error) { return id == "node1", nil },
	})
	for name, r := range map[string]string{"realm1": "pw1", "realm2": "pw2"} {
		if _, failed, err := realms.Set(ctx, name, []realm.Entry{{Name: r}}); err != nil || len(failed) > 0 {
			t.Fatalf("realm %s: %v %v", name, failed, err)
		}
	}
	if _, err := realms.SetDefault(ctx, "realm1"); err != nil {
		t.Fatal(err)
	}
	defs := policy.NewDefs()
	if err := defs.Add(policy.Builtin()...); err != nil {
		t.Fatal(err)
	}
	pol := policy.New(policy.Config{Store: st, Defs: defs, Now: clk.Now, NodeName: "node1", RealmExists: realms.Exists,
		ResolverExists: func(ctx context.Context, n string) bool { _, ok, err := res.Get(ctx, n); return ok && err == nil }})
	tokens := token.New(token.Config{Store: st, Sealer: sealer, Hasher: h, Settings: set, Now: clk.Now})
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	al, err := audit.New(audit.Config{Store: st, Key: key, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	v := validate.New(validate.Config{Tokens: tokens, Realms: realms, Policies: pol, Resolvers: res, Now: clk.Now, Audit: al, NodeName: "node1"})
	return &env{v: v, tokens: tokens, realms: realms, pol: pol, clk: clk, st: st, sealer: sealer, hasher: h, audit: al}
}

// scopedPolicy stores an active policy of any scope.
func (e *env) scopedPolicy(t *testing.T, name, scope, action string) {
	t.Helper()
	if _, err := e.pol.Set(t.Context(), policy.Policy{Name: name, Scope: scope, Action: action, Active: true, Priority: 1}); err != nil {
		t.Fatalf("policy %s: %v", name, err)
	}
}

// parallelAccepted sends n copies of r at once and counts the successes.
func (e *env) parallelAccepted(t *testing.T, n int, r validate.Request) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			res, err := e.v.Check(t.Context(), r)
			if err != nil {
				t.Errorf("Check: %v", err)
				return
			}
			if res.Value {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	return ok
}

// writePasswd writes a passwd file with bcrypt hashes (cost 4).
func writePasswd(t *testing.T, path string, users [][2]string) {
	t.Helper()
	var b strings.Builder
	for i, u := range users {
		hash, err := bcrypt.GenerateFromPassword([]byte(u[1]), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%s:%d:%d:%s Test,,,,%s@example.org:/home/%s:/bin/sh\n", u[0], hash, 1001+i, 1001+i, u[0], u[0], u[0])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// enroll creates a token of typ for login@realm (no owner when login is
// ""), with the given seed and PIN.
func (e *env) enroll(t *testing.T, typ, serial, login, realmName, key, pin string, extra ...string) *token.Token {
	t.Helper()
	p := token.Params{"otpkey": key, "pin": pin}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i]] = extra[i+1]
	}
	req := token.InitRequest{Type: typ, Serial: serial, Params: p}
	if login != "" {
		u, _, err := e.realms.Resolve(t.Context(), login, realmName)
		if err != nil {
			t.Fatalf("resolve %s@%s: %v", login, realmName, err)
		}
		req.Owner = &u
	}
	tok, _, err := e.tokens.Init(t.Context(), req)
	if err != nil {
		t.Fatalf("init %s: %v", serial, err)
	}
	return tok
}

// policy stores an active authentication policy.
func (e *env) policy(t *testing.T, name, action string, realms ...string) {
	t.Helper()
	if _, err := e.pol.Set(t.Context(), policy.Policy{Name: name, Scope: policy.ScopeAuthentication, Action: action, Realm: realms, Active: true, Priority: 1}); err != nil {
		t.Fatalf("policy %s: %v", name, err)
	}
}

func (e *env) check(t *testing.T, r validate.Request) validate.Response {
	t.Helper()
	res, err := e.v.Check(t.Context(), r)
	if err != nil {
		t.Fatalf("Check(%+v): %v", redacted(r), err)
	}
	return res
}

// redacted hides the password of a request in failure output.
func redacted(r validate.Request) validate.Request {
	r.Pass = fmt.Sprintf("<%d chars>", len(r.Pass))
	return r
}

func (e *env) get(t *testing.T, serial string) *token.Token {
	t.Helper()
	tok, err := e.tokens.Get(t.Context(), serial)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (e *env) setMaxFail(t *testing.T, serial string, n int) {
	t.Helper()
	if err := e.tokens.SetFields(t.Context(), serial, token.Fields{MaxFail: &n}); err != nil {
		t.Fatal(err)
	}
}

// want checks value and detail.message of a decision.
func want(t *testing.T, res validate.Response, value bool, message string) {
	t.Helper()
	if res.Value != value || res.Message != message {
		t.Fatalf("got value %v message %q (detail %+v), want %v %q", res.Value, res.Message, res, value, message)
	}
}

// wantErr checks an error's privacyIDEA number and message text.
func wantErr(t *testing.T, err error, number int, text string) {
	t.Helper()
	ae, ok := errors.AsType[*apierr.Error](err)
	if !ok {
		t.Fatalf("error %v (%T), want an apierr with number %d", err, err, number)
	}
	if ae.Number() != number || ae.Error() != text {
		t.Fatalf("error %d %q, want %d %q", ae.Number(), ae.Error(), number, text)
	}
}

func wantFail(t *testing.T, e *env, serial string, n int) {
	t.Helper()
	if fc := e.get(t, serial).FailCount; fc != n {
		t.Fatalf("%s failcount %d, want %d", serial, fc, n)
	}
}

func TestRequestErrors(t *testing.T) {
	e := newEnv(t, token.Settings{})
	for _, tc := range []struct {
		name   string
		r      validate.Request
		number int
		text   string
	}{
		{"no target", validate.Request{Pass: "x"}, 905, "You need to specify a serial, user or credential_id."},
		{"star in serial", validate.Request{Serial: "OATH*", Pass: "x"}, 905, "Invalid serial number."},
		{"percent in user", validate.Request{User: "al%ice", Pass: "x"}, 905, "Invalid user."},
		{"unknown user", validate.Request{User: "eve", Pass: "x"}, 904, "User <eve@realm1> does not exist."},
		{"unknown user in realm2", validate.Request{User: "bob", Realm: "realm2", Pass: "x"}, 904, "User <bob@realm2> does not exist."},
		{"unknown serial", validate.Request{Serial: "NOSUCH", Pass: "x"}, 601, "No token found for serials: NOSUCH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.v.Check(t.Context(), tc.r)
			wantErr(t, err, tc.number, tc.text)
		})
	}
}

func TestUserAndSerialPath(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")
	e.enroll(t, "hotp", "FREE", "", "", keyB, "")

	res := e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: "pin" + rfcHOTP[0]})
	want(t, res, true, "matching 1 tokens")
	if res.Serial != "H1" || res.Type != "hotp" || res.OTPLen != 6 {
		t.Errorf("detail %v", res)
	}
	if res.User.Login != "alice" || res.User.Realm != "realm1" || res.User.Resolver != "pw1" || res.User.UID == "" {
		t.Errorf("user %+v", res.User)
	}
	if c := e.get(t, "H1").Count; c != 1 {
		t.Errorf("count %d after counter 0", c)
	}

	// The serial path: the token's owner is the user; the PIN is checked.
	res = e.check(t, validate.Request{Serial: "H1", Pass: "pin" + rfcHOTP[1]})
	want(t, res, true, "matching 1 tokens")
	if res.User.Login != "alice" || res.User.Resolver != "pw1" {
		t.Errorf("serial path user %+v", res.User)
	}
	want(t, e.check(t, validate.Request{Serial: "H1", Pass: "nip" + rfcHOTP[2]}), false, "wrong otp pin")
	// user and serial together: the serial must be the user's.
	want(t, e.check(t, validate.Request{User: "alice", Realm: "realm1", Serial: "H1", Pass: "pin" + rfcHOTP[2]}), true, "matching 1 tokens")
	_, err := e.v.Check(t.Context(), validate.Request{User: "bob", Realm: "realm1", Serial: "H1", Pass: "pin" + rfcHOTP[3]})
	wantErr(t, err, 905, "Given serial does not belong to given user!")
	_, err = e.v.Check(t.Context(), validate.Request{User: "alice", Realm: "realm2", Serial: "H1", Pass: "pin" + rfcHOTP[3]})
	wantErr(t, err, 905, "Given serial does not belong to given user!")
	if c := e.get(t, "H1").Count; c != 3 {
		t.Errorf("count %d: a refused request moved the counter", c)
	}
	// An unassigned token on the serial path has no user.
	res = e.check(t, validate.Request{Serial: "FREE", Pass: "x" + "000000"})
	want(t, res, false, "wrong otp pin")
	if res.User.Found() {
		t.Errorf("unassigned token has user %+v", res.User)
	}
}

func TestRealmSplitAndDefault(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "R1", "alice", "realm1", rfcKey, "one")
	e.enroll(t, "hotp", "R2", "alice", "realm2", rfcKey, "two")
	e.enroll(t, "hotp", "M2", "mail@host", "realm2", rfcKey, "m")

	for i, tc := range []struct {
		user, realm, pin, serial, resolver string
	}{
		{"alice", "", "one", "R1", "pw1"},          // default realm
		{"alice@realm1", "", "one", "R1", "pw1"},   // split
		{"alice@realm2", "", "two", "R2", "pw2"},   // split to the other realm
		{"alice@REALM2", "", "two", "R2", "pw2"},   // realm names are lower-cased
		{"alice", "realm2", "two", "R2", "pw2"},    // explicit realm
		{"mail@host@realm2", "", "m", "M2", "pw2"}, // split at the last @
		{"mail@host", "realm2", "m", "M2", "pw2"},  // an @ that is no realm stays in the login
		{"realm2\\alice", "", "two", "R2", "pw2"},  // backslash form
		{"alice@nosuchrealm", "", "", "", ""},      // not a realm: the whole string is the login
	} {
		t.Run(tc.user+"/"+tc.realm, func(t *testing.T) {
			otp := rfcHOTP[i]
			r := validate.Request{User: tc.user, Realm: tc.realm, Pass: tc.pin + otp}
			if tc.serial == "" {
				_, err := e.v.Check(t.Context(), r)
				wantErr(t, err, 904, "User <alice@nosuchrealm@realm1> does not exist.")
				return
			}
			res := e.check(t, r)
			want(t, res, true, "matching 1 tokens")
			if res.Serial != tc.serial || res.User.Resolver != tc.resolver {
				t.Errorf("serial %v resolver %q, want %s %s", res.Serial, res.User.Resolver, tc.serial, tc.resolver)
			}
		})
	}
	t.Run("explicit realm wins over the split realm", func(t *testing.T) {
		// spec §0: the login is split, then the realm parameter replaces
		// the split realm (privacyIDEA's get_user_from_param).
		r := validate.Request{User: "alice@realm1", Realm: "realm2", Pass: "two" + rfcHOTP[9]}
		res := e.check(t, r)
		want(t, res, true, "matching 1 tokens")
		if res.Serial != "R2" {
			t.Errorf("serial %v", res.Serial)
		}
	})
}

func TestPINOTPSplit(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "S8", "alice", "realm1", rfcKey, "pä 1", "otplen", "8")
	e.enroll(t, "hotp", "S6", "bob", "realm1", rfcKey, "")

	// PIN = all but the last otplen characters (runes, not bytes).
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pä 1" + "94287082"}), true, "matching 1 tokens")
	// The PIN is compared exactly: a prefix or suffix of it is wrong.
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pä " + "65562441"}), false, "wrong otp pin")
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pä 1x" + "65562441"}), false, "wrong otp pin")
	// Shorter than otplen: a PIN mismatch, not a wrong OTP.
	want(t, e.check(t, validate.Request{User: "alice", Pass: "9428708"}), false, "wrong otp pin")
	// An empty PIN: the password is the OTP alone; anything before it is a wrong PIN.
	want(t, e.check(t, validate.Request{User: "bob", Pass: rfcHOTP[0]}), true, "matching 1 tokens")
	want(t, e.check(t, validate.Request{User: "bob", Pass: "x" + rfcHOTP[1]}), false, "wrong otp pin")
	want(t, e.check(t, validate.Request{User: "bob", Pass: ""}), false, "wrong otp pin")
	// A 6-digit OTP with PIN and a wrong OTP: wrong otp value.
	res := e.check(t, validate.Request{User: "alice", Pass: "pä 1" + "00000000"})
	want(t, res, false, "wrong otp value")
	if res.Serial != "S8" || res.OTPLen != 8 {
		t.Errorf("wrong-otp detail %v", res)
	}
}

func TestOTPOnly(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "O1", "alice", "realm1", rfcKey, "pin")

	res := e.check(t, validate.Request{Serial: "O1", Pass: rfcHOTP[0], OTPOnly: true})
	want(t, res, true, "matching 1 tokens")
	// The PIN is not part of the password with otponly.
	want(t, e.check(t, validate.Request{Serial: "O1", Pass: "pin" + rfcHOTP[1], OTPOnly: true}), false, "OTP verification failed.")
	want(t, e.check(t, validate.Request{Serial: "O1", Pass: rfcHOTP[0], OTPOnly: true}), false, "OTP verification failed.")
	want(t, e.check(t, validate.Request{Serial: "O1", Pass: rfcHOTP[1], OTPOnly: true}), true, "matching 1 tokens")
	if c := e.get(t, "O1").Count; c != 2 {
		t.Errorf("count %d", c)
	}
	// otponly works on the serial path only: with a user alone it is ignored.
	want(t, e.check(t, validate.Request{User: "alice", Pass: rfcHOTP[2], OTPOnly: true}), false, "wrong otp pin")
}

func TestOTPPinPolicy(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "A1", "alice", "realm1", rfcKey, "tokpin")
	e.enroll(t, "hotp", "D2", "dave", "realm2", rfcKey, "tokpin")
	e.enroll(t, "hotp", "B1", "bob", "realm1", rfcKey, "tokpin")

	t.Run("tokenpin is the default", func(t *testing.T) {
		want(t, e.check(t, validate.Request{User: "alice", Pass: "tokpin" + rfcHOTP[0]}), true, "matching 1 tokens")
		want(t, e.check(t, validate.Request{User: "alice", Pass: "alice-pw" + rfcHOTP[1]}), false, "wrong otp pin")
	})
	t.Run("userstore", func(t *testing.T) {
		e.policy(t, "pinstore", "otppin=userstore", "realm1")
		want(t, e.check(t, validate.Request{User: "alice", Pass: "tokpin" + rfcHOTP[1]}), false, "wrong otp pin")
		want(t, e.check(t, validate.Request{User: "alice", Pass: "alice-pw" + rfcHOTP[1]}), true, "matching 1 tokens")
		// another user's store password is no good
		want(t, e.check(t, validate.Request{User: "alice", Pass: "bob-pw" + rfcHOTP[2]}), false, "wrong otp pin")
		// realm2 has no such policy: the token PIN still counts there
		want(t, e.check(t, validate.Request{User: "dave", Realm: "realm2", Pass: "tokpin" + rfcHOTP[0]}), true, "matching 1 tokens")
		// the serial path checks the owner's store password as well (spec
		// 5.3: the PIN part is the owner's user store password)
		res := e.check(t, validate.Request{Serial: "B1", Pass: "bob-pw" + rfcHOTP[0]})
		want(t, res, true, "matching 1 tokens")
	})
	t.Run("unowned token", func(t *testing.T) {
		// A token without an owner is matched as privacyIDEA matches it:
		// as a user without a name in its first token realm. realm2 has
		// no otppin policy: the token PIN counts. realm1's userstore
		// policy applies to F1, which has no user whose password could
		// match. A policy without a realm applies to both.
		e.enrollFree(t, "hotp", "F2", rfcKey, "freepin", "realm2")
		e.enrollFree(t, "hotp", "F1", rfcKey, "freepin", "realm1")
		want(t, e.check(t, validate.Request{Serial: "F2", Pass: "freepin" + rfcHOTP[0]}), true, "matching 1 tokens")
		want(t, e.check(t, validate.Request{Serial: "F1", Pass: "freepin" + rfcHOTP[0]}), false, "wrong otp pin")
		e.policy(t, "pinall", "otppin=none")
		defer func() {
			if _, err := e.pol.Delete(t.Context(), "pinall"); err != nil {
				t.Fatal(err)
			}
		}()
		want(t, e.check(t, validate.Request{Serial: "F2", Pass: "freepin" + rfcHOTP[1]}), false, "wrong otp pin")
		want(t, e.check(t, validate.Request{Serial: "F2", Pass: rfcHOTP[1]}), true, "matching 1 tokens")
	})
	t.Run("none", func(t *testing.T) {
		e.policy(t, "pinstore", "otppin=none", "realm1")
		want(t, e.check(t, validate.Request{User: "alice", Pass: rfcHOTP[2]}), true, "matching 1 tokens")
		want(t, e.check(t, validate.Request{User: "alice", Pass: "tokpin" + rfcHOTP[3]}), false, "wrong otp pin")
		want(t, e.check(t, validate.Request{User: "alice", Pass: rfcHOTP[3]}), true, "matching 1 tokens")
	})
}

var txidRe = regexp.MustCompile(`^[0-9]{20}$`)

// trigger sends the PIN alone and returns the transaction id.
func trigger(t *testing.T, e *env, r validate.Request) (string, validate.Response) {
	t.Helper()
	res := e.check(t, r)
	txid := res.TransactionID
	if res.Value || !res.Challenge || !txidRe.MatchString(txid) {
		t.Fatalf("no challenge: %+v", res)
	}
	return txid, res
}

func TestChallengeResponse(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "C1", "alice", "realm1", rfcKey, "pin")

	// Without the challenge_response policy, the PIN alone of an HOTP token
	// is a wrong PIN+OTP.
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin"}), false, "wrong otp pin")
	wantFail(t, e, "C1", 1)
	e.policy(t, "cr", "challenge_response=hotp")

	t.Run("trigger and answer once", func(t *testing.T) {
		txid, res := trigger(t, e, validate.Request{User: "alice", Pass: "pin"})
		want(t, res, false, "please enter otp: ")
		multi := res.Challenges
		if len(multi) != 1 || multi[0].Serial != "C1" || multi[0].ClientMode != "interactive" || multi[0].TransactionID != txid {
			t.Fatalf("multi_challenge %v", res.Challenges)
		}
		chs, err := e.tokens.Challenges(t.Context(), token.ChallengeFilter{TransactionID: txid})
		if err != nil || len(chs) != 1 {
			t.Fatalf("stored challenges %v %v", chs, err)
		}
		// The answer is the OTP alone.
		res = e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: rfcHOTP[0]})
		want(t, res, true, "Found matching challenge")
		if res.Serial != "C1" {
			t.Errorf("answer detail %v", res)
		}
		wantFail(t, e, "C1", 0)
		if chs, _ := e.tokens.Challenges(t.Context(), token.ChallengeFilter{TransactionID: txid}); len(chs) != 0 {
			t.Errorf("%d challenges left after the answer", len(chs))
		}
		// The same answer again: the transaction is gone.
		want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: rfcHOTP[1]}), false, "wrong otp pin")
		wantFail(t, e, "C1", 1)
	})
	t.Run("wrong answer counts, the challenge stays", func(t *testing.T) {
		txid, _ := trigger(t, e, validate.Request{User: "alice", Pass: "pin"})
		before := e.get(t, "C1").FailCount
		res := e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: "000000"})
		want(t, res, false, "Response did not match the challenge.")
		if res.Serial != "C1" || res.Type != "hotp" {
			t.Errorf("detail %v", res)
		}
		wantFail(t, e, "C1", before+1)
		// PIN+OTP is not the answer to a challenge either.
		want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: "pin" + rfcHOTP[1]}), false, "Response did not match the challenge.")
		wantFail(t, e, "C1", before+2)
		chs, _ := e.tokens.Challenges(t.Context(), token.ChallengeFilter{TransactionID: txid})
		if len(chs) != 1 || chs[0].ReceivedCount != 2 {
			t.Fatalf("challenge after two wrong answers %+v", chs)
		}
		want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: rfcHOTP[1]}), true, "Found matching challenge")
		wantFail(t, e, "C1", 0)
	})
	t.Run("expired challenge", func(t *testing.T) {
		txid, _ := trigger(t, e, validate.Request{User: "alice", Pass: "pin"})
		e.clk.Add(121 * time.Second) // default validity 120 s
		count := e.get(t, "C1").Count
		want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: rfcHOTP[2]}), false, "Response did not match the challenge.")
		if c := e.get(t, "C1").Count; c != count {
			t.Errorf("an expired challenge moved the counter %d -> %d", count, c)
		}
		wantFail(t, e, "C1", 1)
	})
	t.Run("valid until just before expiry", func(t *testing.T) {
		txid, _ := trigger(t, e, validate.Request{User: "alice", Pass: "pin"})
		e.clk.Add(119 * time.Second)
		want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: rfcHOTP[2]}), true, "Found matching challenge")
	})
	t.Run("unknown transaction", func(t *testing.T) {
		for _, txid := range []string{"12345678901234567890", "-1", "abc", strings.Repeat("9", 100)} {
			before := e.get(t, "C1").FailCount
			want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: rfcHOTP[3]}), false, "wrong otp pin")
			wantFail(t, e, "C1", before+1)
		}
		if c := e.get(t, "C1").Count; c != 3 {
			t.Errorf("count %d", c)
		}
	})
	t.Run("another user's transaction", func(t *testing.T) {
		e.enroll(t, "hotp", "CB", "bob", "realm1", rfcKey, "bpin")
		txid, _ := trigger(t, e, validate.Request{User: "bob", Pass: "bpin"})
		// alice answers bob's challenge with a value that bob's token would take
		want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: rfcHOTP[0]}), false, "wrong otp pin")
		// bob's challenge is still open and his OTP still unused
		want(t, e.check(t, validate.Request{User: "bob", TransactionID: txid, Pass: rfcHOTP[0]}), true, "Found matching challenge")
	})
	t.Run("disabled token", func(t *testing.T) {
		txid, _ := trigger(t, e, validate.Request{User: "alice", Pass: "pin"})
		if _, err := e.tokens.SetActive(t.Context(), "C1", false); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = e.tokens.SetActive(context.Background(), "C1", true) }()
		res := e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: rfcHOTP[4]})
		if res.Value {
			t.Fatalf("a disabled token answered its challenge: %v", res)
		}
		if c := e.get(t, "C1").Count; c > 4 {
			t.Errorf("disabled token's counter moved to %d", c)
		}
	})
}

func TestTriggerChallenge(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "T1", "alice", "realm1", rfcKey, "pin")
	e.enroll(t, "spass", "SP", "alice", "realm1", "", "pin")
	res, err := e.v.Trigger(t.Context(), validate.Request{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	multi := res.Challenges
	txid := res.TransactionID
	if !res.Challenge || len(multi) != 1 || multi[0].Serial != "T1" || !txidRe.MatchString(txid) {
		t.Fatalf("trigger %+v", res)
	}
	want(t, e.check(t, validate.Request{User: "alice", TransactionID: txid, Pass: rfcHOTP[0]}), true, "Found matching challenge")
	_, err = e.v.Trigger(t.Context(), validate.Request{User: "eve"})
	wantErr(t, err, 905, "The user can not be found in any resolver in this realm!")
	_, err = e.v.Trigger(t.Context(), validate.Request{})
	wantErr(t, err, 905, "You need to specify a serial, user or credential_id.")
}

// poisonPIN stores a PIN hash whose parameters exceed the hasher's caps:
// checking it fails with an error instead of costing a derivation, so a
// Check that succeeds proves this PIN was never checked.
func poisonPIN(t *testing.T, e *env, serial string) {
	t.Helper()
	const tooHigh = "$argon2id$v=19$m=4194304,t=100,p=4$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
	if _, err := e.tokens.Update(t.Context(), serial, false, func(tok *token.Token) error { tok.PIN = tooHigh; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tokens.CheckPIN(t.Context(), e.get(t, serial), "pin"); err == nil {
		t.Fatal("the poisoned PIN can be checked: the test proves nothing")
	}
}

func TestSeveralTokens(t *testing.T) {
	t.Run("one PIN check for a success", func(t *testing.T) {
		e := newEnv(t, token.Settings{})
		e.enroll(t, "hotp", "K1", "alice", "realm1", keyB, "pin")
		e.enroll(t, "hotp", "K2", "alice", "realm1", keyC, "pin")
		e.enroll(t, "hotp", "K3", "alice", "realm1", rfcKey, "pin")
		poisonPIN(t, e, "K1")
		poisonPIN(t, e, "K2")
		res, err := e.v.Check(t.Context(), validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]})
		if err != nil {
			t.Fatalf("the PIN of a token whose OTP did not match was checked: %v", err)
		}
		want(t, res, true, "matching 1 tokens")
		if res.Serial != "K3" {
			t.Errorf("serial %v", res.Serial)
		}
	})
	t.Run("fail counters", func(t *testing.T) {
		e := newEnv(t, token.Settings{})
		e.enroll(t, "hotp", "K1", "alice", "realm1", keyB, "pin1")
		e.enroll(t, "hotp", "K2", "alice", "realm1", keyC, "pin2")
		e.enroll(t, "totp", "K3", "alice", "realm1", rfcKey, "pin3")
		// The right PIN of one token, a wrong OTP: only that token counts.
		res := e.check(t, validate.Request{User: "alice", Pass: "pin2" + "000000"})
		want(t, res, false, "wrong otp value")
		if res.Serial != "K2" {
			t.Errorf("detail %v", res)
		}
		wantFail(t, e, "K1", 0)
		wantFail(t, e, "K2", 1)
		wantFail(t, e, "K3", 0)
		// No PIN matches: every token counts (IncFailCountOnFalsePin).
		want(t, e.check(t, validate.Request{User: "alice", Pass: "nope" + "000000"}), false, "wrong otp pin")
		wantFail(t, e, "K1", 1)
		wantFail(t, e, "K2", 2)
		wantFail(t, e, "K3", 1)
		// A success resets only the token that matched.
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin2" + hotpAt(t, keyC, 0)}), true, "matching 1 tokens")
		wantFail(t, e, "K1", 1)
		wantFail(t, e, "K2", 0)
		wantFail(t, e, "K3", 1)
	})
	t.Run("two tokens with the same PIN and a wrong OTP", func(t *testing.T) {
		e := newEnv(t, token.Settings{})
		e.enroll(t, "hotp", "K1", "alice", "realm1", keyB, "pin")
		e.enroll(t, "hotp", "K2", "alice", "realm1", keyC, "pin")
		res := e.check(t, validate.Request{User: "alice", Pass: "pin" + "000000"})
		want(t, res, false, "wrong otp value")
		if res.Serial != "" {
			t.Errorf("serial in a two-token detail %v", res)
		}
		wantFail(t, e, "K1", 1)
		wantFail(t, e, "K2", 1)
	})
	t.Run("revoked tokens", func(t *testing.T) {
		e := newEnv(t, token.Settings{})
		e.enroll(t, "hotp", "K1", "alice", "realm1", keyB, "pin")
		e.enroll(t, "hotp", "K2", "alice", "realm1", rfcKey, "pin")
		if err := e.tokens.Revoke(t.Context(), "K1"); err != nil {
			t.Fatal(err)
		}
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), true, "matching 1 tokens")
		if err := e.tokens.Revoke(t.Context(), "K2"); err != nil {
			t.Fatal(err)
		}
		_, err := e.v.Check(t.Context(), validate.Request{User: "alice", Pass: "pin" + rfcHOTP[1]})
		wantErr(t, err, 1007, "This action is not possible, since the token is locked")
		_, err = e.v.Check(t.Context(), validate.Request{Serial: "K2", Pass: "pin" + rfcHOTP[1]})
		wantErr(t, err, 1007, "This action is not possible, since the token is locked")
		if c := e.get(t, "K2").Count; c != 1 {
			t.Errorf("revoked token's counter %d", c)
		}
	})
	t.Run("disabled token", func(t *testing.T) {
		e := newEnv(t, token.Settings{})
		e.enroll(t, "hotp", "K1", "alice", "realm1", rfcKey, "pin")
		if _, err := e.tokens.SetActive(t.Context(), "K1", false); err != nil {
			t.Fatal(err)
		}
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), false, "Token is disabled")
		wantFail(t, e, "K1", 0)
		if c := e.get(t, "K1").Count; c != 0 {
			t.Errorf("disabled token's counter %d", c)
		}
	})
}

func TestReplay(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "P1", "alice", "realm1", rfcKey, "pin")
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[1]}), true, "matching 1 tokens")
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[1]}), false, "wrong otp value. previous otp used again")
	// privacyIDEA's is_previous_otp looks back a whole window, not one value.
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), false, "wrong otp value. previous otp used again")
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + "000000"}), false, "wrong otp value")
	wantFail(t, e, "P1", 3)
}

func TestFailCounter(t *testing.T) {
	t.Run("maxfail blocks, even the right OTP", func(t *testing.T) {
		e := newEnv(t, token.Settings{})
		e.enroll(t, "hotp", "F1", "alice", "realm1", rfcKey, "pin")
		e.setMaxFail(t, "F1", 3)
		for range 5 {
			e.check(t, validate.Request{User: "alice", Pass: "pin" + "000000"})
		}
		tok := e.get(t, "F1")
		if tok.FailCount != 3 {
			t.Fatalf("failcount %d above maxfail 3", tok.FailCount)
		}
		if tok.Info[token.InfoFailcounterExceed] != "2026-11-22T08:00+0000" {
			t.Errorf("failcounter_exceeded %q", tok.Info[token.InfoFailcounterExceed])
		}
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), false, "Failcounter exceeded")
		want(t, e.check(t, validate.Request{Serial: "F1", Pass: "pin" + rfcHOTP[0]}), false, "Failcounter exceeded")
		tok = e.get(t, "F1")
		if tok.FailCount != 3 || tok.Count != 0 {
			t.Errorf("blocked token changed: failcount %d count %d", tok.FailCount, tok.Count)
		}
		// Without a clear timeout the block stays.
		e.clk.Add(24 * time.Hour)
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), false, "Failcounter exceeded")
		if _, err := e.tokens.Reset(t.Context(), "F1"); err != nil {
			t.Fatal(err)
		}
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), true, "matching 1 tokens")
	})
	t.Run("a wrong OTP and a wrong PIN both count", func(t *testing.T) {
		e := newEnv(t, token.Settings{})
		e.enroll(t, "hotp", "F1", "alice", "realm1", rfcKey, "pin")
		e.check(t, validate.Request{User: "alice", Pass: "pin" + "000000"})
		e.check(t, validate.Request{User: "alice", Pass: "xyz" + rfcHOTP[0]})
		tok := e.get(t, "F1")
		if tok.FailCount != 2 || tok.InfoInt(token.InfoCountAuth, 0) != 2 {
			t.Errorf("failcount %d count_auth %d", tok.FailCount, tok.InfoInt(token.InfoCountAuth, 0))
		}
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), true, "matching 1 tokens")
		tok = e.get(t, "F1")
		if tok.FailCount != 0 || tok.InfoInt(token.InfoCountAuth, 0) != 3 || tok.InfoInt(token.InfoCountAuthSuccess, 0) != 1 {
			t.Errorf("after success: failcount %d info %v", tok.FailCount, tok.Info)
		}
	})
	t.Run("clear timeout", func(t *testing.T) {
		e := newEnv(t, token.Settings{FailcounterClearTime: time.Minute})
		e.enroll(t, "hotp", "F1", "alice", "realm1", rfcKey, "pin")
		e.setMaxFail(t, "F1", 2)
		e.check(t, validate.Request{User: "alice", Pass: "pin" + "000000"})
		e.check(t, validate.Request{User: "alice", Pass: "pin" + "000000"})
		wantFail(t, e, "F1", 2)
		e.clk.Add(30 * time.Second)
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), false, "Failcounter exceeded")
		e.clk.Add(31 * time.Second)
		// After the timeout a wrong attempt starts again at 1 …
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + "000000"}), false, "wrong otp value")
		wantFail(t, e, "F1", 1)
		// … and a right one succeeds.
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), true, "matching 1 tokens")
		wantFail(t, e, "F1", 0)
		// Blocked again; after the timeout the right OTP is accepted at once.
		e.check(t, validate.Request{User: "alice", Pass: "pin" + "000000"})
		e.check(t, validate.Request{User: "alice", Pass: "pin" + "000000"})
		wantFail(t, e, "F1", 2)
		e.clk.Add(61 * time.Second)
		want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[1]}), true, "matching 1 tokens")
		wantFail(t, e, "F1", 0)
	})
}

func TestPassOnPolicies(t *testing.T) {
	e := newEnv(t, token.Settings{})
	_, err := e.v.Check(t.Context(), validate.Request{User: "eve", Pass: "x"})
	wantErr(t, err, 904, "User <eve@realm1> does not exist.")
	want(t, e.check(t, validate.Request{User: "bob", Pass: "x"}), false, "The user has no tokens assigned")

	e.policy(t, "nouser", "passOnNoUser")
	res := e.check(t, validate.Request{User: "eve", Pass: "x"})
	want(t, res, true, "user does not exist, accepted due to 'nouser'")
	if res.User.Found() {
		t.Errorf("unknown user found: %+v", res.User)
	}
	// passOnNoUser does not accept a user that exists.
	want(t, e.check(t, validate.Request{User: "bob", Pass: "x"}), false, "The user has no tokens assigned")

	e.policy(t, "notoken", "passOnNoToken", "realm1")
	want(t, e.check(t, validate.Request{User: "bob", Pass: "anything"}), true, "user has no token, accepted due to 'notoken'")
	// realm2 is not covered by notoken
	want(t, e.check(t, validate.Request{User: "dave", Realm: "realm2", Pass: "x"}), false, "The user has no tokens assigned")
	// a user with a token is checked normally
	e.enroll(t, "hotp", "N1", "carol", "realm1", rfcKey, "pin")
	want(t, e.check(t, validate.Request{User: "carol", Pass: "anything"}), false, "wrong otp pin")
}

func TestPassthruUserstore(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.policy(t, "pt", "passthru=userstore")
	want(t, e.check(t, validate.Request{User: "bob", Pass: "bob-pw"}), true, "against userstore due to 'pt'")
	want(t, e.check(t, validate.Request{User: "bob", Pass: "alice-pw"}), false, "The user has no tokens assigned")
	// A user with tokens does not pass through.
	e.enroll(t, "hotp", "X1", "alice", "realm1", rfcKey, "pin")
	want(t, e.check(t, validate.Request{User: "alice", Pass: "alice-pw"}), false, "wrong otp pin")
}

// hotpAt is the 6-digit SHA-1 HOTP value of a hex key at counter.
func hotpAt(t *testing.T, hexKey string, counter uint64) string {
	t.Helper()
	key, err := hex.DecodeString(hexKey)
	if err != nil {
		t.Fatal(err)
	}
	return otp.HOTP(key, counter, 6, otp.SHA1)
}

// auditRows returns the audit rows, oldest first.
func (e *env) auditRows(t *testing.T) []audit.Row {
	t.Helper()
	var rows []audit.Row
	if err := e.audit.Each(t.Context(), audit.Query{Ascending: true}, func(r audit.Row) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

// commitCounter counts the store's write transactions.
type commitCounter struct {
	store.Store
	n atomic.Int64
}

func (c *commitCounter) Update(ctx context.Context, fn func(store.Tx) error) error {
	c.n.Add(1)
	return c.Store.Update(ctx, fn)
}

// TestAuditInCommit: the validator writes one audit entry per request,
// whatever the outcome, with the caller's columns; a success or a
// rejection without authorization policies costs one write transaction
// (the entry commits with the counter or the fail counters), and the
// others are written after the decision.
func TestAuditInCommit(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "RC1", "alice", "realm1", rfcKey, "pin")
	cc := &commitCounter{Store: e.st}
	tokens := token.New(token.Config{Store: cc, Sealer: e.sealer, Hasher: e.hasher, Now: e.clk.Now})
	al, err := audit.New(audit.Config{Store: cc, Key: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)), Now: e.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.audit = al
	e.v = validate.New(validate.Config{Tokens: tokens, Realms: e.realms, Policies: e.pol, Now: e.clk.Now, Audit: al, Store: cc, NodeName: "n1"})
	who := caller.Caller{Client: netip.MustParseAddr("127.0.0.1"), UserAgent: "PAM/1.2 x", Action: "GET /validate/check"}
	type step struct {
		pass    string
		value   bool
		msg     string
		commits int64
		auth    string
	}
	for i, st := range []step{
		{"pin" + rfcHOTP[0], true, "matching 1 tokens", 1, "ACCEPT"},
		{"pin000000", false, "wrong otp value", 1, "REJECT"},
		{"nope000000", false, "wrong otp pin", 1, "REJECT"},
	} {
		before := cc.n.Load()
		res := e.check(t, validate.Request{Caller: who, User: "alice", Realm: "realm1", Pass: st.pass})
		want(t, res, st.value, st.msg)
		if n := cc.n.Load() - before; n != st.commits {
			t.Errorf("step %d: %d write transactions, want %d", i, n, st.commits)
		}
		rows := e.auditRows(t)
		if len(rows) != i+1 {
			t.Fatalf("step %d: %d audit rows", i, len(rows))
		}
		r := rows[i]
		for col, want := range map[string]any{"action": "GET /validate/check", "user": "alice", "realm": "realm1", "resolver": "pw1",
			"serial": "RC1", "token_type": "hotp", "info": st.msg, "client": "127.0.0.1", "user_agent": "PAM",
			"user_agent_version": "1.2", "privacyidea_server": "n1", "authentication": st.auth} {
			if col == "serial" && st.msg == "wrong otp pin" {
				want = ""
			}
			if col == "token_type" && st.msg == "wrong otp pin" {
				want = ""
			}
			if got := r[col]; got != want && !(want == "" && got == nil) {
				t.Errorf("step %d: %s = %v, want %v", i, col, got, want)
			}
		}
	}
	// An authorization policy may still turn the answer around: the entry
	// is written after the decision, still exactly once.
	e.scopedPolicy(t, "types", policy.ScopeAuthorization, "tokentype=hotp")
	res := e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: "pin" + rfcHOTP[1]})
	want(t, res, true, "matching 1 tokens")
	rows := e.auditRows(t)
	if len(rows) != 4 || rows[3]["action"] != validate.ActionCheck || rows[3]["success"] != 1 {
		t.Fatalf("rows %d, last %v", len(rows), rows[len(rows)-1])
	}
	// An error is audited too.
	if _, err := e.v.Check(t.Context(), validate.Request{User: "nobody", Realm: "realm1", Pass: "x"}); err == nil {
		t.Fatal("unknown user accepted")
	}
	rows = e.auditRows(t)
	if len(rows) != 5 || rows[4]["success"] != 0 || rows[4]["user"] != "nobody" || rows[4]["info"] != "ERR904: User <nobody@realm1> does not exist." {
		t.Fatalf("error row %v", rows[len(rows)-1])
	}
}

// TestAuthRecordsCountAndPrune: auth_max_fail counts the typed
// authentication records of checks and of user logins (RecordLogin), a
// triggered challenge is no failure, and Prune removes records older than
// every window (at least a day).
func TestAuthRecordsCountAndPrune(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.v = validate.New(validate.Config{Tokens: e.tokens, Realms: e.realms, Policies: e.pol, Now: e.clk.Now, Audit: e.audit, Store: e.st})
	e.enroll(t, "hotp", "AR1", "alice", "realm1", rfcKey, "pin")
	e.scopedPolicy(t, "maxfail", policy.ScopeAuthorization, "auth_max_fail=2/10m")
	e.scopedPolicy(t, "cr", policy.ScopeAuthentication, "challenge_response=hotp")
	records := func() int {
		n := 0
		if err := e.st.View(t.Context(), func(tx store.Tx) error {
			return tx.Bucket("authlog").ForEach(nil, func(_, _ []byte) error { n++; return nil })
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 3 {
		if res := e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: "pin"}); !res.Challenge {
			t.Fatalf("want a challenge, got %+v", res)
		}
	}
	want(t, e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: "pin000000"}), false, "wrong otp value")
	// One failed user login and one failed check make two failures.
	u, _, err := e.realms.Resolve(t.Context(), "alice", "realm1")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.v.RecordLogin(t.Context(), u, false); err != nil {
		t.Fatal(err)
	}
	want(t, e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: "pin" + rfcHOTP[0]}), false, "Only 2 failed authentications per 0:10:00 allowed.")
	// Another user is not counted.
	e.enroll(t, "hotp", "AR2", "bob", "realm1", rfcKey, "pin")
	want(t, e.check(t, validate.Request{User: "bob", Realm: "realm1", Pass: "pin" + rfcHOTP[0]}), true, "matching 1 tokens")
	if n := records(); n != 7 {
		t.Fatalf("%d records, want 7", n)
	}
	e.clk.Add(11 * time.Minute)
	want(t, e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: "pin" + rfcHOTP[1]}), true, "matching 1 tokens")
	if n, err := e.v.Prune(t.Context()); err != nil || n != 0 {
		t.Fatalf("prune within a day: %d, %v", n, err)
	}
	e.clk.Add(25 * time.Hour)
	e.scopedPolicy(t, "maxfail", policy.ScopeAuthorization, "auth_max_fail=2/2d")
	if n, err := e.v.Prune(t.Context()); err != nil || n != 0 {
		t.Fatalf("prune within a 2d window: %d, %v", n, err)
	}
	e.clk.Add(24 * time.Hour)
	if n, err := e.v.Prune(t.Context()); err != nil || n != 8 {
		t.Fatalf("prune after the window: %d, %v", n, err)
	}
	if n := records(); n != 0 {
		t.Fatalf("%d records left", n)
	}
}

// TestAuditWithoutClient: a client that left before the decision was
// written does not stop its audit entry.
func TestAuditWithoutClient(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "GC1", "alice", "realm1", rfcKey, "pin")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _ = e.v.Check(ctx, validate.Request{User: "alice", Realm: "realm1", Pass: "pin" + rfcHOTP[0]})
	rows := e.auditRows(t)
	if len(rows) != 1 || rows[0]["user"] != "alice" || rows[0]["action"] != validate.ActionCheck {
		t.Fatalf("rows %v", rows)
	}
}

// TestPolicyConditions: the conditions of authentication policies read
// the caller's headers, the request's parameters and the user's
// attributes, so that a Go program's request and an HTTP request are
// matched alike.
func TestPolicyConditions(t *testing.T) {
	e := newEnv(t, token.Settings{})
	cond := func(section, key, value string) []policy.Condition {
		return []policy.Condition{{Section: section, Key: key, Comparator: "equals", Value: value, Active: true, MissingData: policy.MissingFalse}}
	}
	for _, p := range []policy.Policy{
		{Name: "by-header", Action: "passthru=userstore", Conditions: cond(policy.SectionHeader, "X-Site", "vpn")},
		{Name: "by-user", Action: "passthru=userstore", Conditions: cond(policy.SectionUserinfo, "username", "carol")},
		{Name: "by-param", Action: "passthru=userstore", Conditions: cond(policy.SectionRequestData, "client_tag", "kiosk")},
	} {
		p.Scope, p.Active, p.Priority = policy.ScopeAuthentication, true, 1
		if _, err := e.pol.Set(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	vpn := caller.Caller{Role: caller.Anonymous, Headers: map[string][]string{"X-Site": {"vpn"}}}
	want(t, e.check(t, validate.Request{Caller: vpn, User: "bob", Pass: "bob-pw"}), true, "against userstore due to 'by-header'")
	want(t, e.check(t, validate.Request{User: "bob", Pass: "bob-pw"}), false, "The user has no tokens assigned")
	want(t, e.check(t, validate.Request{User: "carol", Pass: "carol-pw"}), true, "against userstore due to 'by-user'")
	want(t, e.check(t, validate.Request{User: "bob", Pass: "bob-pw", Options: token.Params{"client_tag": "kiosk"}}), true,
		"against userstore due to 'by-param'")
}

// TestPINHashUpgrade: a PIN hash made with other parameters (one brought
// over from privacyIDEA) is replaced by one with the configured
// parameters at the first successful login, and keeps working; a wrong
// PIN changes nothing.
func TestPINHashUpgrade(t *testing.T) {
	e := newEnv(t, token.Settings{})
	other := cheap
	other.Time++
	oh, err := secret.NewHasher(secret.HasherConfig{Params: other})
	if err != nil {
		t.Fatal(err)
	}
	old, err := oh.Hash(t.Context(), "oldpin")
	if err != nil {
		t.Fatal(err)
	}
	n, failed := e.tokens.ImportMigrated(t.Context(), []token.Migrated{{Serial: "UP1", Type: "hotp", Active: true,
		Params: token.Params{"otpkey": rfcKey}, PINHash: old}})
	if n != 1 {
		t.Fatalf("import: %v", failed)
	}
	want(t, e.check(t, validate.Request{Serial: "UP1", Pass: "wrong" + rfcHOTP[0]}), false, "wrong otp pin")
	if got := e.get(t, "UP1").PIN; got != old {
		t.Fatal("a wrong PIN changed the hash")
	}
	want(t, e.check(t, validate.Request{Serial: "UP1", Pass: "oldpin" + rfcHOTP[0]}), true, "matching 1 tokens")
	got := e.get(t, "UP1").PIN
	p, err := secret.ParsePHC(got)
	if err != nil || got == old || p.Params.Time != cheap.Time || p.Params.Memory != cheap.Memory {
		t.Fatalf("hash not upgraded: %v %+v", err, p.Params)
	}
	want(t, e.check(t, validate.Request{Serial: "UP1", Pass: "oldpin" + rfcHOTP[1]}), true, "matching 1 tokens")
}
