package validate_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

func TestSettingsAppendPIN(t *testing.T) {
	e := newEnv(t, token.Settings{AppendPIN: true})
	e.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")

	// PrependPin false: OTP first, then the PIN.
	want(t, e.check(t, validate.Request{User: "alice", Pass: rfcHOTP[0] + "pin"}), true, "matching 1 tokens")
	// PIN first is now a wrong PIN ("pin287" is no PIN, "082" no OTP).
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[1]}), false, "wrong otp pin")
	// The right PIN after a wrong OTP.
	want(t, e.check(t, validate.Request{User: "alice", Pass: "000000pin"}), false, "wrong otp value")
	// The serial path splits the same way.
	want(t, e.check(t, validate.Request{Serial: "H1", Pass: rfcHOTP[1] + "pin"}), true, "matching 1 tokens")

	// A challenge answer is the OTP alone, whatever the setting.
	e.policy(t, "cr", "challenge_response=hotp")
	res := e.check(t, validate.Request{User: "alice", Pass: "pin"})
	if !res.Challenge || res.TransactionID == "" {
		t.Fatalf("the PIN alone: %+v, want a challenge", res)
	}
	want(t, e.check(t, validate.Request{User: "alice", TransactionID: res.TransactionID, Pass: rfcHOTP[2]}), true, "Found matching challenge")

	// The default (PrependPin true) is PIN first.
	d := newEnv(t, token.Settings{})
	d.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")
	want(t, d.check(t, validate.Request{User: "alice", Pass: rfcHOTP[0] + "pin"}), false, "wrong otp pin")
	want(t, d.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), true, "matching 1 tokens")
}

// splitEnv has the realm "host" (pw1) besides realm1 and realm2, and
// realm2 (which holds the user "mail@host") as the default realm.
func splitEnv(t *testing.T, set token.Settings) *env {
	t.Helper()
	e := newEnv(t, set)
	if _, failed, err := e.realms.Set(t.Context(), "host", []realm.Entry{{Name: "pw1"}}); err != nil || len(failed) > 0 {
		t.Fatalf("realm host: %v %v", failed, err)
	}
	if _, err := e.realms.SetDefault(t.Context(), "realm2"); err != nil {
		t.Fatal(err)
	}
	e.enroll(t, "hotp", "M1", "mail@host", "realm2", rfcKey, "pin")
	e.enroll(t, "hotp", "A2", "alice", "realm2", keyB, "pin")
	return e
}

func TestSettingsNoSplitAtSign(t *testing.T) {
	t.Run("Default", func(t *testing.T) {
		e := splitEnv(t, token.Settings{})
		// "mail@host" is the login "mail" of the realm "host".
		_, err := e.v.Check(t.Context(), validate.Request{User: "mail@host", Pass: "pin" + rfcHOTP[0]})
		wantErr(t, err, 904, "User <mail@host> does not exist.")
		if c := e.get(t, "M1").Count; c != 0 {
			t.Errorf("M1 counter %d", c)
		}
	})
	t.Run("Off", func(t *testing.T) {
		e := splitEnv(t, token.Settings{NoSplitAtSign: true})
		// The whole string is the login, in the default realm.
		res := e.check(t, validate.Request{User: "mail@host", Pass: "pin" + rfcHOTP[0]})
		want(t, res, true, "matching 1 tokens")
		if res.User.Login != "mail@host" || res.User.Realm != "realm2" || res.Serial != "M1" {
			t.Errorf("user %+v serial %q", res.User, res.Serial)
		}
		// "alice@realm1" is no longer alice of realm1: that login does
		// not exist in the default realm.
		_, err := e.v.Check(t.Context(), validate.Request{User: "alice@realm1", Pass: "pin" + rfcHOTP[1]})
		wantErr(t, err, 904, "User <alice@realm1@realm2> does not exist.")
		// An explicit realm still names the realm: alice of realm1, whose
		// token A1 has another seed.
		e.enroll(t, "hotp", "A1", "alice", "realm1", keyC, "pin")
		res = e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: "pin" + rfcHOTP[1]})
		want(t, res, false, "wrong otp value")
		if res.User.Realm != "realm1" || res.Serial != "A1" {
			t.Errorf("user %+v", res.User)
		}
	})
}

