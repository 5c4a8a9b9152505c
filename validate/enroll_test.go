package validate_test

import (
	"context"
	"encoding/base32"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

// pollType is a test token type whose challenges are answered in client
// mode poll (as push tokens are): HOTP otherwise.
type pollType struct{ token.HOTP }

func (pollType) Name() string   { return "tpoll" }
func (pollType) Prefix() string { return "TPOL" }
func (pollType) Challenge(_ context.Context, _ *token.ChallengeRequest) (*token.ChallengeResult, error) {
	return &token.ChallengeResult{Message: "confirm on your phone", ClientMode: "poll"}, nil
}

// storeEnv is newEnv with a Validator that has the store (for
// client_mode_per_user) and the tpoll type.
func storeEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, token.Settings{})
	reg := token.DefaultRegistry()
	reg.Register(pollType{})
	e.tokens = token.New(token.Config{Store: e.st, Sealer: e.sealer, Hasher: e.hasher, Types: reg, Now: e.clk.Now})
	e.v = validate.New(validate.Config{Tokens: e.tokens, Realms: e.realms, Policies: e.pol, Now: e.clk.Now, Store: e.st})
	return e
}

// enrollChallenge checks an enrollment challenge and returns its
// transaction id, serial and otpauth link.
func enrollChallenge(t *testing.T, res validate.Response, typ string, optional bool) (txid, serial, link string) {
	t.Helper()
	if res.Value || !res.Challenge || len(res.Challenges) != 1 {
		t.Fatalf("want an enrollment challenge, got value %v challenge %v: %+v", res.Value, res.Challenge, res)
	}
	if !res.Enrollment || res.EnrollmentOptional != optional || res.Type != typ {
		t.Fatalf("answer %+v", res)
	}
	txid, serial = res.TransactionID, res.Serial
	if len(txid) != 20 || serial == "" {
		t.Fatalf("transaction %q serial %q", txid, serial)
	}
	multi := res.Challenges
	if len(multi) != 1 || multi[0].TransactionID != txid || multi[0].Serial != serial || multi[0].ClientMode != "interactive" {
		t.Fatalf("multi_challenge %+v", res.Challenges)
	}
	if typ == "hotp" || typ == "totp" {
		img := res.Image
		link = res.Link
		if !strings.HasPrefix(img, "data:image/png;base64,") || !strings.HasPrefix(link, "otpauth://"+typ+"/") {
			t.Fatalf("image %.40q link %q", img, link)
		}
		if multi[0].Image != img || multi[0].Link != link {
			t.Fatalf("multi_challenge image/link differ")
		}
	}
	return txid, serial, link
}

// seed reads the key of an otpauth URL.
func seed(t *testing.T, link string) []byte {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	key, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(u.Query().Get("secret"))
	if err != nil || len(key) == 0 {
		t.Fatalf("secret of %q: %v", link, err)
	}
	return key
}

