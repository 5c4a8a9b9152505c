package token_test

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/token"
)

func TestDayPassword(t *testing.T) {
	e := newEnv(t)
	key, _ := hex.DecodeString(rfcKey)
	tok, detail := e.initToken(t, "daypassword", "", token.Params{"otpkey": rfcKey})
	if !strings.HasPrefix(tok.Serial, "DAYP") || tok.Info["timeStep"] != "86400" {
		t.Fatalf("serial %s timeStep %q", tok.Serial, tok.Info["timeStep"])
	}
	if v := stDetailValue(t, detail, "otpkey"); v != "seed://"+rfcKey {
		t.Errorf("otpkey %q", v)
	}
	gu := stDetailValue(t, detail, "googleurl")
	if !strings.HasPrefix(gu, "otpauth://daypassword/") || !strings.Contains(gu, "period=86400") {
		t.Errorf("googleurl %q", gu)
	}
	if stDetailValue(t, detail, "oathurl") == "" {
		t.Error("oathurl missing")
	}
	now := e.clock.Now()
	today := otp.DayPassword(key, now, 86400, 6, otp.SHA1)
	if r := stCheck(t, e, tok.Serial, today); !r.OK {
		t.Fatalf("today's value refused: %s", r.Message)
	}
	e.clock.Add(10 * time.Hour)
	if r := stCheck(t, e, tok.Serial, today); !r.OK {
		t.Error("the day password must stay valid for the whole day")
	}
	if r := stCheck(t, e, tok.Serial, otp.DayPassword(key, now.Add(24*time.Hour), 86400, 6, otp.SHA1)); r.OK {
		t.Error("tomorrow's value accepted today")
	}
	e.clock.Add(24 * time.Hour)
	if r := stCheck(t, e, tok.Serial, today); r.OK {
		t.Error("yesterday's value accepted")
	}
}

func TestDayPasswordTimeStep(t *testing.T) {
	e := newEnv(t)
	key, _ := hex.DecodeString(rfcKey)
	for _, tc := range []struct{ in, want string }{
		{"3600", "3600"}, {"90s", "90"}, {"30m", "1800"}, {"1h", "3600"}, {"24h", "86400"}, {"2d", "172800"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			tok, detail := e.initToken(t, "daypassword", "", token.Params{"otpkey": rfcKey, "timeStep": tc.in, "otplen": "8", "hashlib": "sha256"})
			if tok.Info["timeStep"] != tc.want {
				t.Fatalf("timeStep %q, want %s", tok.Info["timeStep"], tc.want)
			}
			if gu := stDetailValue(t, detail, "googleurl"); !strings.Contains(gu, "period="+tc.want) {
				t.Errorf("googleurl %q", gu)
			}
			step := tok.InfoInt("timeStep", 0)
			if r := stCheck(t, e, tok.Serial, otp.DayPassword(key, e.clock.Now(), step, 8, otp.SHA256)); !r.OK {
				t.Errorf("value refused: %s", r.Message)
			}
		})
	}
	for _, bad := range []string{"0", "-60", "abc", "1w", "d", "400d"} {
		t.Run("bad "+bad, func(t *testing.T) {
			stParamErr(t, stInitErr(t, e, "daypassword", token.Params{"otpkey": rfcKey, "timeStep": bad}), rfcKey)
		})
	}
}

func FuzzDayPasswordTimeStep(f *testing.F) {
	for _, s := range []string{"86400", "1d", "24h", "30m", "90s", "0", "-1", "1e3", "9999999999d", " 2 d"} {
		f.Add(s)
	}
	e := newEnv(f)
	f.Fuzz(func(t *testing.T, step string) {
		tok, _, err := e.svc.Init(t.Context(), token.InitRequest{Type: "daypassword", Params: token.Params{"otpkey": rfcKey, "timeStep": step}})
		if err != nil {
			if !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("timeStep %q: %v", step, err)
			}
			return
		}
		if n := tok.InfoInt("timeStep", 0); n <= 0 || n > 366*86400 {
			t.Fatalf("timeStep %q stored as %q", step, tok.Info["timeStep"])
		}
	})
}
