package server_test

import (
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/caconnector/catest"
)

// caEnv is tokenEnv with the local CA connector localca (CRL and
// templates in the CA's directory).
func caEnv(t *testing.T) (*env, string, *catest.CA) {
	t.Helper()
	e, tok := tokenEnv(t)
	ca := catest.New(t, "authsrv test CA")
	catest.Write(t, filepath.Join(ca.Dir, "templates.yaml"), []byte("user:\n    days: 30\n    extensions: user\n"))
	id := wantOK(t, e.admin(t, tok, "POST", "/caconnector/localca", form("type", "local", "cakey", ca.KeyPath, "cacert", ca.CertPath,
		"WorkingDir", ca.Dir, "CRL", "crl.pem", "CRL_Validity_Period", "7", "CRL_Overlap_Period", "1", "templates", "templates.yaml")))
	if id != float64(1) {
		t.Fatalf("POST /caconnector/localca = %v; want 1", id)
	}
	return e, tok, ca
}

func TestCAConnectorAPI(t *testing.T) {
	e, tok, ca := caEnv(t)
	for _, target := range []string{"/caconnector/", "/caconnector", "/caconnector/localca"} {
		list, _ := wantOK(t, e.admin(t, tok, "GET", target, "")).([]any)
		if len(list) != 1 {
			t.Fatalf("GET %s = %v", target, list)
		}
		c := list[0]
		if at(c, "connectorname") != "localca" || at(c, "type") != "local" || at(c, "data.cakey") != ca.KeyPath ||
			at(c, "data.CRL") != "crl.pem" || at(c, "data.CRL_Validity_Period") != "7" || at(c, "templates.user.days") != float64(30) ||
			at(c, "templates.user.extensions") != "user" {
			t.Errorf("GET %s = %v", target, c)
		}
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/caconnector/unknown", "")); len(v.([]any)) != 0 {
		t.Errorf("GET unknown = %v", v)
	}
	q := url.Values{"cakey": {ca.KeyPath}, "cacert": {ca.CertPath}}.Encode()
	if v := wantOK(t, e.admin(t, tok, "GET", "/caconnector/specific/local?"+q, "")); len(v.(map[string]any)) != 0 {
		t.Errorf("GET /caconnector/specific/local = %v", v)
	}
	wantError(t, e.admin(t, tok, "GET", "/caconnector/specific/local", ""), 400, 503, "ERR503: required argument 'cakey' is missing.")
	wantError(t, e.admin(t, tok, "GET", "/caconnector/specific/other", ""), 400, 905, "ERR905: connector type : other not in [local]")

	// Bad input: clear errors, nothing changed.
	missing := filepath.Join(ca.Dir, "missing.key")
	wantError(t, e.admin(t, tok, "POST", "/caconnector/second", form("type", "local", "cakey", missing, "cacert", ca.CertPath)), 400, 503,
		"ERR503: The file of cakey ("+missing+") cannot be used: The file does not exist.")
	other := catest.New(t, "other CA")
	wantError(t, e.admin(t, tok, "POST", "/caconnector/second", form("type", "local", "cakey", other.KeyPath, "cacert", ca.CertPath)), 400, 503,
		"ERR503: The CA key "+other.KeyPath+" does not belong to the CA certificate "+ca.CertPath+".")
	wantError(t, e.admin(t, tok, "POST", "/caconnector/localca", form("type", "local", "cakey", missing)), 400, 503,
		"ERR503: The file of cakey ("+missing+") cannot be used: The file does not exist.")
	wantError(t, e.admin(t, tok, "POST", "/caconnector/bad%20name", form("type", "local", "cakey", ca.KeyPath, "cacert", ca.CertPath)), 400, 905,
		"ERR905: non conformant characters in the name: only letters, digits, '_', '-' and '.' are allowed")
	wantError(t, e.admin(t, tok, "POST", "/caconnector/second", form("cakey", ca.KeyPath, "cacert", ca.CertPath)), 400, 905,
		"ERR905: Missing parameter: type")
	list := wantOK(t, e.admin(t, tok, "GET", "/caconnector/", "")).([]any)
	if len(list) != 1 || at(list[0], "data.cakey") != ca.KeyPath {
		t.Errorf("after the refused changes: %v", list)
	}

	// The audit has the writes.
	a := wantOK(t, e.admin(t, tok, "GET", "/audit/?action=*caconnector*", ""))
	if n, _ := at(a, "count").(float64); n < 5 {
		t.Errorf("audit entries of the CA connector calls = %v", at(a, "count"))
	}

	// Rights: only caconnectorread is granted.
	wantOK(t, e.admin(t, tok, "POST", "/policy/ca", form("scope", "admin", "action", "caconnectorread, policywrite, policydelete")))
	wantOK(t, e.admin(t, tok, "GET", "/caconnector/", ""))
	wantError(t, e.admin(t, tok, "POST", "/caconnector/localca", form("type", "local", "CRL_Overlap_Period", "2")), 403, 303,
		"ERR303: Admin actions are defined, but the action caconnectorwrite is not allowed!")
	wantError(t, e.admin(t, tok, "DELETE", "/caconnector/localca", ""), 403, 303,
		"ERR303: Admin actions are defined, but the action caconnectordelete is not allowed!")
	wantOK(t, e.admin(t, tok, "DELETE", "/policy/ca", ""))

	if v := wantOK(t, e.admin(t, tok, "DELETE", "/caconnector/localca", "")); v != float64(1) {
		t.Errorf("DELETE = %v; want 1", v)
	}
	wantError(t, e.admin(t, tok, "DELETE", "/caconnector/localca", ""), 404, 601, "ERR601: The requested CAConnector could not be found.")
}

