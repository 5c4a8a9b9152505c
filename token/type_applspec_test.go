package token_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/token"
)

func TestApplSpec(t *testing.T) {
	e := newEnv(t)
	const pw = "app-pass-1"
	tok, detail := e.initToken(t, "applspec", "", token.Params{"otpkey": pw, "service_id": "imap"})
	if !strings.HasPrefix(tok.Serial, "PIAS") || tok.Info["service_id"] != "imap" || tok.OTPLen != len(pw) {
		t.Fatalf("serial %s service_id %q otplen %d", tok.Serial, tok.Info["service_id"], tok.OTPLen)
	}
	if detail["password"] != pw {
		t.Errorf("detail password %v", detail["password"])
	}
	if _, ok := tok.Sealed[token.FieldKey]; ok {
		t.Error("the password must not be stored openable as the seed")
	}
	h, err := e.svc.Secret(tok, token.FieldPasswordHash)
	if err != nil || !strings.HasPrefix(string(h), "$argon2") || strings.Contains(string(h), pw) {
		t.Fatalf("stored hash %q %v", h, err)
	}
	for _, tc := range []struct {
		name, otp string
		ok        bool
	}{
		{"right", pw, true},
		{"again", pw, true},
		{"wrong", "app-pass-2", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := stCheck(t, e, tok.Serial, tc.otp); r.OK != tc.ok {
				t.Errorf("ok=%v (%s), want %v", r.OK, r.Message, tc.ok)
			}
		})
	}
}

func TestApplSpecGenerated(t *testing.T) {
	e := newEnv(t)
	tok, detail := e.initToken(t, "applspec", "", token.Params{"service_id": "smtp", "genkey": "1"})
	pw, _ := detail["password"].(string)
	if len(pw) != 24 || tok.OTPLen != 24 {
		t.Fatalf("password %d chars, otplen %d", len(pw), tok.OTPLen)
	}
	if r := stCheck(t, e, tok.Serial, pw); !r.OK {
		t.Errorf("generated password refused: %s", r.Message)
	}
	tok, detail = e.initToken(t, "applspec", "", token.Params{"service_id": "smtp", "applspec.length": "8", "applspec.contents": "c"})
	pw, _ = detail["password"].(string)
	if len(pw) != 8 || tok.OTPLen != 8 || strings.Trim(strings.ToLower(pw), "abcdefghijklmnopqrstuvwxyz") != "" {
		t.Errorf("password %q otplen %d", pw, tok.OTPLen)
	}
}

func TestApplSpecBadInput(t *testing.T) {
	e := newEnv(t)
	const pw = "s3cr3t-app"
	err := stInitErr(t, e, "applspec", token.Params{"otpkey": pw})
	if !apierr.Is(err, apierr.Parameter) || err.Error() != "Missing parameter: service_id" {
		t.Errorf("missing service_id: %v", err)
	}
	stNoSecret(t, err, pw)
	err = stInitErr(t, e, "applspec", token.Params{"otpkey": pw, "genkey": "1", "service_id": "x"})
	if !errors.Is(err, token.ErrGenkeyAndOtpkey) {
		t.Errorf("genkey+otpkey: %v", err)
	}
	stNoSecret(t, err, pw)
}
