package token

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caconnector"
	"github.com/authsrv/authsrv/store"
)

// Certificate is the X.509 certificate token type "certificate" (prefix
// CRT), privacyIDEA's certificate token. It holds a certificate in its
// tokeninfo and never authenticates with an OTP. A certificate is
// enrolled in one of three ways:
//
//   - request (a PEM certificate request) with ca (a CA connector) and
//     optionally template: the CA signs the request;
//   - genkey=1 with ca (and a user): the server makes an RSA key pair
//     (keysize, default and minimum 2048, at most 4096) and a request
//     with the user's login as common name (subject_components "email"
//     and "realm" add the user's e-mail address and realm), the CA signs
//     it, and the key and certificate are returned once, in the detail,
//     as a PKCS#12 file (base64, "pkcs12") encrypted with the token PIN
//     given as "pin" or else with a random password that the detail
//     carries as "pkcs12_password". The private key is not stored;
//   - certificate (PEM): the certificate is stored as it is.
//
// Revoking the token revokes the certificate at its CA, and the CA's next
// CRL lists it (RevokeTx, Revoked).
type Certificate struct {
	// CAs are the CA connectors that sign and revoke; nil refuses
	// request and genkey.
	CAs *caconnector.Service
}

var (
	_ Type    = Certificate{}
	_ Revoker = Certificate{}
)

// Tokeninfo keys of the certificate token (privacyIDEA's).
const (
	InfoCertificate = "certificate"
	InfoCA          = "CA"
)

// Bounds of server-side key generation.
const (
	certMinKeySize = 2048
	certMaxKeySize = 4096
)

// Name implements Type.
func (Certificate) Name() string { return "certificate" }

// Prefix implements Type.
func (Certificate) Prefix() string { return "CRT" }

// Enroll implements Type (see Certificate).
func (c Certificate) Enroll(ctx context.Context, e *Enroll) error {
	p, t := e.Params, e.Token
	request, genkey, upload := strings.TrimSpace(p.Str("request")), p.Bool("genkey"), strings.TrimSpace(p.Str("certificate"))
	if p.Str("spkac") != "" {
		return apierr.New(apierr.CA, "SPKAC requests are not supported; send a PEM certificate request.")
	}
	var ca string
	if request != "" || genkey {
		if ca = strings.TrimSpace(p.Str("ca")); ca == "" {
			return apierr.MissingParameter("ca")
		}
		if c.CAs == nil {
			return apierr.New(apierr.CA, "No CA connectors are available to sign certificates.")
		}
	}
	var certPEM string
	switch {
	case request != "":
		issued, err := c.CAs.Sign(ctx, ca, caconnector.SignRequest{CSR: request, Template: p.Str("template")})
		if err != nil {
			return err
		}
		certPEM = issued.PEM
	case genkey:
		if e.Owner == nil || e.Owner.Login == "" {
			return apierr.MissingParameter("user")
		}
		size := certMinKeySize
		if v := strings.TrimSpace(p.Str("keysize")); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n > certMaxKeySize {
				return paramErr("The keysize must be a number of bits up to %d.", certMaxKeySize)
			}
			size = max(n, certMinKeySize)
		}
		rnd := e.Rand
		if rnd == nil {
			rnd = rand.Reader
		}
		key, err := rsa.GenerateKey(rnd, size)
		if err != nil {
			return err
		}
		csr, err := ownerRequest(rnd, key, e, strings.Fields(p.Str("subject_components")))
		if err != nil {
			return err
		}
		issued, err := c.CAs.Sign(ctx, ca, caconnector.SignRequest{CSR: csr, Template: p.Str("template")})
		if err != nil {
			return err
		}
		certPEM = issued.PEM
		password, own := p.Get("pin")
		if !own || password == "" {
			if password, err = randomPassword(rnd); err != nil {
				return err
			}
			e.Detail["pkcs12_password"] = password
		}
		p12, err := caconnector.EncodePKCS12(rnd, key, issued.Certificate, password)
		if err != nil {
			return err
		}
		e.Detail["pkcs12"] = base64.StdEncoding.EncodeToString(p12)
	case upload != "":
		blk, _ := pem.Decode([]byte(upload))
		if blk == nil || blk.Type != "CERTIFICATE" {
			return paramErr("The certificate must be a PEM certificate.")
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return paramErr("The certificate does not parse.")
		}
		certPEM = string(pem.EncodeToMemory(blk))
	default:
		return paramErr("A certificate token needs a request and a ca, genkey=1 and a ca, or a certificate.")
	}
	if ca != "" {
		t.SetInfo(InfoCA, ca)
	} else {
		delete(t.Info, InfoCA)
	}
	t.SetInfo(InfoCertificate, certPEM)
	e.Detail["certificate"] = certPEM
	return nil
}

// ownerRequest is the PEM request of a generated key for the token's
// owner: common name the login, plus the e-mail address and the realm
// when components name them (privacyIDEA's subject components).
func ownerRequest(rnd io.Reader, key *rsa.PrivateKey, e *Enroll, components []string) (string, error) {
	var name pkix.RDNSequence
	add := func(oid asn1.ObjectIdentifier, v string) {
		name = append(name, pkix.RelativeDistinguishedNameSET{{Type: oid, Value: v}})
	}
	if slices.Contains(components, "realm") && e.Owner.Realm != "" {
		add(asn1.ObjectIdentifier{2, 5, 4, 11}, e.Owner.Realm)
	}
	add(asn1.ObjectIdentifier{2, 5, 4, 3}, e.Owner.Login)
	if mail := e.OwnerInfo["email"]; slices.Contains(components, "email") && mail != "" {
		add(asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}, mail)
	}
	raw, err := asn1.Marshal(name)
	if err != nil {
		return "", err
	}
	der, err := x509.CreateCertificateRequest(rnd, &x509.CertificateRequest{RawSubject: raw}, key)
	if err != nil {
		return "", err
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), nil
}

// randomPassword is a random PKCS#12 password of 16 URL-safe characters
// (96 bits).
func randomPassword(rnd io.Reader) (string, error) {
	b := make([]byte, 12)
	if _, err := io.ReadFull(rnd, b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Check implements Type: a certificate token never matches an OTP.
func (Certificate) Check(ctx context.Context, c *Check) (Match, error) {
	return Match{Counter: -1}, nil
}

// NeverChallenges implements NeverChallenger: the type has no challenge.
func (Certificate) NeverChallenges() bool { return true }

// RevokeTx implements Revoker: the certificate is revoked at the CA that
// signed it, in the transaction that revokes the token. A certificate that
// was uploaded (no CA) has nothing to revoke.
func (c Certificate) RevokeTx(tx store.Tx, t *Token) error {
	ca, cert := t.Info[InfoCA], t.Info[InfoCertificate]
	if ca == "" || cert == "" {
		return nil
	}
	if c.CAs == nil {
		return apierr.New(apierr.CA, "No CA connectors are available to revoke the certificate.")
	}
	return c.CAs.RevokeTx(tx, ca, cert, t.Serial)
}

// Revoked implements Revoker: after the commit the CA writes its CRL.
func (c Certificate) Revoked(ctx context.Context, t *Token) {
	if ca := t.Info[InfoCA]; ca != "" && c.CAs != nil {
		c.CAs.Revoked(ctx, ca)
	}
}
