package server_test

import (
	"testing"

	"github.com/authsrv/authsrv/token"
)

// TestSAMLAttributesSettings: ReturnSamlAttributes off sends no
// attributes even on success; ReturnSamlAttributesOnFail sends them on a
// failed check too.
func TestSAMLAttributesSettings(t *testing.T) {
	e, tok := settingsEnv(t, token.Settings{})
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "SAML1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	saml := func(pass string) map[string]any {
		t.Helper()
		r := e.do(t, "POST", "/validate/samlcheck", formType, form("user", "alice", "realm", "realm1", "pass", pass), nil)
		attrs, ok := at(r.json, "result.value.attributes").(map[string]any)
		if r.status != 200 || !ok {
			t.Fatalf("samlcheck: %d %s", r.status, r.body)
		}
		return attrs
	}
	if a := saml("pin" + rfcHOTP[0]); a["username"] != "alice" {
		t.Errorf("default, success: attributes %v", a)
	}
	if a := saml("pin000000"); len(a) != 0 {
		t.Errorf("default, failure: attributes %v", a)
	}
	wantOK(t, e.admin(t, tok, "POST", "/system/setConfig", form("ReturnSamlAttributesOnFail", "True")))
	if a := saml("pin000000"); a["username"] != "alice" {
		t.Errorf("ReturnSamlAttributesOnFail, failure: attributes %v", a)
	}
	wantOK(t, e.admin(t, tok, "POST", "/system/setConfig", form("ReturnSamlAttributes", "False")))
	if a := saml("pin" + rfcHOTP[1]); len(a) != 0 {
		t.Errorf("ReturnSamlAttributes False, success: attributes %v", a)
	}
}
