// Package catest makes certificate authorities and certificate requests
// with Go's crypto/x509 for the tests of the CA connectors and the
// certificate token. It imports only the standard library.
package catest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a CA key and certificate written to files.
type CA struct {
	Key      crypto.Signer
	Cert     *x509.Certificate
	KeyPath  string
	CertPath string
	Dir      string
}

// Pool is a certificate pool holding the CA certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// New makes an ECDSA P-256 CA with key usage keyCertSign and cRLSign,
// valid for ten years, and writes ca.key and ca.crt (PEM) in a new
// temporary directory.
func New(t testing.TB, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return WithKey(t, cn, key, x509.KeyUsageCertSign|x509.KeyUsageCRLSign)
}

// WithKey makes a CA of key with the key usage ku (0: no key usage
// extension).
func WithKey(t testing.TB, cn string, key crypto.Signer, ku x509.KeyUsage) *CA {
	t.Helper()
	now := time.Now()
	tpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"authsrv tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              ku,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := &CA{Key: key, Cert: cert, Dir: dir, KeyPath: filepath.Join(dir, "ca.key"), CertPath: filepath.Join(dir, "ca.crt")}
	p8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	Write(t, ca.KeyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}))
	Write(t, ca.CertPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

// Write writes a file (mode 0600).
func Write(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Request is a PEM certificate request of key for subject.
func Request(t testing.TB, key crypto.Signer, subject pkix.Name) string {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

// ECKey is a new ECDSA key on curve.
func ECKey(t testing.TB, curve elliptic.Curve) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// BadSignature returns the PEM request req with a flipped bit in its
// signature.
func BadSignature(t testing.TB, req string) string {
	t.Helper()
	blk, _ := pem.Decode([]byte(req))
	if blk == nil {
		t.Fatal("no PEM request")
	}
	b := append([]byte(nil), blk.Bytes...)
	b[len(b)-3] ^= 0x01
	return string(pem.EncodeToMemory(&pem.Block{Type: blk.Type, Bytes: b}))
}

// ParseCert parses a PEM certificate.
func ParseCert(t testing.TB, s string) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode([]byte(s))
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", s)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ReadCRL reads and parses the PEM CRL file path and checks that the CA
// signed it.
func (ca *CA) ReadCRL(t testing.TB, path string) *x509.RevocationList {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "X509 CRL" {
		t.Fatalf("%s is not a PEM CRL", path)
	}
	crl, err := x509.ParseRevocationList(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := crl.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatalf("the CRL is not signed by the CA: %v", err)
	}
	return crl
}

// Listed reports whether the CRL lists serial.
func Listed(crl *x509.RevocationList, serial *big.Int) bool {
	for _, e := range crl.RevokedCertificateEntries {
		if e.SerialNumber.Cmp(serial) == 0 {
			return true
		}
	}
	return false
}
