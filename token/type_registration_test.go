package token_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/token"
)

func TestRegistrationOneUse(t *testing.T) {
	e := newEnv(t)
	tok, detail := e.initToken(t, "registration", "", token.Params{"otpkey": rfcKey, "genkey": "1"})
	code, _ := detail["registrationcode"].(string)
	if !strings.HasPrefix(tok.Serial, "REG") || len(code) != 24 || tok.OTPLen != 24 {
		t.Fatalf("serial %s code %d chars otplen %d", tok.Serial, len(code), tok.OTPLen)
	}
	if code == rfcKey {
		t.Error("the code must be generated, not taken from otpkey")
	}
	for _, r := range code {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			t.Fatalf("code has %q", r)
		}
	}
	if r := stCheck(t, e, tok.Serial, code+"x"); r.OK {
		t.Fatal("wrong code accepted")
	}
	if _, err := e.svc.Get(t.Context(), tok.Serial); err != nil {
		t.Fatalf("a wrong code must not delete the token: %v", err)
	}
	if r := stCheck(t, e, tok.Serial, code); !r.OK {
		t.Fatalf("code refused: %s", r.Message)
	}
	if _, err := e.svc.Get(t.Context(), tok.Serial); !apierr.Is(err, apierr.ResourceNotFound) {
		t.Fatalf("token not deleted after use: %v", err)
	}
	r, err := e.svc.CheckOTP(t.Context(), tok.Serial, code, nil)
	if r.OK || err == nil && r.Message == "" {
		t.Errorf("second use: ok=%v err=%v", r.OK, err)
	}
}

func TestRegistrationLengthContentsAndReinit(t *testing.T) {
	e := newEnv(t)
	tok, detail := e.initToken(t, "registration", "REG1", token.Params{"registration.length": "10", "registration.contents": "n"})
	old, _ := detail["registrationcode"].(string)
	if len(old) != 10 || tok.OTPLen != 10 || strings.Trim(old, "0123456789") != "" {
		t.Fatalf("code %q otplen %d", old, tok.OTPLen)
	}
	// A match computed against the old code must not commit after a
	// re-initialisation.
	m, err := e.svc.Verify(t.Context(), tok, old, nil, nil)
	if err != nil || !m.OK || !m.Delete {
		t.Fatalf("verify: %+v %v", m, err)
	}
	_, detail = e.initToken(t, "registration", "REG1", token.Params{})
	if _, err := e.svc.Commit(t.Context(), "REG1", m); err == nil {
		t.Error("stale match committed")
	}
	if _, err := e.svc.Get(t.Context(), "REG1"); err != nil {
		t.Fatalf("token deleted by a stale match: %v", err)
	}
	if r := stCheck(t, e, "REG1", detail["registrationcode"].(string)); !r.OK {
		t.Errorf("new code refused: %s", r.Message)
	}
	for _, p := range []token.Params{{"registration.length": "0"}, {"registration.contents": "[", "registration.length": "3"}} {
		stParamErr(t, stInitErr(t, e, "registration", p))
	}
}

func TestRegistrationParallelUse(t *testing.T) {
	e := newEnv(t)
	tok, detail := e.initToken(t, "registration", "", nil)
	code := detail["registrationcode"].(string)
	oks := stParallel(t, 8, func() bool {
		r, err := e.svc.CheckOTP(t.Context(), tok.Serial, code, nil)
		return err == nil && r.OK
	})
	if oks != 1 {
		t.Errorf("%d successes, want exactly 1", oks)
	}
}
