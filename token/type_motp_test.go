package token_test

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/token"
)

type motpCase struct {
	secret, pin string
	at          time.Time
	otp         string
}

func readMOTPCases(t *testing.T) []motpCase {
	t.Helper()
	f, err := os.Open("../internal/otp/testdata/motp.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []motpCase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("bad line %q", line)
		}
		sec, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, motpCase{f[0], f[1], time.Unix(sec, 0).UTC(), f[3]})
	}
	if len(out) == 0 {
		t.Fatal("no known answers")
	}
	return out
}

func TestMOTPKnownAnswers(t *testing.T) {
	e := newEnv(t)
	for i, c := range readMOTPCases(t) {
		t.Run(c.otp, func(t *testing.T) {
			serial := "PIMOKAT" + strconv.Itoa(i)
			tok, _ := e.initToken(t, "motp", serial, token.Params{"otpkey": c.secret, "motppin": c.pin})
			if tok.OTPLen != 6 {
				t.Errorf("otplen %d", tok.OTPLen)
			}
			e.clock.Set(c.at)
			if r := stCheck(t, e, serial, c.otp); !r.OK {
				t.Fatalf("known answer refused: %s", r.Message)
			}
			if r := stCheck(t, e, serial, strings.ToUpper(c.otp)); r.OK && c.at.Unix() >= 10 {
				t.Error("same step accepted twice")
			}
		})
	}
}

func TestMOTPReplayWindowAndPIN(t *testing.T) {
	e := newEnv(t)
	const secret, pin = "e3be7c4f0d1bb1ab", "9876"
	tok, detail := e.initToken(t, "motp", "", token.Params{"otpkey": secret, "motppin": pin, "otplen": "8"})
	if !strings.HasPrefix(tok.Serial, "PIMO") || tok.OTPLen != 6 {
		t.Fatalf("serial %s otplen %d", tok.Serial, tok.OTPLen)
	}
	if _, ok := detail["otpkey"]; ok {
		t.Error("a given secret must not be returned")
	}
	now := time.Unix(1767225609, 0)
	e.clock.Set(now)
	if r := stCheck(t, e, tok.Serial, "bff74e"); !r.OK {
		t.Fatalf("right OTP refused: %s", r.Message)
	}
	r := stCheck(t, e, tok.Serial, "bff74e")
	if r.OK || r.Message != token.MsgReplayed {
		t.Errorf("replay: ok=%v msg=%q", r.OK, r.Message)
	}
	// An older step inside the window is a replay too.
	if r := stCheck(t, e, tok.Serial, otp.MOTP(secret, pin, now.Add(-30*time.Second))); r.OK {
		t.Error("older step accepted")
	}
	// A later step inside the window passes, one outside does not.
	if r := stCheck(t, e, tok.Serial, otp.MOTP(secret, pin, now.Add(170*time.Second))); !r.OK {
		t.Errorf("step +170 s refused: %s", r.Message)
	}
	if r := stCheck(t, e, tok.Serial, otp.MOTP(secret, pin, now.Add(200*time.Second))); r.OK {
		t.Error("step +200 s accepted (outside the window)")
	}
	if r := stCheck(t, e, tok.Serial, otp.MOTP(secret, "0000", now.Add(20*time.Second))); r.OK {
		t.Error("OTP with another mOTP PIN accepted")
	}
	got, err := e.svc.Get(t.Context(), tok.Serial)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(now.Add(170*time.Second).Unix() / 10); got.Count != want {
		t.Errorf("stored step %d, want %d", got.Count, want)
	}
	if got.Info["motppin"] != "" || got.Info["otpkey"] != "" {
		t.Error("secrets in tokeninfo")
	}
}

func TestMOTPTimeWindowAndGenkey(t *testing.T) {
	e := newEnv(t)
	tok, detail := e.initToken(t, "motp", "", token.Params{"genkey": "1", "motppin": "1234", "timeWindow": "30"})
	v := stDetailValue(t, detail, "otpkey")
	secret := strings.TrimPrefix(v, "seed://")
	if len(secret) != 32 {
		t.Fatalf("generated secret %q: want 16 bytes hex", v)
	}
	if tok.Info["timeWindow"] != "30" {
		t.Errorf("timeWindow %q", tok.Info["timeWindow"])
	}
	now := e.clock.Now()
	if r := stCheck(t, e, tok.Serial, otp.MOTP(secret, "1234", now.Add(60*time.Second))); r.OK {
		t.Error("step +60 s accepted with a 30 s window")
	}
	if r := stCheck(t, e, tok.Serial, otp.MOTP(secret, "1234", now.Add(30*time.Second))); !r.OK {
		t.Errorf("step +30 s refused: %s", r.Message)
	}
}

func TestMOTPBadInput(t *testing.T) {
	e := newEnv(t)
	const secret, pin = "1234567890abcdef", "4711"
	err := stInitErr(t, e, "motp", token.Params{"otpkey": secret, "genkey": "1", "motppin": pin})
	if !errors.Is(err, token.ErrGenkeyAndOtpkey) {
		t.Errorf("genkey+otpkey: %v", err)
	}
	stNoSecret(t, err, secret, pin)
	for _, tc := range []struct {
		name   string
		params token.Params
		msg    string
	}{
		{"no pin", token.Params{"otpkey": secret}, "Missing parameter: motppin"},
		{"empty pin", token.Params{"otpkey": secret, "motppin": ""}, "Missing parameter: motppin"},
		{"no key", token.Params{"motppin": pin}, "Missing parameter: otpkey"},
		{"not hex", token.Params{"otpkey": "secret-xyz", "motppin": pin}, ""},
		{"window", token.Params{"otpkey": secret, "motppin": pin, "timeWindow": "-1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := stInitErr(t, e, "motp", tc.params)
			stParamErr(t, err, secret, pin, "secret-xyz")
			if tc.msg != "" && err.Error() != tc.msg {
				t.Errorf("message %q, want %q", err, tc.msg)
			}
			if !apierr.Is(err, apierr.Parameter) {
				t.Errorf("code: %v", err)
			}
		})
	}
}
