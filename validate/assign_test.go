package validate_test

import (
	"sync"
	"testing"

	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

// enrollFree creates an unassigned token of typ in the given token realms
// (none when realms is empty).
func (e *env) enrollFree(t *testing.T, typ, serial, key, pin string, realms ...string) {
	t.Helper()
	if _, _, err := e.tokens.Init(t.Context(), token.InitRequest{Type: typ, Serial: serial,
		Params: token.Params{"otpkey": key, "pin": pin}, Realms: realms}); err != nil {
		t.Fatalf("init %s: %v", serial, err)
	}
}

// enrollPolicy stores an active enrollment policy.
func (e *env) enrollPolicy(t *testing.T, name, action string, realms ...string) {
	t.Helper()
	if _, err := e.pol.Set(t.Context(), policy.Policy{Name: name, Scope: policy.ScopeEnrollment, Action: action, Realm: realms, Active: true, Priority: 1}); err != nil {
		t.Fatalf("policy %s: %v", name, err)
	}
}

// wantOwner checks the owner of a token ("" = unassigned) and its counter.
func (e *env) wantOwner(t *testing.T, serial, login string, count uint64) *token.Token {
	t.Helper()
	tok := e.get(t, serial)
	got := ""
	if tok.Assigned() {
		got = tok.Owner.Login + "@" + tok.Owner.Realm
	}
	if got != login {
		t.Fatalf("%s owner %q, want %q", serial, got, login)
	}
	if tok.Count != count {
		t.Fatalf("%s count %d, want %d", serial, tok.Count, count)
	}
	return tok
}

func (e *env) wantPIN(t *testing.T, serial, pin string, ok bool) {
	t.Helper()
	got, err := e.tokens.CheckPIN(t.Context(), e.get(t, serial), pin)
	if err != nil {
		t.Fatal(err)
	}
	if got != ok {
		t.Fatalf("%s: PIN check %v, want %v", serial, got, ok)
	}
}

func TestParsePassthruAssign(t *testing.T) {
	for _, tc := range []struct {
		in             string
		pinFirst       bool
		otpLen, window int
		ok             bool
	}{
		{"pin:6", true, 6, 0, true},
		{"8:pin", false, 8, 0, true},
		{"pin:6:100", true, 6, 100, true},
		{"8:pin:10000", false, 8, 10000, true},
		{" PIN : 6 ", true, 6, 0, true},
		{"pin", false, 0, 0, false},
		{"6", false, 0, 0, false},
		{"6:6", false, 0, 0, false},
		{"pin:pin", false, 0, 0, false},
		{"pin:0", false, 0, 0, false},
		{"pin:-6", false, 0, 0, false},
		{"pin:65", false, 0, 0, false},
		{"pin:six", false, 0, 0, false},
		{"pin:6:0", false, 0, 0, false},
		{"pin:6:10001", false, 0, 0, false},
		{"pin:6:x", false, 0, 0, false},
		{"pin:6:10:1", false, 0, 0, false},
		{"", false, 0, 0, false},
	} {
		pinFirst, otpLen, window, ok := validate.ParsePassthruAssign(tc.in)
		if ok != tc.ok || (ok && (pinFirst != tc.pinFirst || otpLen != tc.otpLen || window != tc.window)) {
			t.Errorf("ParsePassthruAssign(%q) = %v %d %d %v", tc.in, pinFirst, otpLen, window, ok)
		}
	}
}

// autoassignEnv has bob (realm1, no tokens) and unassigned tokens around
// the one that matches the RFC values (FREE, realm1). The others sort
// before it and would be found first by a search that ignored realms or
// owners: NOREALM (RFC key, no realm), OTHERREALM (RFC key, realm2),
// DISABLED (RFC key, realm1, disabled), A-PW (a static password of realm1,
// which a use does not use up) and A-KEYB (another seed, realm1).
func autoassignEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, token.Settings{})
	e.enrollFree(t, "hotp", "A-KEYB", keyB, "")
	if err := e.tokens.SetRealms(t.Context(), "A-KEYB", []string{"realm1"}); err != nil {
		t.Fatal(err)
	}
	e.enrollFree(t, "pw", "A-PW", "654321", "", "realm1")
	e.enrollFree(t, "hotp", "DISABLED", rfcKey, "", "realm1")
	if _, err := e.tokens.SetActive(t.Context(), "DISABLED", false); err != nil {
		t.Fatal(err)
	}
	e.enrollFree(t, "hotp", "FREE", rfcKey, "old-pin", "realm1")
	e.enrollFree(t, "hotp", "NOREALM", rfcKey, "")
	e.enrollFree(t, "hotp", "OTHERREALM", rfcKey, "", "realm2")
	return e
}

