package caconnector

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
)

// maxFile bounds the files a definition names.
const maxFile = 1 << 20

// localCA is a loaded local CA.
type localCA struct {
	key       crypto.Signer
	cert      *x509.Certificate
	issuer    string
	templates map[string]Template
	// crlPath is "" when neither CRL nor WorkingDir is set.
	crlPath  string
	validity time.Duration
	overlap  time.Duration
}

func caErr(format string, args ...any) error { return apierr.Newf(apierr.CA, format, args...) }

// resolvePath makes p absolute: relative names are beneath WorkingDir, as
// privacyIDEA resolves them; without a WorkingDir a name must be absolute.
func resolvePath(data map[string]string, p string) (string, error) {
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	if wd := data[KeyWorkingDir]; wd != "" && filepath.IsAbs(wd) {
		return filepath.Join(wd, p), nil
	}
	return "", fileroot.ErrNotAbsolute
}

// issuerID identifies a CA by its certificate's subject.
func issuerID(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubject)
	return hex.EncodeToString(sum[:16])
}

// readFile reads the file the key k names, through the confinement.
func (s *Service) readFile(data map[string]string, k string) ([]byte, error) {
	p := data[k]
	if p == "" {
		return nil, caErr("required argument '%s' is missing.", k)
	}
	path, err := resolvePath(data, p)
	if err == nil {
		var b []byte
		if b, err = s.cfg.Files.ReadFile(path, maxFile); err == nil {
			return b, nil
		}
	}
	return nil, caErr("The file of %s (%s) cannot be used: %s", k, p, fileroot.Describe(err, p))
}

// load reads and checks the local CA a configuration describes.
func (s *Service) load(data map[string]string) (*localCA, error) {
	if wd := data[KeyWorkingDir]; wd != "" && !filepath.IsAbs(wd) {
		return nil, caErr("The %s must be an absolute path.", KeyWorkingDir)
	}
	certPEM, err := s.readFile(data, KeyCACert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := s.readFile(data, KeyCAKey)
	if err != nil {
		return nil, err
	}
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return nil, caErr("The CA certificate %s is not a PEM certificate.", data[KeyCACert])
	}
	if cert.BasicConstraintsValid && !cert.IsCA {
		return nil, caErr("The certificate %s is not a CA certificate (basic constraints CA:FALSE).", data[KeyCACert])
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, caErr("The CA certificate %s may not sign certificates (its key usage lacks keyCertSign).", data[KeyCACert])
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, caErr("The CA key %s cannot be used: %v", data[KeyCAKey], err)
	}
	if !samePublicKey(key.Public(), cert.PublicKey) {
		return nil, caErr("The CA key %s does not belong to the CA certificate %s.", data[KeyCAKey], data[KeyCACert])
	}
	ca := &localCA{key: key, cert: cert, issuer: issuerID(cert)}
	if ca.validity, err = days(data, KeyCRLValidity, DefaultCRLValidityDays, 1); err != nil {
		return nil, err
	}
	if ca.overlap, err = days(data, KeyCRLOverlap, DefaultCRLOverlapDays, 0); err != nil {
		return nil, err
	}
	if ca.overlap >= ca.validity {
		return nil, apierr.Newf(apierr.Parameter, "The %s must be shorter than the %s.", KeyCRLOverlap, KeyCRLValidity)
	}
	if p := data[KeyTemplates]; p != "" {
		path, err := resolvePath(data, p)
		if err != nil {
			return nil, caErr("The templates file %s cannot be used: %s", p, fileroot.Describe(err, p))
		}
		if ca.templates, err = s.readTemplates(path); err != nil {
			return nil, err
		}
	}
	if p := data[KeyCRL]; p != "" || data[KeyWorkingDir] != "" {
		if p == "" {
			p = DefaultCRLFile
		}
		path, err := resolvePath(data, p)
		if err == nil {
			err = s.cfg.Files.CheckName(path)
		}
		if err != nil {
			return nil, caErr("The CRL file %s cannot be written there: %s", p, fileroot.Describe(err, p))
		}
		for _, k := range []string{KeyCAKey, KeyCACert, KeyTemplates} {
			if other, err := resolvePath(data, data[k]); err == nil && data[k] != "" && sameFile(other, path) {
				return nil, caErr("The CRL file %s is the %s file; it would be overwritten.", p, k)
			}
		}
		if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
			return nil, caErr("The directory of the CRL file %s does not exist.", p)
		}
		if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
			return nil, caErr("The CRL file %s is not a regular file.", p)
		}
		if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCRLSign == 0 {
			return nil, caErr("The CA certificate %s may not sign CRLs (its key usage lacks cRLSign); leave %s and %s unset.", data[KeyCACert], KeyCRL, KeyWorkingDir)
		}
		ca.crlPath = path
	}
	return ca, nil
}

