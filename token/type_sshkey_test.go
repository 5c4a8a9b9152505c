package token_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/token"
)

func sshLine(t *testing.T, pub any, comment string) string {
	t.Helper()
	pk, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
	if comment != "" {
		line += " " + comment
	}
	return line
}

func TestSSHKey(t *testing.T) {
	e := newEnv(t)
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, line, desc, wantDesc string
	}{
		{"ed25519 with comment", sshLine(t, edPub, "alice@laptop"), "", "alice@laptop"},
		{"ecdsa with description", sshLine(t, &ec.PublicKey, "bob@host"), "Bob's key", "Bob's key"},
		{"no comment", sshLine(t, edPub, ""), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := token.Params{"sshkey": tc.line}
			if tc.desc != "" {
				p["description"] = tc.desc
			}
			tok, detail := e.initToken(t, "sshkey", "", p)
			if !strings.HasPrefix(tok.Serial, "SSHK") || tok.Description != tc.wantDesc {
				t.Errorf("serial %s description %q", tok.Serial, tok.Description)
			}
			if token.SSHKey(tok) != tc.line || tok.Info["ssh_key"] != tc.line {
				t.Errorf("stored key %q", token.SSHKey(tok))
			}
			for k := range detail {
				if k != "serial" && k != "rollout_state" {
					t.Errorf("unexpected detail %s", k)
				}
			}
			for _, v := range []string{"", "123456", tc.line} {
				if r := stCheck(t, e, tok.Serial, v); r.OK {
					t.Errorf("OTP %q accepted", v)
				}
			}
		})
	}
	if token.SSHKey(&token.Token{Type: "hotp", Info: map[string]string{"ssh_key": "x"}}) != "" {
		t.Error("SSHKey of another type")
	}
}

func TestSSHKeyBadInput(t *testing.T) {
	e := newEnv(t)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	good := sshLine(t, edPub, "c")
	b64 := strings.Fields(good)[1]
	err := stInitErr(t, e, "sshkey", token.Params{"sshkey": "ssh-dss " + b64 + " old"})
	if !apierr.Is(err, apierr.TokenAdmin) || err.Error() != "The keytype you specified is not supported." {
		t.Errorf("ssh-dss: %v", err)
	}
	err = stInitErr(t, e, "sshkey", token.Params{})
	if err.Error() != "Missing parameter: sshkey" {
		t.Errorf("missing: %v", err)
	}
	for _, tc := range []struct{ name, line string }{
		{"bad base64", "ssh-ed25519 !!!notbase64 c"},
		{"type mismatch", "ssh-rsa " + b64 + " c"},
		{"two lines", good + "\n" + good},
		{"truncated", "ssh-ed25519 " + b64[:20]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stParamErr(t, stInitErr(t, e, "sshkey", token.Params{"sshkey": tc.line}))
		})
	}
	if err := stInitErr(t, e, "sshkey", token.Params{"sshkey": `from="10.0.0.1" ` + good}); !apierr.Is(err, apierr.TokenAdmin) {
		t.Errorf("options: %v", err)
	}
}