func TestAutoAssignAnyPIN(t *testing.T) {
	e := autoassignEnv(t)
	bob := validate.Request{User: "bob", Realm: "realm1"}

	// Without the policy a user without tokens just fails.
	bob.Pass = "1234" + rfcHOTP[0]
	want(t, e.check(t, bob), false, validate.MsgNoTokens)
	e.wantOwner(t, "FREE", "", 0)

	e.enrollPolicy(t, "aa", "autoassignment=any_pin", "realm1")
	res := e.check(t, bob)
	want(t, res, true, validate.MsgAutoassigned)
	if res.Serial != "FREE" || res.Type != "hotp" || res.OTPLen != 6 {
		t.Errorf("detail %v", res)
	}
	if res.User.Login != "bob" || len(res.Policies) != 1 || res.Policies[0] != "aa" {
		t.Errorf("user %+v policies %v", res.User, res.Policies)
	}
	tok := e.wantOwner(t, "FREE", "bob@realm1", 1)
	e.wantPIN(t, "FREE", "1234", true)
	e.wantPIN(t, "FREE", "old-pin", false)
	if tok.FailCount != 0 || tok.Info[token.InfoCountAuthSuccess] != "1" {
		t.Errorf("failcount %d count_auth_success %q", tok.FailCount, tok.Info[token.InfoCountAuthSuccess])
	}
	// Nothing else moved.
	for _, s := range []string{"A-KEYB", "A-PW", "DISABLED", "NOREALM", "OTHERREALM"} {
		e.wantOwner(t, s, "", 0)
	}

	// The OTP value was used up: the same password is refused, now as a
	// normal check of bob's token.
	want(t, e.check(t, bob), false, token.MsgReplayed)
	e.wantOwner(t, "FREE", "bob@realm1", 1)

	// bob now authenticates with the new PIN and the next value.
	bob.Pass = "1234" + rfcHOTP[1]
	want(t, e.check(t, bob), true, "matching 1 tokens")

	// Another user without tokens cannot claim bob's token with a later
	// value, and no other token matches it.
	carol := validate.Request{User: "carol", Realm: "realm1", Pass: "x" + rfcHOTP[2]}
	want(t, e.check(t, carol), false, validate.MsgNoTokens)
	e.wantOwner(t, "FREE", "bob@realm1", 2)
}

func TestAutoAssignEmptyPINAndOtherSeed(t *testing.T) {
	e := autoassignEnv(t)
	e.enrollPolicy(t, "aa", "autoassignment=any_pin")
	// The value of A-KEYB (its seed, counter 3: inside the window) with
	// an empty PIN.
	res := e.check(t, validate.Request{User: "carol", Realm: "realm1", Pass: hotpAt(t, keyB, 3)})
	want(t, res, true, validate.MsgAutoassigned)
	if res.Serial != "A-KEYB" {
		t.Fatalf("detail %v", res)
	}
	e.wantOwner(t, "A-KEYB", "carol@realm1", 4)
	e.wantPIN(t, "A-KEYB", "", true)
	e.wantOwner(t, "FREE", "", 0)
}

