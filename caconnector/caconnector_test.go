package caconnector_test

import (
	"context"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caconnector"
	"github.com/authsrv/authsrv/caconnector/catest"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newService(t *testing.T) (*caconnector.Service, store.Store, *clock) {
	st := storetest.Open(t)
	c := &clock{t: time.Now()}
	return caconnector.New(caconnector.Config{Store: st, Now: c.now, Files: fileroot.Confinement{DataDir: t.TempDir()}}), st, c
}

const templates = `# the templates of the test CA
user: # for people
    days: 30   # a month
    extensions: "user" # quoted
web:
    days: 10
    extensions: server
    ext_key_usage: serverAuth, clientAuth
`

func localParams(ca *catest.CA) map[string]string {
	tpl := filepath.Join(ca.Dir, "templates.yaml")
	if _, err := os.Stat(tpl); err != nil {
		_ = os.WriteFile(tpl, []byte(templates), 0o600)
	}
	return map[string]string{
		"cakey": ca.KeyPath, "cacert": ca.CertPath, "CRL": filepath.Join(ca.Dir, "crl.pem"),
		"CRL_Validity_Period": "10", "CRL_Overlap_Period": "2", "templates": "templates.yaml", "WorkingDir": ca.Dir,
		"CSRDir": "csr", "openssl.cnf": "/etc/ssl/openssl.cnf", "unknown": "ignored",
	}
}

func wantCode(t *testing.T, err error, code apierr.Code, text string) {
	t.Helper()
	e, ok := errors.AsType[*apierr.Error](err)
	if !ok || e.Code != code || !strings.Contains(e.Error(), text) {
		t.Fatalf("error = %v; want code %v containing %q", err, code, text)
	}
}

func TestDefinitions(t *testing.T) {
	ctx := t.Context()
	s, _, _ := newService(t)
	ca := catest.New(t, "Test CA")
	id, err := s.Set(ctx, "localca", "local", localParams(ca))
	if err != nil || id != 1 {
		t.Fatalf("Set = %d, %v", id, err)
	}
	d, err := s.Get(ctx, "LocalCA")
	if err != nil {
		t.Fatal(err)
	}
	if d.Type != "local" || d.Data["cakey"] != ca.KeyPath || d.Data["CRL_Validity_Period"] != "10" || d.Data["CSRDir"] != "csr" {
		t.Errorf("definition = %+v", d)
	}
	if _, ok := d.Data["unknown"]; ok {
		t.Error("an unknown key was stored")
	}
	if u := d.Templates["user"]; u.Days != 30 || u.Extensions != "user" {
		t.Errorf("templates = %+v", d.Templates)
	}
	// An update changes only what it names, and keeps the id.
	if id, err := s.Set(ctx, "localca", "local", map[string]string{"CRL_Overlap_Period": "3"}); err != nil || id != 1 {
		t.Fatalf("update = %d, %v", id, err)
	}
	if d, _ := s.Get(ctx, "localca"); d.Data["CRL_Overlap_Period"] != "3" || d.Data["cakey"] != ca.KeyPath {
		t.Errorf("after update: %+v", d.Data)
	}

	for _, tc := range []struct {
		name, conn, typ string
		params          map[string]string
		code            apierr.Code
		text            string
	}{
		{"bad name", "a/b", "local", localParams(ca), apierr.Parameter, "non conformant characters"},
		{"no type", "x", "", localParams(ca), apierr.Parameter, "Missing parameter: type"},
		{"unknown type", "x", "microsoft", localParams(ca), apierr.Parameter, "connector type : microsoft"},
		{"unreadable key path", "x", "local", with(localParams(ca), "cakey", filepath.Join(ca.Dir, "missing.key")), apierr.CA, "The file does not exist."},
		{"key is a directory", "x", "local", with(localParams(ca), "cakey", ca.Dir), apierr.CA, "not a regular file"},
		{"missing cacert", "x", "local", with(localParams(ca), "cacert", ""), apierr.CA, "required argument 'cacert' is missing."},
		{"key of another CA", "x", "local", with(localParams(ca), "cakey", catest.New(t, "Other").KeyPath), apierr.CA, "does not belong to the CA certificate"},
		{"relative path without WorkingDir", "x", "local", with(with(localParams(ca), "WorkingDir", ""), "templates", "t.yaml"), apierr.CA, "absolute path"},
		{"bad CRL validity", "x", "local", with(localParams(ca), "CRL_Validity_Period", "ten"), apierr.Parameter, "CRL_Validity_Period"},
		{"overlap longer than validity", "x", "local", with(localParams(ca), "CRL_Overlap_Period", "20"), apierr.Parameter, "shorter"},
		{"CRL directory missing", "x", "local", with(localParams(ca), "CRL", "/nonexistent-dir/crl.pem"), apierr.CA, "does not exist"},
		{"CRL in /proc", "x", "local", with(localParams(ca), "CRL", "/proc/crl.pem"), apierr.CA, "/proc"},
		{"CRL over the CA key", "x", "local", with(localParams(ca), "CRL", "ca.key"), apierr.CA, "would be overwritten"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Set(ctx, tc.conn, tc.typ, tc.params)
			wantCode(t, err, tc.code, tc.text)
			if list, _ := s.List(ctx, ""); len(list) != 1 {
				t.Errorf("connectors after a refused Set: %d", len(list))
			}
		})
	}
	// A bad templates file is refused.
	bad := filepath.Join(ca.Dir, "bad.yaml")
	catest.Write(t, bad, []byte("user:\n    days: forever\n"))
	_, err = s.Set(ctx, "x", "local", with(localParams(ca), "templates", bad))
	wantCode(t, err, apierr.CA, "line 2: days")
	// The type of an existing connector does not change.
	if _, err := s.Delete(ctx, "nope"); !errors.Is(err, caconnector.ErrNotFound) {
		t.Errorf("Delete unknown = %v", err)
	}
	if id, err := s.Delete(ctx, "localca"); err != nil || id != 1 {
		t.Errorf("Delete = %d, %v", id, err)
	}
	if list, _ := s.List(ctx, ""); len(list) != 0 {
		t.Errorf("after delete: %v", list)
	}
	if _, err := s.SpecificOptions("local", map[string]string{"cakey": "/x"}); err == nil || !strings.Contains(err.Error(), "'cacert'") {
		t.Errorf("SpecificOptions without cacert = %v", err)
	}
	if v, err := s.SpecificOptions("local", map[string]string{"cakey": "/x", "cacert": "/y"}); err != nil || len(v) != 0 {
		t.Errorf("SpecificOptions = %v, %v", v, err)
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

func TestSign(t *testing.T) {
	ctx := t.Context()
	s, _, _ := newService(t)
	ca := catest.New(t, "Test CA")
	if _, err := s.Set(ctx, "localca", "local", localParams(ca)); err != nil {
		t.Fatal(err)
	}
	key := catest.ECKey(t, elliptic.P256())
	subject := pkix.Name{CommonName: "alice", Organization: []string{"Example"}, SerialNumber: "dropped", StreetAddress: []string{"dropped too"}}
	req := catest.Request(t, key, subject)

	issued, err := s.Sign(ctx, "localca", caconnector.SignRequest{CSR: req, Template: "web"})
	if err != nil {
		t.Fatal(err)
	}
	cert := catest.ParseCert(t, issued.PEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("the certificate does not verify against the CA: %v", err)
	}
	if cert.Subject.CommonName != "alice" || len(cert.Subject.Organization) != 1 || cert.Subject.SerialNumber != "" || len(cert.Subject.StreetAddress) != 0 {
		t.Errorf("subject = %v", cert.Subject)
	}
	if d := cert.NotAfter.Sub(cert.NotBefore); d != 10*24*time.Hour {
		t.Errorf("validity = %v; want the template's 10 days", d)
	}
	if cert.IsCA || cert.SerialNumber.BitLen() > 128 || cert.SerialNumber.BitLen() < 64 {
		t.Errorf("IsCA %v, serial of %d bits", cert.IsCA, cert.SerialNumber.BitLen())
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		t.Error("the certificate is not of the request's key")
	}
	// Without a template: 365 days and the server extensions.
	noTpl, err := s.Sign(ctx, "localca", caconnector.SignRequest{CSR: strings.ReplaceAll(req, "\n", "")})
	if err != nil {
		t.Fatalf("a request without line breaks: %v", err)
	}
	if c := catest.ParseCert(t, noTpl.PEM); c.NotAfter.Sub(c.NotBefore) != 365*24*time.Hour || len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("default template: %v, %v", c.NotAfter.Sub(c.NotBefore), c.ExtKeyUsage)
	}
	if c := catest.ParseCert(t, noTpl.PEM); c.SerialNumber.Cmp(cert.SerialNumber) == 0 {
		t.Error("two certificates with one serial")
	}

	rsa1024, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  caconnector.SignRequest
		conn string
		code apierr.Code
		text string
	}{
		{"bad signature", caconnector.SignRequest{CSR: catest.BadSignature(t, req)}, "localca", apierr.Generic, "request has invalid signature."},
		{"RSA 1024", caconnector.SignRequest{CSR: catest.Request(t, rsa1024, pkix.Name{CommonName: "bob"})}, "localca", apierr.CA, "RSA keys of 2048 to 8192 bits"},
		{"P-521", caconnector.SignRequest{CSR: catest.Request(t, catest.ECKey(t, elliptic.P521()), pkix.Name{CommonName: "bob"})}, "localca", apierr.CA, "P-256 or P-384"},
		{"no common name", caconnector.SignRequest{CSR: catest.Request(t, key, pkix.Name{Organization: []string{"x"}})}, "localca", apierr.CA, "no common name"},
		{"not a request", caconnector.SignRequest{CSR: "hello"}, "localca", apierr.Generic, "not a PEM certificate request"},
		{"unknown template", caconnector.SignRequest{CSR: req, Template: "nope"}, "localca", apierr.CA, "template nope is not defined"},
		{"unknown CA", caconnector.SignRequest{CSR: req}, "other", apierr.ResourceNotFound, "could not be found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Sign(ctx, tc.conn, tc.req)
			wantCode(t, err, tc.code, tc.text)
		})
	}
}