func TestCertificateToken(t *testing.T) {
	e, tok, ca := caEnv(t)
	key := catest.ECKey(t, elliptic.P256())
	csr := catest.Request(t, key, pkix.Name{CommonName: "alice", Organization: []string{"Example"}})

	r := e.admin(t, tok, "POST", "/token/init", form("type", "certificate", "request", csr, "ca", "localca", "template", "user",
		"user", "alice", "realm", "realm1"))
	wantOK(t, r)
	serial, _ := at(r.json, "detail.serial").(string)
	certPEM, _ := at(r.json, "detail.certificate").(string)
	if !strings.HasPrefix(serial, "CRT") || certPEM == "" {
		t.Fatalf("token/init detail = %v", r.json["detail"])
	}
	cert := catest.ParseCert(t, certPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: time.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("the certificate does not verify against the CA certificate: %v", err)
	}
	if cert.Subject.CommonName != "alice" || cert.NotAfter.Sub(cert.NotBefore) != 30*24*time.Hour || !key.PublicKey.Equal(cert.PublicKey) {
		t.Errorf("certificate: %v, %v", cert.Subject, cert.NotAfter.Sub(cert.NotBefore))
	}
	info := wantOK(t, e.admin(t, tok, "GET", "/token/?serial="+serial, ""))
	tk := at(info, "tokens").([]any)[0]
	if at(tk, "info.certificate") != certPEM || at(tk, "info.CA") != "localca" || at(tk, "tokentype") != "certificate" {
		t.Errorf("token = %v", tk)
	}
	// The token never authenticates.
	if v := at(e.do(t, "POST", "/validate/check", formType, form("user", "alice", "realm", "realm1", "pass", "123456"), nil).json, "result.value"); v != false {
		t.Errorf("validate/check of a certificate token = %v", v)
	}

	// Bad requests: clear errors, no token.
	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, csr string
		status    int
		code      int
		msg       string
	}{
		{"bad signature", catest.BadSignature(t, csr), 400, 10, "ERR10: request has invalid signature."},
		{"RSA 1024", catest.Request(t, rsa1024, pkix.Name{CommonName: "alice"}), 400, 503,
			"ERR503: The key of the certificate request is not allowed: only RSA keys of 2048 to 8192 bits and ECDSA keys on P-256 or P-384 are accepted."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.admin(t, tok, "POST", "/token/init", form("type", "certificate", "request", tc.csr, "ca", "localca", "user", "alice", "realm", "realm1")),
				tc.status, tc.code, tc.msg)
		})
	}
	wantError(t, e.admin(t, tok, "POST", "/token/init", form("type", "certificate", "request", csr, "user", "alice", "realm", "realm1")),
		400, 905, "ERR905: Missing parameter: ca")
	if n := at(wantOK(t, e.admin(t, tok, "GET", "/token/?type=certificate", "")), "count"); n != float64(1) {
		t.Errorf("certificate tokens after the refused enrollments: %v", n)
	}

	// Revocation: the serial is in the next CRL, which the CA signed.
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/revoke", form("serial", serial))); v != float64(1) {
		t.Errorf("revoke = %v", v)
	}
	crl := ca.ReadCRL(t, filepath.Join(ca.Dir, "crl.pem"))
	if !catest.Listed(crl, cert.SerialNumber) {
		t.Errorf("the CRL does not list the revoked certificate %x: %v", cert.SerialNumber, crl.RevokedCertificateEntries)
	}
	if d := crl.NextUpdate.Sub(crl.ThisUpdate); d != 7*24*time.Hour {
		t.Errorf("CRL validity %v; want 7 days", d)
	}
}

func TestCertificateTokenGenkey(t *testing.T) {
	e, tok, ca := caEnv(t)
	r := e.admin(t, tok, "POST", "/token/init", form("type", "certificate", "genkey", "1", "ca", "localca", "user", "bob", "realm", "realm1", "pin", "p12pin"))
	wantOK(t, r)
	cert := catest.ParseCert(t, at(r.json, "detail.certificate").(string))
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: time.Now()}); err != nil || cert.Subject.CommonName != "bob" {
		t.Fatalf("generated certificate %v: %v", cert.Subject, err)
	}
	p12, err := base64.StdEncoding.DecodeString(at(r.json, "detail.pkcs12").(string))
	if err != nil || len(p12) < 1000 {
		t.Fatalf("pkcs12 = %d bytes, %v", len(p12), err)
	}
	if _, ok := at(r.json, "detail").(map[string]any)["pkcs12_password"]; ok {
		t.Error("the PIN protects the PKCS#12 file; no password may be returned")
	}
	serial := at(r.json, "detail.serial").(string)
	tk := at(wantOK(t, e.admin(t, tok, "GET", "/token/?serial="+serial, "")), "tokens").([]any)[0]
	for k := range tk.(map[string]any)["info"].(map[string]any) {
		if strings.Contains(strings.ToLower(k), "pkcs12") || strings.Contains(strings.ToLower(k), "private") {
			t.Errorf("the token keeps %s", k)
		}
	}
	// Without a PIN a random password comes with the file.
	r = e.admin(t, tok, "POST", "/token/init", form("type", "certificate", "genkey", "1", "ca", "localca", "user", "bob", "realm", "realm1"))
	wantOK(t, r)
	if pw, _ := at(r.json, "detail.pkcs12_password").(string); len(pw) < 16 {
		t.Errorf("pkcs12_password = %q", pw)
	}
	// genkey needs a user.
	wantError(t, e.admin(t, tok, "POST", "/token/init", form("type", "certificate", "genkey", "1", "ca", "localca")), 400, 905, "ERR905: Missing parameter: user")
}
