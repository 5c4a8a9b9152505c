package token_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/token"
)

// stCheck runs CheckOTP and fails the test on an error.
func stCheck(t *testing.T, e *env, serial, otp string) token.Result {
	t.Helper()
	r, err := e.svc.CheckOTP(t.Context(), serial, otp, nil)
	if err != nil {
		t.Fatalf("check %s: %v", serial, err)
	}
	return r
}

// stInitErr enrolls a token that must be refused and returns the error.
func stInitErr(t *testing.T, e *env, typ string, params token.Params) error {
	t.Helper()
	_, _, err := e.svc.Init(context.Background(), token.InitRequest{Type: typ, Params: params})
	if err == nil {
		t.Fatalf("init %s %v: want an error", typ, params)
	}
	return err
}

// stParamErr asserts a parameter error that reveals none of secrets.
func stParamErr(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if !apierr.Is(err, apierr.Parameter) {
		t.Errorf("error %v: want a parameter error", err)
	}
	stNoSecret(t, err, secrets...)
}

// stNoSecret asserts that err's text contains none of secrets.
func stNoSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && err != nil && strings.Contains(err.Error(), s) {
			t.Errorf("error %q reveals a secret", err)
		}
	}
}

// stDetailValue returns detail[name]["value"].
func stDetailValue(t *testing.T, detail map[string]any, name string) string {
	t.Helper()
	d, ok := detail[name].(map[string]any)
	if !ok {
		t.Fatalf("detail %s missing: %v", name, detail)
	}
	v, _ := d["value"].(string)
	return v
}

func TestPWGivenPassword(t *testing.T) {
	e := newEnv(t)
	const pw = "correct horse ß"
	tok, detail := e.initToken(t, "pw", "PW1", token.Params{"otpkey": pw})
	if tok.OTPLen != 15 {
		t.Errorf("otplen = %d, want 15 (characters)", tok.OTPLen)
	}
	if detail["password"] != pw {
		t.Errorf("detail password = %v", detail["password"])
	}
	if v := stDetailValue(t, detail, "otpkey"); !strings.HasPrefix(v, "seed://") {
		t.Errorf("otpkey value = %q", v)
	}
	for k, v := range tok.Info {
		if strings.Contains(v, pw) {
			t.Errorf("tokeninfo %s holds the password", k)
		}
	}
	for _, tc := range []struct {
		name, otp string
		ok        bool
	}{
		{"right", pw, true},
		{"again (static)", pw, true},
		{"wrong", "correct horse s", false},
		{"prefix", "correct horse", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := stCheck(t, e, "PW1", tc.otp); r.OK != tc.ok {
				t.Errorf("ok = %v (%s), want %v", r.OK, r.Message, tc.ok)
			}
		})
	}
}

func TestPWGenerated(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		name   string
		params token.Params
		length int
		digits bool
	}{
		{"default", token.Params{}, 12, false},
		{"genkey", token.Params{"genkey": "1"}, 12, false},
		{"empty otpkey", token.Params{"otpkey": ""}, 12, false},
		{"length and contents", token.Params{"pw.length": "20", "pw.contents": "n"}, 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, detail := e.initToken(t, "pw", "", tc.params)
			pw, _ := detail["password"].(string)
			if len(pw) != tc.length || tok.OTPLen != tc.length {
				t.Fatalf("password %d chars, otplen %d, want %d", len(pw), tok.OTPLen, tc.length)
			}
			for _, r := range pw {
				if !unicode.IsLetter(r) && !unicode.IsDigit(r) || tc.digits && !unicode.IsDigit(r) {
					t.Fatalf("password has unexpected character %q", r)
				}
			}
			if !strings.HasPrefix(tok.Serial, "PW") {
				t.Errorf("serial %s", tok.Serial)
			}
			if !stCheck(t, e, tok.Serial, pw).OK {
				t.Error("generated password refused")
			}
		})
	}
}

func TestPWBadInput(t *testing.T) {
	e := newEnv(t)
	const pw = "TopSecret99"
	err := stInitErr(t, e, "pw", token.Params{"otpkey": pw, "genkey": "1"})
	if !errors.Is(err, token.ErrGenkeyAndOtpkey) {
		t.Errorf("genkey+otpkey: %v", err)
	}
	stNoSecret(t, err, pw)
	for _, p := range []token.Params{
		{"pw.length": "0"},
		{"pw.length": "x"},
		{"pw.contents": "[", "pw.length": "5"},
		{"otpkey": strings.Repeat("a", 257)},
		{"otpkey": "bad\xffutf8"},
	} {
		stParamErr(t, stInitErr(t, e, "pw", p), p["otpkey"])
	}
}

// stParallel runs fn n times at once and counts the true results.
func stParallel(t *testing.T, n int, fn func() bool) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	oks := 0
	for range n {
		wg.Go(func() {
			if fn() {
				mu.Lock()
				oks++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return oks
}