func TestAutoAssignUserstore(t *testing.T) {
	e := autoassignEnv(t)
	e.enrollPolicy(t, "aa", "autoassignment=userstore")
	bob := validate.Request{User: "bob", Realm: "realm1"}

	// A wrong user store password: no assignment, the value is not used
	// up, the failure is the one without the policy.
	for _, pin := range []string{"wrong", "", "1234", "old-pin"} {
		bob.Pass = pin + rfcHOTP[0]
		want(t, e.check(t, bob), false, validate.MsgNoTokens)
		tok := e.wantOwner(t, "FREE", "", 0)
		if tok.FailCount != 0 {
			t.Fatalf("failcount %d after a failed autoassignment", tok.FailCount)
		}
	}

	bob.Pass = "bob-pw" + rfcHOTP[0]
	res := e.check(t, bob)
	want(t, res, true, validate.MsgAutoassigned)
	if res.Serial != "FREE" {
		t.Fatalf("detail %v", res)
	}
	e.wantOwner(t, "FREE", "bob@realm1", 1)
	// The token PIN is left as it was: the user store password is not
	// stored on the token.
	e.wantPIN(t, "FREE", "old-pin", true)
	e.wantPIN(t, "FREE", "bob-pw", false)

	// Replay refused; with otppin=userstore the next value works.
	want(t, e.check(t, bob), false, "wrong otp pin")
	e.policy(t, "up", "otppin=userstore")
	bob.Pass = "bob-pw" + rfcHOTP[1]
	want(t, e.check(t, bob), true, "matching 1 tokens")
}

func TestAutoAssignNotForUserWithToken(t *testing.T) {
	e := autoassignEnv(t)
	e.enrollPolicy(t, "aa", "autoassignment=any_pin")
	e.enroll(t, "hotp", "BOBS", "bob", "realm1", keyC, "pin")
	want(t, e.check(t, validate.Request{User: "bob", Realm: "realm1", Pass: "1234" + rfcHOTP[0]}), false, "wrong otp pin")
	e.wantOwner(t, "FREE", "", 0)

	// A token the user owns but may not use for this request (disabled)
	// still counts: no autoassignment.
	if _, err := e.tokens.SetActive(t.Context(), "BOBS", false); err != nil {
		t.Fatal(err)
	}
	want(t, e.check(t, validate.Request{User: "bob", Realm: "realm1", Pass: "1234" + rfcHOTP[0]}), false, token.MsgDisabled)
	e.wantOwner(t, "FREE", "", 0)

	// An unknown user gets the unknown-user error, nothing is assigned.
	_, err := e.v.Check(t.Context(), validate.Request{User: "eve", Realm: "realm1", Pass: "1234" + rfcHOTP[0]})
	wantErr(t, err, 904, "User <eve@realm1> does not exist.")
	e.wantOwner(t, "FREE", "", 0)

	// The serial path never assigns.
	want(t, e.check(t, validate.Request{Serial: "FREE", Pass: "1234" + rfcHOTP[0]}), false, "wrong otp pin")
	e.wantOwner(t, "FREE", "", 0)
}

// TestAutoAssignOnlyUsedUpValues: a value that a use does not use up (a
// static password) never claims a token.
func TestAutoAssignOnlyUsedUpValues(t *testing.T) {
	e := autoassignEnv(t)
	e.enrollPolicy(t, "aa", "autoassignment=any_pin")
	want(t, e.check(t, validate.Request{User: "bob", Realm: "realm1", Pass: "1234654321"}), false, validate.MsgNoTokens)
	e.wantOwner(t, "A-PW", "", 0)
}

func TestAutoAssignRealmScoped(t *testing.T) {
	e := autoassignEnv(t)
	// The policy is for realm2 only: bob@realm1 gets nothing.
	e.enrollPolicy(t, "aa", "autoassignment=any_pin", "realm2")
	want(t, e.check(t, validate.Request{User: "bob", Realm: "realm1", Pass: "1234" + rfcHOTP[0]}), false, validate.MsgNoTokens)
	e.wantOwner(t, "FREE", "", 0)
	// dave@realm2 gets the realm2 token, never the realm1 one.
	res := e.check(t, validate.Request{User: "dave", Realm: "realm2", Pass: "1234" + rfcHOTP[0]})
	want(t, res, true, validate.MsgAutoassigned)
	if res.Serial != "OTHERREALM" {
		t.Fatalf("detail %v", res)
	}
	e.wantOwner(t, "OTHERREALM", "dave@realm2", 1)
	e.wantOwner(t, "FREE", "", 0)
}