func TestSettingsNoIncFailCountOnFalsePin(t *testing.T) {
	for _, tc := range []struct {
		name       string
		set        token.Settings
		falsePIN   int    // the fail counter after a wrong PIN
		countAuth  string // count_auth after a wrong PIN
		unknownTxn int    // the fail counter after an unknown transaction too
	}{
		{"Default", token.Settings{}, 1, "1", 2},
		{"Off", token.Settings{NoIncFailCountOnFalsePin: true}, 0, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.set)
			e.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")
			e.enroll(t, "hotp", "H2", "alice", "realm1", keyB, "other")

			want(t, e.check(t, validate.Request{User: "alice", Pass: "nip" + rfcHOTP[0]}), false, "wrong otp pin")
			for _, s := range []string{"H1", "H2"} {
				wantFail(t, e, s, tc.falsePIN)
				if got := e.get(t, s).Info[token.InfoCountAuth]; got != tc.countAuth {
					t.Errorf("%s count_auth %q, want %q", s, got, tc.countAuth)
				}
			}
			// A transaction that no token holds is a wrong PIN too.
			want(t, e.check(t, validate.Request{User: "alice", TransactionID: "12345678901234567890", Pass: rfcHOTP[0]}), false, "wrong otp pin")
			wantFail(t, e, "H1", tc.unknownTxn)

			// The right PIN with a wrong OTP always counts.
			want(t, e.check(t, validate.Request{User: "alice", Pass: "pin000000"}), false, "wrong otp value")
			wantFail(t, e, "H1", tc.unknownTxn+1)
			wantFail(t, e, "H2", tc.unknownTxn)
		})
	}
}

func TestSettingsNoAuthCounter(t *testing.T) {
	e := newEnv(t, token.Settings{NoAuthCounter: true})
	e.enroll(t, "hotp", "H1", "alice", "realm1", rfcKey, "pin")
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}), true, "matching 1 tokens")
	want(t, e.check(t, validate.Request{User: "alice", Pass: "pin000000"}), false, "wrong otp value")
	want(t, e.check(t, validate.Request{User: "alice", Pass: "nip000000"}), false, "wrong otp pin")
	tok := e.get(t, "H1")
	if a, s := tok.Info[token.InfoCountAuth], tok.Info[token.InfoCountAuthSuccess]; a != "" || s != "" {
		t.Errorf("count_auth %q count_auth_success %q, want both unset", a, s)
	}
	if tok.FailCount != 2 || tok.Count != 1 {
		t.Errorf("fail counter %d, counter %d: want 2 and 1", tok.FailCount, tok.Count)
	}
}

// logLines decodes the JSON log lines of buf.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestSendFailureLogsTheMissingSetting(t *testing.T) {
	for _, tc := range []struct {
		typ, serial, param, value, answer, cause string
	}{
		{"email", "PIEM0001A", "email", "alice@example.org", "The PIN was correct, but the EMail could not be sent!",
			"e-mail token PIEM0001A has no SMTP server: set the system setting email.identifier or the token's email.identifier"},
		{"sms", "PISM0001A", "phone", "+4912345", "The PIN was correct, but the SMS could not be sent!",
			"SMS token PISM0001A has no SMS gateway: set the system setting sms.identifier or the token's sms.identifier"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			e := newEnv(t, token.Settings{})
			e.enroll(t, tc.typ, tc.serial, "alice", "realm1", rfcKey, "pin", tc.param, tc.value)
			var buf bytes.Buffer
			ctx := zerolog.New(&buf).WithContext(t.Context())
			res, err := e.v.Check(ctx, validate.Request{User: "alice", Pass: "pin"})
			if err != nil {
				t.Fatal(err)
			}
			want(t, res, false, tc.answer)
			if !res.SendFailed {
				t.Errorf("SendFailed not set: %+v", res)
			}
			var found bool
			for _, l := range logLines(t, &buf) {
				if l["error"] == tc.cause && l["serial"] == tc.serial && l["level"] == "error" && l["token_type"] == tc.typ {
					found = true
				}
			}
			if !found {
				t.Errorf("no log line with the cause %q:\n%s", tc.cause, buf.String())
			}
			for _, v := range rfcHOTP[:3] {
				if strings.Contains(buf.String(), v) {
					t.Errorf("the log shows the OTP value %s", v)
				}
			}
			// Nothing was committed: no challenge, the counter unchanged.
			if c := e.get(t, tc.serial).Count; c != 0 {
				t.Errorf("counter %d, want 0", c)
			}
		})
	}
}