func TestEnrollViaMultichallengeHOTP(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.policy(t, "pt", "passthru=userstore")
	e.policy(t, "evm", "enroll_via_multichallenge=hotp")
	ctx := t.Context()
	alice := func(pass, txid string) validate.Response {
		return e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: pass, TransactionID: txid})
	}

	res := alice("alice-pw", "")
	txid, serial, link := enrollChallenge(t, res, "hotp", false)
	if res.Message != validate.MsgEnrollScan || res.PreferredClientMode != "interactive" {
		t.Errorf("detail %v", res)
	}
	tok := e.get(t, serial)
	if tok.RolloutState != token.StateClientWait || tok.Owner == nil || tok.Owner.Login != "alice" || tok.Type != "hotp" {
		t.Fatalf("token %+v", tok)
	}
	// The link is the one /token/init gives for this key.
	key := seed(t, link)
	b32 := otp.FormatBase32(key)
	if want := "otpauth://hotp/" + serial + "?secret=" + b32 + "&counter=1&digits=6&creator=privacyidea&issuer=authsrv&serial=" + serial; link != want {
		t.Errorf("link %q, want %q", link, want)
	}
	otpAt := func(c uint64) string { return otp.HOTP(key, c, 6, otp.SHA1) }

	t.Run("unusable before verification", func(t *testing.T) {
		// The OTP without the transaction is no login: passthru checks it
		// as the password, and the token is not yet enrolled.
		want(t, alice(otpAt(0), ""), false, token.MsgNotEnrolled)
		want(t, e.check(t, validate.Request{Serial: serial, Pass: otpAt(0)}), false, token.MsgNotEnrolled)
		want(t, e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: otpAt(0), OTPOnly: true, Serial: serial}), false, validate.MsgOTPOnlyFailed)
		if got := e.get(t, serial); got.RolloutState != token.StateClientWait || got.Count != 0 {
			t.Fatalf("token %s count %d", got.RolloutState, got.Count)
		}
	})
	t.Run("wrong answer", func(t *testing.T) {
		wrong := "000000"
		if wrong == otpAt(0) || wrong == otpAt(1) {
			wrong = "111111"
		}
		res := alice(wrong, txid)
		want(t, res, false, validate.MsgResponseNoMatch)
		if res.Serial != serial {
			t.Errorf("detail %v", res)
		}
		got := e.get(t, serial)
		if got.RolloutState != token.StateClientWait || got.FailCount != 1 {
			t.Fatalf("after a wrong answer: %s failcount %d", got.RolloutState, got.FailCount)
		}
	})
	t.Run("right answer", func(t *testing.T) {
		res := alice(otpAt(0), txid)
		want(t, res, true, validate.MsgFoundChallenge)
		if res.Serial != serial || res.Challenge {
			t.Errorf("detail %v", res)
		}
		got := e.get(t, serial)
		if got.RolloutState != token.StateEnrolled || got.FailCount != 0 || got.Count != 1 {
			t.Fatalf("after the answer: %s failcount %d count %d", got.RolloutState, got.FailCount, got.Count)
		}
		if chs, err := e.tokens.Challenges(ctx, token.ChallengeFilter{TransactionID: txid, IncludeExpired: true}); err != nil || len(chs) != 0 {
			t.Fatalf("challenges left: %v %v", chs, err)
		}
		// replayed
		want(t, alice(otpAt(0), txid), false, validate.MsgWrongPIN)
	})
	t.Run("enrolled token authenticates", func(t *testing.T) {
		// no PIN was set; the user has a hotp token now: no new enrollment
		res := alice(otpAt(1), "")
		want(t, res, true, "matching 1 tokens")
		if res.Challenge {
			t.Fatal("a second enrollment")
		}
		// passthru no longer applies
		if res := alice("alice-pw", ""); res.Value {
			t.Fatalf("password alone accepted: %v", res)
		}
	})
}

func TestEnrollViaMultichallengeTOTP(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.policy(t, "pt", "passthru=userstore")
	e.policy(t, "evm", "enroll_via_multichallenge=TOTP")
	e.policy(t, "evm-text", "enroll_via_multichallenge_text=Scan it\\, then type the code")
	e.scopedPolicy(t, "step", policy.ScopeEnrollment, "totp_timestep=60")
	res := e.check(t, validate.Request{User: "alice", Pass: "alice-pw"})
	txid, serial, link := enrollChallenge(t, res, "totp", false)
	if res.Message != "Scan it, then type the code" {
		t.Errorf("message %q", res.Message)
	}
	if !strings.Contains(link, "&period=60&") {
		t.Fatalf("link %q", link)
	}
	key := seed(t, link)
	code := otp.HOTP(key, uint64(e.clk.Now().Unix()/60), 6, otp.SHA1)
	want(t, e.check(t, validate.Request{User: "alice", Pass: code}), false, token.MsgNotEnrolled)
	want(t, e.check(t, validate.Request{User: "alice", Pass: code, TransactionID: txid}), true, validate.MsgFoundChallenge)
	if got := e.get(t, serial); got.RolloutState != token.StateEnrolled || got.Info[token.InfoTimeStep] != "60" {
		t.Fatalf("token %s %v", got.RolloutState, got.Info)
	}
	// the same step again is a replay
	e.clk.Add(1)
	if res := e.check(t, validate.Request{User: "alice", Pass: code}); res.Value {
		t.Fatal("the enrollment OTP was accepted twice")
	}
}

