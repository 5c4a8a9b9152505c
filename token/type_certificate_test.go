package token_test

import (
	"context"
	"crypto/elliptic"
	"crypto/x509/pkix"
	"path/filepath"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caconnector"
	"github.com/authsrv/authsrv/caconnector/catest"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// certEnv is a token service with the certificate type on the CA
// connector ca1.
func certEnv(t *testing.T) (*env, *caconnector.Service, *catest.CA) {
	t.Helper()
	var cas *caconnector.Service
	e := newEnv(t, func(c *token.Config) {
		cas = caconnector.New(caconnector.Config{Store: c.Store, Now: c.Now})
		c.Types = token.DefaultRegistry()
		c.Types.Register(token.Certificate{CAs: cas})
	})
	ca := catest.New(t, "token CA")
	if _, err := cas.Set(t.Context(), "ca1", "local", map[string]string{"cakey": ca.KeyPath, "cacert": ca.CertPath,
		"CRL": filepath.Join(ca.Dir, "crl.pem")}); err != nil {
		t.Fatal(err)
	}
	return e, cas, ca
}

func TestCertificateEnrollRevoke(t *testing.T) {
	ctx := t.Context()
	e, cas, ca := certEnv(t)
	req := catest.Request(t, catest.ECKey(t, elliptic.P256()), pkix.Name{CommonName: "alice"})
	tok, detail := e.initToken(t, "certificate", "", token.Params{"request": req, "ca": "ca1", "pin": "1234"})
	if tok.Type != "certificate" || tok.Serial[:3] != "CRT" || tok.Info["CA"] != "ca1" || tok.Info["certificate"] != detail["certificate"] {
		t.Fatalf("token %+v, detail %v", tok, detail)
	}
	cert := catest.ParseCert(t, tok.Info["certificate"])
	if err := cert.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatal(err)
	}
	// No OTP value ever matches.
	typ, _ := e.svc.Types().Get("certificate")
	if m, err := typ.Check(ctx, &token.Check{Token: tok, OTP: "123456"}); err != nil || m.OK {
		t.Errorf("Check = %+v, %v", m, err)
	}
	if !e.svc.Types().NeverChallenges("certificate") {
		t.Error("a certificate token must not answer with a challenge")
	}
	// Revoking the token revokes the certificate and writes the CRL.
	if err := e.svc.Revoke(ctx, tok.Serial); err != nil {
		t.Fatal(err)
	}
	if l, _ := cas.RevokedSerials(ctx, "ca1"); len(l) != 1 || l[0] != cert.SerialNumber.Text(16) {
		t.Errorf("revoked = %v", l)
	}
	if crl := ca.ReadCRL(t, filepath.Join(ca.Dir, "crl.pem")); !catest.Listed(crl, cert.SerialNumber) {
		t.Error("the CRL does not list the certificate")
	}

	// An uploaded certificate has no CA: revoking it revokes nothing.
	up, _ := e.initToken(t, "certificate", "CRTUP", token.Params{"certificate": detail["certificate"].(string)})
	if _, ok := up.Info["CA"]; ok {
		t.Error("an uploaded certificate names a CA")
	}
	// Several tokens in one Apply: the one whose CA is gone keeps its
	// state, the other is revoked.
	tok2, _ := e.initToken(t, "certificate", "CRT2", token.Params{"request": req, "ca": "ca1"})
	if _, err := cas.Delete(ctx, "ca1"); err != nil {
		t.Fatal(err)
	}
	outs, err := e.svc.Apply(ctx, []string{tok2.Serial, up.Serial}, token.RevokeChange())
	if err != nil {
		t.Fatal(err)
	}
	if !apierr.Is(outs[0].Err, apierr.CA) || outs[1].Err != nil {
		t.Errorf("outcomes = %+v", outs)
	}
	if got, _ := e.svc.Get(ctx, tok2.Serial); got.Revoked {
		t.Error("the token whose certificate could not be revoked was revoked")
	}
}

func TestCertificateEnrollErrors(t *testing.T) {
	e, _, _ := certEnv(t)
	req := catest.Request(t, catest.ECKey(t, elliptic.P256()), pkix.Name{CommonName: "alice"})
	owner := &user.User{Login: "alice", Realm: "r1", Resolver: "res", UID: "1"}
	for _, tc := range []struct {
		name   string
		params token.Params
		owner  *user.User
		code   apierr.Code
	}{
		{"nothing", token.Params{}, nil, apierr.Parameter},
		{"no ca", token.Params{"request": req}, nil, apierr.Parameter},
		{"unknown ca", token.Params{"request": req, "ca": "nope"}, nil, apierr.ResourceNotFound},
		{"bad signature", token.Params{"request": catest.BadSignature(t, req), "ca": "ca1"}, nil, apierr.Generic},
		{"genkey without user", token.Params{"genkey": "1", "ca": "ca1"}, nil, apierr.Parameter},
		{"genkey too large", token.Params{"genkey": "1", "ca": "ca1", "keysize": "16384"}, owner, apierr.Parameter},
		{"spkac", token.Params{"request": req, "spkac": "1", "ca": "ca1"}, nil, apierr.CA},
		{"bad upload", token.Params{"certificate": "nope"}, nil, apierr.Parameter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.svc.Init(context.Background(), token.InitRequest{Type: "certificate", Params: tc.params, Owner: tc.owner})
			if !apierr.Is(err, tc.code) {
				t.Errorf("Init = %v; want code %v", err, tc.code)
			}
		})
	}
}