func TestRevocationAndCRL(t *testing.T) {
	ctx := t.Context()
	s, st, clk := newService(t)
	ca := catest.New(t, "Test CA")
	params := localParams(ca)
	if _, err := s.Set(ctx, "localca", "local", params); err != nil {
		t.Fatal(err)
	}
	crlPath := params["CRL"]
	issued, err := s.Sign(ctx, "localca", caconnector.SignRequest{CSR: catest.Request(t, catest.ECKey(t, elliptic.P256()), pkix.Name{CommonName: "alice"})})
	if err != nil {
		t.Fatal(err)
	}
	// The first CRL is empty.
	path, wrote, err := s.CreateCRL(ctx, "localca", false)
	if err != nil || !wrote || path != crlPath {
		t.Fatalf("CreateCRL = %q, %v, %v", path, wrote, err)
	}
	crl := ca.ReadCRL(t, crlPath)
	if len(crl.RevokedCertificateEntries) != 0 || crl.Number.Int64() != 1 {
		t.Errorf("first CRL: %d entries, number %v", len(crl.RevokedCertificateEntries), crl.Number)
	}
	if d := crl.NextUpdate.Sub(crl.ThisUpdate); d != 10*24*time.Hour {
		t.Errorf("CRL validity = %v; want 10 days", d)
	}
	// Nothing new: no CRL is written.
	if _, wrote, err := s.CreateCRL(ctx, "localca", false); err != nil || wrote {
		t.Errorf("CreateCRL without change = %v, %v", wrote, err)
	}

	// A certificate of another CA is not revoked here.
	other := catest.New(t, "Other CA")
	foreign := catest.WithKey(t, "x", catest.ECKey(t, elliptic.P256()), 0)
	_ = other
	err = st.Update(ctx, func(tx store.Tx) error { return s.RevokeTx(tx, "localca", pemOf(foreign.Cert), "CRT1") })
	wantCode(t, err, apierr.CA, "not issued by the CA")
	err = st.Update(ctx, func(tx store.Tx) error { return s.RevokeTx(tx, "nope", issued.PEM, "CRT1") })
	wantCode(t, err, apierr.CA, "does not exist")

	for range 2 { // twice: revoking again changes nothing
		if err := st.Update(ctx, func(tx store.Tx) error { return s.RevokeTx(tx, "localca", issued.PEM, "CRT1") }); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := s.RevokedSerials(ctx, "localca"); err != nil || len(l) != 1 || l[0] != issued.Certificate.SerialNumber.Text(16) {
		t.Errorf("revoked serials = %v, %v", l, err)
	}
	// After a revocation the CRL is written again and lists the serial.
	s.Revoked(ctx, "localca")
	crl = ca.ReadCRL(t, crlPath)
	if !catest.Listed(crl, issued.Certificate.SerialNumber) || len(crl.RevokedCertificateEntries) != 1 || crl.Number.Int64() != 2 {
		t.Errorf("CRL after the revocation: %v (number %v)", crl.RevokedCertificateEntries, crl.Number)
	}
	// Within the overlap period (2 days before the next update) it is
	// written again, still listing the serial.
	clk.t = clk.t.Add(7 * 24 * time.Hour)
	if _, wrote, err := s.CreateCRL(ctx, "localca", false); err != nil || wrote {
		t.Errorf("CreateCRL before the overlap = %v, %v", wrote, err)
	}
	clk.t = clk.t.Add(25 * time.Hour)
	s.RefreshCRLs(ctx)
	crl = ca.ReadCRL(t, crlPath)
	if crl.Number.Int64() != 3 || !catest.Listed(crl, issued.Certificate.SerialNumber) || !crl.ThisUpdate.Equal(clk.t.UTC().Truncate(time.Second)) {
		t.Errorf("CRL in the overlap period: number %v, this update %v", crl.Number, crl.ThisUpdate)
	}
	// Re-creating the connector keeps the CA's revocations.
	if _, err := s.Delete(ctx, "localca"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Set(ctx, "again", "local", params); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateCRL(ctx, "again", true); err != nil {
		t.Fatal(err)
	}
	if crl = ca.ReadCRL(t, crlPath); !catest.Listed(crl, issued.Certificate.SerialNumber) || crl.Number.Int64() != 4 {
		t.Errorf("CRL of the re-created connector: number %v", crl.Number)
	}
}

func TestCANoKeyUsage(t *testing.T) {
	// A CA certificate without a key usage extension (openssl's v3_ca)
	// signs certificates and CRLs.
	ctx := t.Context()
	s, _, _ := newService(t)
	ca := catest.WithKey(t, "Plain CA", catest.ECKey(t, elliptic.P384()), 0)
	if _, err := s.Set(ctx, "plain", "local", localParams(ca)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateCRL(ctx, "plain", true); err != nil {
		t.Fatal(err)
	}
	ca.ReadCRL(t, filepath.Join(ca.Dir, "crl.pem"))
	// One whose key usage forbids signing is refused.
	noSign := catest.WithKey(t, "No sign", catest.ECKey(t, elliptic.P256()), x509.KeyUsageDigitalSignature)
	_, err := s.Set(ctx, "nosign", "local", localParams(noSign))
	wantCode(t, err, apierr.CA, "keyCertSign")
}

func TestParseTemplates(t *testing.T) {
	got, err := caconnector.ParseTemplates(templates)
	if err != nil {
		t.Fatal(err)
	}
	if w := got["web"]; w.Days != 10 || w.Extensions != "server" || strings.Join(w.ExtKeyUsage, ",") != "serverAuth,clientAuth" {
		t.Errorf("web = %+v", w)
	}
	for _, bad := range []string{
		"user:\n    dayz: 3\n", "  days: 3\n", "user:\n    extensions: nope\n", "user: 3\n",
		"user:\n    key_usage: sign\n", "a:\nb:\na:\n", "user\n",
	} {
		if _, err := caconnector.ParseTemplates(bad); err == nil {
			t.Errorf("ParseTemplates(%q) accepted", bad)
		}
	}
}

func TestEncodePKCS12(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed: the PKCS#12 file is not read back")
	}
	ca := catest.New(t, "Test CA")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p12, err := caconnector.EncodePKCS12(rand.Reader, key, ca.Cert, "s3cret pässword")
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "t.p12")
	catest.Write(t, f, p12)
	out, err := exec.CommandContext(t.Context(), openssl, "pkcs12", "-in", f, "-passin", "pass:s3cret pässword", "-nodes").CombinedOutput()
	if err != nil {
		t.Fatalf("openssl pkcs12: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "BEGIN CERTIFICATE") || !strings.Contains(string(out), "PRIVATE KEY") || !strings.Contains(string(out), "friendlyName: certificatetoken") {
		t.Errorf("openssl output:\n%s", out)
	}
	if out, err := exec.CommandContext(context.Background(), openssl, "pkcs12", "-in", f, "-passin", "pass:wrong", "-nodes").CombinedOutput(); err == nil {
		t.Errorf("a wrong password was accepted:\n%s", out)
	}
	if _, err := caconnector.EncodePKCS12(rand.Reader, key, ca.Cert, ""); err == nil {
		t.Error("an empty password was accepted")
	}
}

func pemOf(c *x509.Certificate) string {
	return "-----BEGIN CERTIFICATE-----\n" + b64(c.Raw) + "\n-----END CERTIFICATE-----\n"
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