func TestEnrollViaMultichallengeConditions(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.policy(t, "pt", "passthru=userstore")
	e.policy(t, "evm", "enroll_via_multichallenge=hotp")

	t.Run("unfinished enrollment starts again", func(t *testing.T) {
		_, serial, link := enrollChallenge(t, e.check(t, validate.Request{User: "bob", Pass: "bob-pw"}), "hotp", false)
		txid2, serial2, link2 := enrollChallenge(t, e.check(t, validate.Request{User: "bob", Pass: "bob-pw"}), "hotp", false)
		if serial2 != serial || link2 == link {
			t.Fatalf("second enrollment: serial %s (first %s), new key %v", serial2, serial, link2 != link)
		}
		code := otp.HOTP(seed(t, link2), 0, 6, otp.SHA1)
		want(t, e.check(t, validate.Request{User: "bob", Pass: code, TransactionID: txid2}), true, validate.MsgFoundChallenge)
	})
	t.Run("user with a token of the type", func(t *testing.T) {
		e.enroll(t, "hotp", "CAROL1", "carol", "realm1", rfcKey, "pin")
		res := e.check(t, validate.Request{User: "carol", Pass: "pin" + rfcHOTP[0]})
		want(t, res, true, "matching 1 tokens")
	})
	t.Run("user with a token of another type", func(t *testing.T) {
		e.enroll(t, "spass", "DAVE1", "dave", "realm2", "", "davepin")
		res := e.check(t, validate.Request{User: "dave", Realm: "realm2", Pass: "davepin"})
		_, serial, _ := enrollChallenge(t, res, "hotp", false)
		if got := e.get(t, serial); got.Owner.Realm != "realm2" {
			t.Fatalf("owner %+v", got.Owner)
		}
	})
	t.Run("max_token_per_user", func(t *testing.T) {
		e.scopedPolicy(t, "max", policy.ScopeEnrollment, "max_token_per_user=1")
		defer func() { _, _ = e.pol.Delete(t.Context(), "max") }()
		e.enroll(t, "spass", "ALICE2", "alice", "realm2", "", "apin")
		want(t, e.check(t, validate.Request{User: "alice", Realm: "realm2", Pass: "apin"}), true, "matching 1 tokens")
	})
	t.Run("unsupported type", func(t *testing.T) {
		e.policy(t, "evm", "enroll_via_multichallenge=spass")
		defer e.policy(t, "evm", "enroll_via_multichallenge=hotp")
		res := e.check(t, validate.Request{User: "mail@host", Realm: "realm2", Pass: "mail-pw"})
		want(t, res, true, "against userstore due to 'pt'")
	})
	t.Run("email without a mail server keeps the success", func(t *testing.T) {
		e.policy(t, "evm", "enroll_via_multichallenge=email")
		defer e.policy(t, "evm", "enroll_via_multichallenge=hotp")
		u, _, err := e.realms.Resolve(t.Context(), "mail@host", "realm2")
		if err != nil {
			t.Fatal(err)
		}
		res := e.check(t, validate.Request{User: "mail@host", Realm: "realm2", Pass: "mail-pw"})
		want(t, res, true, "against userstore due to 'pt'")
		if toks, err := e.tokens.ByOwner(t.Context(), u); err != nil || len(toks) != 0 {
			t.Fatalf("tokens left: %d %v", len(toks), err)
		}
	})
}

