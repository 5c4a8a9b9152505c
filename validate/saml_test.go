package validate_test

import (
	"testing"

	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

// TestSAMLAttributes: a Go caller that asks for the SAML attributes gets
// them on success, none on failure unless ReturnSamlAttributesOnFail,
// none at all with ReturnSamlAttributes off, and nil when not asked.
func TestSAMLAttributes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		values     map[string]string
		pass       string
		wantAttrs  bool
		wantAccept bool
	}{
		{"success", nil, "pin", true, true},
		{"failure", nil, "wrong", false, false},
		{"failure, on fail", map[string]string{"ReturnSamlAttributesOnFail": "True"}, "wrong", true, false},
		{"off", map[string]string{"ReturnSamlAttributes": "False"}, "pin", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, token.Settings{Values: tc.values})
			e.enroll(t, "spass", "SP", "alice", "realm1", "", "pin")
			res := e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: tc.pass, SAMLAttributes: true})
			if res.Value != tc.wantAccept || res.SAMLAttributes == nil {
				t.Fatalf("value %v, attributes %v", res.Value, res.SAMLAttributes)
			}
			got := res.SAMLAttributes["username"] == "alice" && res.SAMLAttributes["realm"] == "realm1" && res.SAMLAttributes["resolver"] == "pw1"
			if got != tc.wantAttrs || (!tc.wantAttrs && len(res.SAMLAttributes) != 0) {
				t.Errorf("attributes %v, want them: %v", res.SAMLAttributes, tc.wantAttrs)
			}
			if _, has := res.SAMLAttributes["password"]; has {
				t.Error("the password is an attribute")
			}
			if plain := e.check(t, validate.Request{User: "alice", Realm: "realm1", Pass: "pin"}); plain.SAMLAttributes != nil {
				t.Errorf("attributes without asking: %v", plain.SAMLAttributes)
			}
		})
	}
}
