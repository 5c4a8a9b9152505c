package token_test

import (
	"errors"
	"testing"

	"github.com/authsrv/authsrv/token"
)

func TestSPass(t *testing.T) {
	e := newEnv(t)
	tok, detail := e.initToken(t, "spass", "", token.Params{"pin": "letmein"})
	if tok.Serial[:4] != "PISP" {
		t.Errorf("serial %s", tok.Serial)
	}
	if v := stDetailValue(t, detail, "otpkey"); len(v) != len("seed://")+40 {
		t.Errorf("otpkey value %q: want a 20-byte seed", v)
	}
	if ok, err := e.svc.CheckPIN(t.Context(), tok, "letmein"); err != nil || !ok {
		t.Errorf("PIN not stored: %v %v", ok, err)
	}
	typ, _ := e.svc.Types().Get("spass")
	if p, ok := typ.(token.PINOnly); !ok || !p.PINOnly() {
		t.Error("spass must be PINOnly")
	}
	if r := stCheck(t, e, tok.Serial, "123456"); r.OK {
		t.Error("an OTP part was accepted")
	}
	if r := stCheck(t, e, tok.Serial, ""); !r.OK {
		t.Errorf("empty OTP part refused: %s", r.Message)
	}
	if r := stCheck(t, e, tok.Serial, ""); !r.OK {
		t.Error("spass must be reusable")
	}
}

func TestSPassBadInput(t *testing.T) {
	e := newEnv(t)
	err := stInitErr(t, e, "spass", token.Params{"genkey": "1", "otpkey": rfcKey, "pin": "letmein"})
	if !errors.Is(err, token.ErrGenkeyAndOtpkey) {
		t.Errorf("genkey+otpkey: %v", err)
	}
	stNoSecret(t, err, rfcKey, "letmein")
	stParamErr(t, stInitErr(t, e, "spass", token.Params{"otpkey": "zz-not-hex"}), "zz-not-hex")
}