func TestEnrollViaMultichallengeCancel(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.policy(t, "pt", "passthru=userstore")
	e.policy(t, "evm", "enroll_via_multichallenge=hotp")
	cancel := func(user, realm, txid string) validate.Response {
		return e.check(t, validate.Request{User: user, Realm: realm, TransactionID: txid, CancelEnrollment: true})
	}

	t.Run("not optional", func(t *testing.T) {
		txid, serial, _ := enrollChallenge(t, e.check(t, validate.Request{User: "carol", Pass: "carol-pw"}), "hotp", false)
		want(t, cancel("carol", "", txid), false, validate.MsgEnrollCancelFailed)
		if got := e.get(t, serial); got.RolloutState != token.StateClientWait {
			t.Fatalf("token %s", got.RolloutState)
		}
	})
	e.policy(t, "evm-opt", "enroll_via_multichallenge_optional")
	t.Run("optional", func(t *testing.T) {
		txid, serial, _ := enrollChallenge(t, e.check(t, validate.Request{User: "alice", Pass: "alice-pw"}), "hotp", true)
		// another user can not cancel it
		want(t, cancel("bob", "", txid), false, validate.MsgEnrollCancelFailed)
		res := cancel("alice", "realm1", txid)
		want(t, res, true, validate.MsgEnrollCancelled)
		if res.User.Login != "alice" {
			t.Errorf("user %+v", res.User)
		}
		if _, err := e.tokens.Get(t.Context(), serial); !apierr.Is(err, apierr.ResourceNotFound) {
			t.Fatalf("the token is still there: %v", err)
		}
		// once only
		want(t, cancel("alice", "", txid), false, validate.MsgEnrollCancelFailed)
		// the user has no token: the next login asks again
		enrollChallenge(t, e.check(t, validate.Request{User: "alice", Pass: "alice-pw"}), "hotp", true)
	})
	t.Run("without user", func(t *testing.T) {
		txid, _, _ := enrollChallenge(t, e.check(t, validate.Request{User: "bob", Pass: "bob-pw"}), "hotp", true)
		res := cancel("", "", txid)
		want(t, res, true, validate.MsgEnrollCancelled)
		if res.User.Login != "bob" {
			t.Errorf("user %+v", res.User)
		}
	})
	t.Run("expired", func(t *testing.T) {
		txid, serial, _ := enrollChallenge(t, e.check(t, validate.Request{User: "bob", Pass: "bob-pw"}), "hotp", true)
		e.clk.Add(121e9)
		want(t, cancel("bob", "", txid), false, validate.MsgEnrollCancelFailed)
		if _, err := e.tokens.Get(t.Context(), serial); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unknown transaction", func(t *testing.T) {
		want(t, cancel("alice", "", "12345678901234567890"), false, validate.MsgEnrollCancelFailed)
	})
	t.Run("a normal challenge", func(t *testing.T) {
		e.policy(t, "cr", "challenge_response=hotp")
		e.enroll(t, "hotp", "CR2", "alice", "realm2", rfcKey, "crpin")
		res := e.check(t, validate.Request{User: "alice", Realm: "realm2", Pass: "crpin"})
		if !res.Challenge || res.Enrollment {
			t.Fatalf("challenge %v", res)
		}
		want(t, cancel("alice", "realm2", res.TransactionID), false, validate.MsgEnrollCancelFailed)
		want(t, e.check(t, validate.Request{User: "alice", Realm: "realm2", Pass: rfcHOTP[0], TransactionID: res.TransactionID}), true, validate.MsgFoundChallenge)
	})
	t.Run("missing transaction", func(t *testing.T) {
		_, err := e.v.Check(t.Context(), validate.Request{User: "alice", CancelEnrollment: true})
		wantErr(t, err, 905, "Missing parameter: transaction_id")
	})
}