func TestAutoAssignParallel(t *testing.T) {
	e := autoassignEnv(t)
	e.enrollPolicy(t, "aa", "autoassignment=any_pin")
	const n = 16
	results := make([]validate.Response, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = e.v.Check(t.Context(), validate.Request{User: "bob", Realm: "realm1", Pass: "1234" + rfcHOTP[0]})
		})
	}
	wg.Wait()
	assigned := 0
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if res.Value {
			assigned++
			if res.Message != validate.MsgAutoassigned {
				t.Errorf("request %d: %v", i, res)
			}
		}
	}
	if assigned != 1 {
		t.Fatalf("%d requests succeeded, want exactly 1", assigned)
	}
	e.wantOwner(t, "FREE", "bob@realm1", 1)
	toks, err := e.tokens.ByOwner(t.Context(), *e.get(t, "FREE").Owner)
	if err != nil || len(toks) != 1 {
		t.Fatalf("bob owns %d tokens (%v)", len(toks), err)
	}
}

// TestAutoAssignParallelTwoTokens: requests for one user race with values
// of two different tokens; the user gets exactly one of them.
func TestAutoAssignParallelTwoTokens(t *testing.T) {
	e := autoassignEnv(t)
	e.enrollPolicy(t, "aa", "autoassignment=any_pin")
	passes := []string{"1234" + rfcHOTP[0], "1234" + hotpAt(t, keyB, 0)}
	const n = 16
	var ok [n]bool
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := e.v.Check(t.Context(), validate.Request{User: "bob", Realm: "realm1", Pass: passes[i%2]})
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
			ok[i] = res.Value
		})
	}
	wg.Wait()
	assigned := 0
	for _, v := range ok {
		if v {
			assigned++
		}
	}
	owned := 0
	for _, s := range []string{"FREE", "A-KEYB"} {
		if e.get(t, s).Assigned() {
			owned++
		}
	}
	if assigned != 1 || owned != 1 {
		t.Fatalf("%d successes, %d tokens assigned; want 1 and 1", assigned, owned)
	}
}

func TestAutoAssignBadPolicyValue(t *testing.T) {
	e := autoassignEnv(t)
	e.enrollPolicy(t, "aa", "autoassignment=sometimes")
	res, err := e.v.Check(t.Context(), validate.Request{User: "bob", Realm: "realm1", Pass: "1234" + rfcHOTP[0]})
	wantErr(t, err, 303, `The value "sometimes" of the policy action autoassignment is not valid.`)
	if len(res.Policies) != 1 || res.Policies[0] != "aa" {
		t.Errorf("policies %v", res.Policies)
	}
	e.wantOwner(t, "FREE", "", 0)
}

func TestAutoAssignBareFlagIsAnyPIN(t *testing.T) {
	e := autoassignEnv(t)
	e.enrollPolicy(t, "aa", "autoassignment")
	want(t, e.check(t, validate.Request{User: "bob", Realm: "realm1", Pass: "99" + rfcHOTP[0]}), true, validate.MsgAutoassigned)
	e.wantPIN(t, "FREE", "99", true)
}

func TestPassthruAssignBadPolicyValue(t *testing.T) {
	e := autoassignEnv(t)
	e.policy(t, "pt", "passthru=rad1, passthru_assign=pin:x")
	_, err := e.v.Check(t.Context(), validate.Request{User: "bob", Realm: "realm1", Pass: "1234" + rfcHOTP[0]})
	wantErr(t, err, 303, `The value "pin:x" of the policy action passthru_assign is not valid.`)
	e.wantOwner(t, "FREE", "", 0)
}