// sameFile reports whether a and b name one file (by name, or by what
// they resolve to when both exist).
func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// days reads a whole number of days (at least minimum, at most ten years).
func days(data map[string]string, k string, def, minimum int) (time.Duration, error) {
	n := def
	if v := strings.TrimSpace(data[k]); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < minimum || n > 3650 {
			return 0, apierr.Newf(apierr.Parameter, "The %s must be a whole number of days from %d to 3650.", k, minimum)
		}
	}
	return time.Duration(n) * 24 * time.Hour, nil
}

func parseCertPEM(b []byte) (*x509.Certificate, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no certificate")
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

// parseKeyPEM reads an unencrypted RSA or ECDSA private key (PKCS#1, SEC 1
// or PKCS#8).
func parseKeyPEM(b []byte) (crypto.Signer, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("the file holds no PEM private key")
		}
		if !strings.Contains(blk.Type, "PRIVATE KEY") {
			continue
		}
		if blk.Type == "ENCRYPTED PRIVATE KEY" || blk.Headers["Proc-Type"] != "" {
			return nil, errors.New("the private key is encrypted; give an unencrypted key file readable only by the server")
		}
		var k any
		var err error
		switch blk.Type {
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(blk.Bytes)
		default:
			k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		}
		if err != nil {
			return nil, errors.New("the private key does not parse")
		}
		switch k := k.(type) {
		case *rsa.PrivateKey:
			return k, nil
		case *ecdsa.PrivateKey:
			return k, nil
		case ed25519.PrivateKey:
			return k, nil
		}
		return nil, errors.New("the private key is of an unsupported type")
	}
}

func samePublicKey(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// checkKey applies the key rule of requests: RSA of 2048 to 8192 bits, or
// ECDSA on P-256 or P-384.
func checkKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n >= 2048 && n <= 8192 {
			return nil
		}
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
	}
	return apierr.New(apierr.CA, "The key of the certificate request is not allowed: only RSA keys of 2048 to 8192 bits and ECDSA keys on P-256 or P-384 are accepted.")
}

// ParseRequest reads a PEM certificate request (the PEM armour and line
// breaks may be missing, as privacyIDEA accepts) and checks its signature.
func ParseRequest(s string) (*x509.CertificateRequest, error) {
	s = strings.TrimSpace(s)
	var der []byte
	if blk, _ := pem.Decode([]byte(s)); blk != nil {
		if blk.Type != "CERTIFICATE REQUEST" && blk.Type != "NEW CERTIFICATE REQUEST" {
			return nil, apierr.New(apierr.Generic, "The request is not a PEM certificate request.")
		}
		der = blk.Bytes
	} else {
		body := s
		body = strings.TrimPrefix(body, "-----BEGIN CERTIFICATE REQUEST-----")
		body = strings.TrimSuffix(body, "-----END CERTIFICATE REQUEST-----")
		body = strings.Join(strings.Fields(body), "")
		var err error
		if der, err = base64.StdEncoding.DecodeString(body); err != nil {
			return nil, apierr.New(apierr.Generic, "The request is not a PEM certificate request.")
		}
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, apierr.New(apierr.Generic, "The request is not a valid certificate request.")
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, apierr.New(apierr.Generic, "request has invalid signature.")
	}
	return csr, nil
}

// The subject attributes a local CA keeps (openssl's policy_anything, in
// its order); others are dropped and the common name is required.
var (
	oidCountry  = asn1.ObjectIdentifier{2, 5, 4, 6}
	oidState    = asn1.ObjectIdentifier{2, 5, 4, 8}
	oidLocality = asn1.ObjectIdentifier{2, 5, 4, 7}
	oidOrg      = asn1.ObjectIdentifier{2, 5, 4, 10}
	oidOrgUnit  = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidCN       = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidEmail    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
)

var subjectPolicy = []asn1.ObjectIdentifier{oidCountry, oidState, oidLocality, oidOrg, oidOrgUnit, oidCN, oidEmail}