func TestClientModePerUser(t *testing.T) {
	e := storeEnv(t)
	e.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")
	e.enroll(t, "tpoll", "P1", "alice", "realm1", keyB, "pin")
	e.policy(t, "cr", "challenge_response=hotp tpoll")
	pollKey, _ := otp.ParseKey(keyB, "")
	hotpKey, _ := otp.ParseKey(rfcKey, "")
	var pollCounter, hotpCounter uint64
	// login asks for the challenges with agent ua, answers with the token
	// of typ when given, and returns the preferred_client_mode.
	login := func(ua, typ string) any {
		t.Helper()
		res := e.check(t, validate.Request{User: "alice", Pass: "pin", Caller: caller.Caller{UserAgent: ua}})
		if !res.Challenge || len(res.Challenges) != 2 {
			t.Fatalf("challenges %v", res)
		}
		mode := res.PreferredClientMode
		txid := res.TransactionID
		var pass string
		switch typ {
		case "":
			return mode
		case "hotp":
			pass = otp.HOTP(hotpKey, hotpCounter, 6, otp.SHA1)
			hotpCounter++
		case "tpoll":
			pass = otp.HOTP(pollKey, pollCounter, 6, otp.SHA1)
			pollCounter++
		}
		res = e.check(t, validate.Request{User: "alice", Pass: pass, TransactionID: txid, Caller: caller.Caller{UserAgent: ua}})
		if !res.Value || res.Type != typ {
			t.Fatalf("answer with %s: %v", typ, res)
		}
		return mode
	}

	// without the policy nothing is remembered
	login("privacyidea-cp/2.0 Windows", "tpoll")
	if m := login("privacyidea-cp/2.0 Windows", ""); m != "interactive" {
		t.Fatalf("without the policy: %v", m)
	}
	e.policy(t, "cmpu", "client_mode_per_user")
	if m := login("privacyidea-cp/2.0 Windows", "tpoll"); m != "interactive" {
		t.Fatalf("first login: %v", m)
	}
	if m := login("simpleSAMLphp/1.0", "hotp"); m != "interactive" {
		t.Fatalf("first login of the second agent: %v", m)
	}
	// each agent gets the mode of the type it used last; the version
	// does not matter
	if m := login("privacyidea-cp/2.1", ""); m != "poll" {
		t.Fatalf("credential provider: %v", m)
	}
	if m := login("simpleSAMLphp/1.0", ""); m != "interactive" {
		t.Fatalf("simpleSAMLphp: %v", m)
	}
	// the preference follows the last success
	login("simpleSAMLphp/1.0", "tpoll")
	if m := login("simpleSAMLphp/1.0", ""); m != "poll" {
		t.Fatalf("simpleSAMLphp after tpoll: %v", m)
	}
	login("privacyidea-cp/2.1", "hotp")
	if m := login("privacyidea-cp/2.0", ""); m != "interactive" {
		t.Fatalf("credential provider after hotp: %v", m)
	}
	// it wins over preferred_client_mode
	e.policy(t, "pcm", "preferred_client_mode=interactive poll")
	if m := login("simpleSAMLphp/1.0", ""); m != "poll" {
		t.Fatalf("with preferred_client_mode: %v", m)
	}

	t.Run("bounded per user", func(t *testing.T) {
		for i := range 12 {
			login("agent"+string(rune('a'+i))+"/1", "hotp")
		}
		var agents []map[string]any
		err := e.st.View(t.Context(), func(tx store.Tx) error {
			return tx.Bucket("clientmode").ForEach(nil, func(_, v []byte) error {
				var rec struct {
					Agents []map[string]any `json:"agents"`
				}
				if err := json.Unmarshal(v, &rec); err != nil {
					return err
				}
				agents = append(agents, rec.Agents...)
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(agents) != 8 || agents[0]["agent"] != "agentl" {
			t.Fatalf("%d agents stored, first %v", len(agents), agents[0])
		}
	})
}

// TestEnrollViaMultichallengeEnrollPolicies: the enrollment during an
// authentication applies the enrollment policies of /token/init
// (token.EnrollPolicies), with the user's scope for the type's defaults.
func TestEnrollViaMultichallengeEnrollPolicies(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.policy(t, "pt", "passthru=userstore")
	e.policy(t, "evm", "enroll_via_multichallenge=hotp")

	t.Run("defaults", func(t *testing.T) {
		e.scopedPolicy(t, "len", policy.ScopeUser, "hotp_otplen=8")
		defer func() { _, _ = e.pol.Delete(t.Context(), "len") }()
		_, serial, link := enrollChallenge(t, e.check(t, validate.Request{User: "bob", Pass: "bob-pw"}), "hotp", false)
		if got := e.get(t, serial); got.OTPLen != 8 {
			t.Fatalf("otplen %d, want 8 from hotp_otplen", got.OTPLen)
		}
		if !strings.Contains(link, "digits=8") {
			t.Fatalf("the enrollment link does not say 8 digits")
		}
	})
	t.Run("require_description keeps the success without a token", func(t *testing.T) {
		e.scopedPolicy(t, "desc", policy.ScopeEnrollment, "require_description=hotp")
		defer func() { _, _ = e.pol.Delete(t.Context(), "desc") }()
		want(t, e.check(t, validate.Request{User: "carol", Pass: "carol-pw"}), true, "against userstore due to 'pt'")
		u, _, err := e.realms.Resolve(t.Context(), "carol", "")
		if err != nil {
			t.Fatal(err)
		}
		if toks, err := e.tokens.ByOwner(t.Context(), u); err != nil || len(toks) != 0 {
			t.Fatalf("tokens: %d %v", len(toks), err)
		}
	})
}