// subject builds the certificate subject from the request's.
func subject(csr *x509.CertificateRequest) ([]byte, error) {
	var rdns pkix.RDNSequence
	if _, err := asn1.Unmarshal(csr.RawSubject, &rdns); err != nil {
		return nil, apierr.New(apierr.CA, "The subject of the certificate request does not parse.")
	}
	var out pkix.RDNSequence
	hasCN := false
	for _, oid := range subjectPolicy {
		for _, rdn := range rdns {
			for _, atv := range rdn {
				if !atv.Type.Equal(oid) {
					continue
				}
				if s, ok := atv.Value.(string); !ok || strings.TrimSpace(s) == "" || len(s) > 256 {
					continue
				}
				if oid.Equal(oidCN) {
					hasCN = true
				}
				out = append(out, pkix.RelativeDistinguishedNameSET{atv})
			}
		}
	}
	if !hasCN {
		return nil, apierr.New(apierr.CA, "The certificate request has no common name (CN) in its subject.")
	}
	return asn1.Marshal(out)
}

// SignRequest is a certificate request for a local CA.
type SignRequest struct {
	// CSR is the PEM certificate request.
	CSR string
	// Template names a template of the CA's templates file ("": the
	// defaults, 365 days and the server extensions).
	Template string
}

// Issued is a certificate a CA issued.
type Issued struct {
	Certificate *x509.Certificate
	// PEM is the certificate in PEM.
	PEM string
}

// Sign signs the request with the CA connector name: the request's
// signature and key are checked, the subject keeps the attributes of
// openssl's policy_anything (the common name is required), the serial is
// random (128 bits), validity and extensions come from the template.
func (s *Service) Sign(ctx context.Context, name string, req SignRequest) (*Issued, error) {
	csr, err := ParseRequest(req.CSR)
	if err != nil {
		return nil, err
	}
	if err := checkKey(csr.PublicKey); err != nil {
		return nil, err
	}
	rec, err := s.get(ctx, name)
	if err != nil {
		return nil, err
	}
	ca, err := s.load(rec.Data)
	if err != nil {
		return nil, err
	}
	tpl := Template{Days: DefaultCertDays, Extensions: "server"}
	if req.Template != "" {
		t, ok := ca.templates[req.Template]
		if !ok {
			return nil, apierr.Newf(apierr.CA, "The template %s is not defined for the CA connector %s.", req.Template, rec.Name)
		}
		tpl = t
		if tpl.Days == 0 {
			tpl.Days = DefaultCertDays
		}
		if tpl.Extensions == "" {
			tpl.Extensions = "server"
		}
	}
	raw, err := subject(csr)
	if err != nil {
		return nil, err
	}
	rnd := s.cfg.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	serial, err := randomSerial(rnd)
	if err != nil {
		return nil, err
	}
	spki, err := x509.MarshalPKIXPublicKey(csr.PublicKey)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now().UTC().Truncate(time.Second)
	cert := &x509.Certificate{
		SerialNumber:          serial,
		RawSubject:            raw,
		NotBefore:             now,
		NotAfter:              now.AddDate(0, 0, tpl.Days),
		BasicConstraintsValid: true,
		SubjectKeyId:          keyID(spki),
	}
	tpl.apply(cert)
	der, err := x509.CreateCertificate(rnd, cert, ca.cert, csr.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("caconnector %s: sign: %w", rec.Name, err)
	}
	out, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Issued{Certificate: out, PEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}, nil
}

// randomSerial is a positive random 128-bit serial number.
func randomSerial(r io.Reader) (*big.Int, error) {
	b := make([]byte, 16)
	for {
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		if n := new(big.Int).SetBytes(b); n.Sign() > 0 {
			return n, nil
		}
	}
}

// keyID is the subject key identifier of a public key (RFC 5280 4.2.1.2,
// method 1: SHA-1 of the subjectPublicKey bits).
func keyID(spki []byte) []byte {
	var info struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(spki, &info); err != nil {
		return nil
	}
	sum := sha1.Sum(info.PublicKey.Bytes)
	return sum[:]
}

// Certificate returns the CA certificate of the connector name.
func (s *Service) Certificate(ctx context.Context, name string) (*x509.Certificate, error) {
	rec, err := s.get(ctx, name)
	if err != nil {
		return nil, err
	}
	b, err := s.readFile(rec.Data, KeyCACert)
	if err != nil {
		return nil, err
	}
	return parseCertPEM(b)
}

// writeAtomic writes b to path through a temporary file in its directory
// and a rename, so that readers see the old or the new file whole.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".crl-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() { _ = os.Remove(tmp) }()
	if _, err := io.Copy(f, bytes.NewReader(b)); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return fs.ErrInvalid
	}
	return os.Rename(tmp, path)
}
