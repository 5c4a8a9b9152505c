package caconnector

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

const (
	revokedSchema = 1
	crlSchema     = 1
)

// revokedRecord is one revoked certificate of a CA, keyed by the issuer
// id and the serial in hex.
type revokedRecord struct {
	store.Versioned
	Serial    string    `json:"serial"`
	RevokedAt time.Time `json:"revoked_at"`
	Token     string    `json:"token,omitempty"`
}

// crlRecord is the CRL state of a CA: the last CRL number, the
// revocations counted so far and those the last written CRL holds, and
// that CRL's next update.
type crlRecord struct {
	store.Versioned
	Number      int64     `json:"number"`
	Revocations int64     `json:"revocations"`
	Included    int64     `json:"included"`
	NextUpdate  time.Time `json:"next_update"`
}

func revokedKey(issuer, serialHex string) []byte { return []byte(issuer + "/" + serialHex) }

// leafIssuer is the issuer id of a certificate (issuerID of its issuer).
func leafIssuer(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawIssuer)
	return hex.EncodeToString(sum[:16])
}

// RevokeTx records in tx that the certificate certPEM (of the token
// tokenSerial) is revoked by the CA connector name, so that the next CRL
// lists it. The certificate must have been issued by that CA. Revoking a
// certificate twice changes nothing.
func (s *Service) RevokeTx(tx store.Tx, name, certPEM, tokenSerial string) error {
	var rec defRecord
	if err := store.GetJSON(tx.Bucket(bucketDefs), key(name), &rec); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierr.Newf(apierr.CA, "The CA connector %s of the certificate does not exist; the certificate cannot be revoked.", name)
		}
		return err
	}
	cert, err := parseCertPEM([]byte(certPEM))
	if err != nil {
		return apierr.New(apierr.CA, "The certificate of the token does not parse; it cannot be revoked.")
	}
	if leafIssuer(cert) != rec.Issuer {
		return apierr.Newf(apierr.CA, "The certificate was not issued by the CA of the CA connector %s; it cannot be revoked there.", rec.Name)
	}
	k := revokedKey(rec.Issuer, cert.SerialNumber.Text(16))
	b := tx.Bucket(bucketRevoked)
	if b.Get(k) != nil {
		return nil
	}
	if err := store.PutJSON(b, k, revokedRecord{Versioned: store.Versioned{Schema: revokedSchema},
		Serial: cert.SerialNumber.Text(16), RevokedAt: s.cfg.Now().UTC(), Token: tokenSerial}); err != nil {
		return err
	}
	var st crlRecord
	cb := tx.Bucket(bucketCRL)
	if err := store.GetJSON(cb, []byte(rec.Issuer), &st); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	st.Schema = crlSchema
	st.Revocations++
	return store.PutJSON(cb, []byte(rec.Issuer), st)
}

// RevokedSerials lists the revoked serials (hex) of the CA of the
// connector name.
func (s *Service) RevokedSerials(ctx context.Context, name string) ([]string, error) {
	rec, err := s.get(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []string
	err = s.cfg.Store.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		return tx.Bucket(bucketRevoked).ForEach([]byte(rec.Issuer+"/"), func(k, _ []byte) error {
			_, serial, _ := strings.Cut(string(k), "/")
			out = append(out, serial)
			return nil
		})
	})
	return out, err
}

// CreateCRL writes the CRL of the CA connector name to its CRL file when
// a certificate was revoked since the last one, when the last one is
// within the overlap period of its next update (or missing), or always
// with force. It returns the file and whether it wrote it. The CRL lists
// every revoked certificate of the CA, is valid for the CRL validity
// period, and is replaced atomically.
func (s *Service) CreateCRL(ctx context.Context, name string, force bool) (string, bool, error) {
	s.crlMu.Lock()
	defer s.crlMu.Unlock()
	rec, err := s.get(ctx, name)
	if err != nil {
		return "", false, err
	}
	ca, err := s.load(rec.Data)
	if err != nil {
		return "", false, err
	}
	if ca.crlPath == "" {
		return "", false, caErr("The CA connector %s has no CRL file: set %s (or %s).", rec.Name, KeyCRL, KeyWorkingDir)
	}
	issuer := *ca.cert
	switch {
	case issuer.KeyUsage == 0:
		// No key usage extension: the key is not restricted (RFC 5280).
		issuer.KeyUsage = x509.KeyUsageCRLSign
	case issuer.KeyUsage&x509.KeyUsageCRLSign == 0:
		return "", false, caErr("The CA certificate of %s may not sign CRLs (its key usage lacks cRLSign).", rec.Name)
	}
	now := s.cfg.Now().UTC().Truncate(time.Second)
	var st crlRecord
	if err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		err := store.GetJSON(tx.Bucket(bucketCRL), []byte(ca.issuer), &st)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}); err != nil {
		return "", false, err
	}
	if !force && st.Included >= st.Revocations && now.Add(ca.overlap).Before(st.NextUpdate) {
		if _, err := os.Stat(ca.crlPath); err == nil {
			return ca.crlPath, false, nil
		}
	}
	var number, revs int64
	var entries []x509.RevocationListEntry
	if err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		entries = entries[:0]
		cb := tx.Bucket(bucketCRL)
		var cur crlRecord
		if err := store.GetJSON(cb, []byte(ca.issuer), &cur); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		cur.Schema = crlSchema
		cur.Number++
		number, revs = cur.Number, cur.Revocations
		b := tx.Bucket(bucketRevoked)
		if err := b.ForEach([]byte(ca.issuer+"/"), func(k, _ []byte) error {
			var r revokedRecord
			if err := store.GetJSON(b, k, &r); err != nil {
				return err
			}
			n, ok := new(big.Int).SetString(r.Serial, 16)
			if !ok {
				return fmt.Errorf("caconnector: bad revoked serial %q", r.Serial)
			}
			entries = append(entries, x509.RevocationListEntry{SerialNumber: n, RevocationTime: r.RevokedAt})
			return nil
		}); err != nil {
			return err
		}
		return store.PutJSON(cb, []byte(ca.issuer), cur)
	}); err != nil {
		return "", false, err
	}
	next := now.Add(ca.validity)
	rnd := s.cfg.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	der, err := x509.CreateRevocationList(rnd, &x509.RevocationList{
		Number: big.NewInt(number), ThisUpdate: now, NextUpdate: next, RevokedCertificateEntries: entries,
	}, &issuer, ca.key)
	if err != nil {
		return "", false, fmt.Errorf("caconnector %s: CRL: %w", rec.Name, err)
	}
	if err := writeAtomic(ca.crlPath, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})); err != nil {
		return "", false, caErr("The CRL file %s cannot be written.", ca.crlPath)
	}
	err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		cb := tx.Bucket(bucketCRL)
		var cur crlRecord
		if err := store.GetJSON(cb, []byte(ca.issuer), &cur); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		cur.Schema = crlSchema
		cur.Included = max(cur.Included, revs)
		if next.After(cur.NextUpdate) {
			cur.NextUpdate = next
		}
		return store.PutJSON(cb, []byte(ca.issuer), cur)
	})
	return ca.crlPath, err == nil, err
}

// RefreshCRLs runs CreateCRL (without force) for every local CA that has
// a CRL file; a failure is logged and the others go on.
func (s *Service) RefreshCRLs(ctx context.Context) {
	list, err := s.List(ctx, "")
	if err != nil {
		s.cfg.Log.Warn().Err(err).Str("component", "caconnector").Msg("listing the CA connectors for their CRLs")
		return
	}
	for _, d := range list {
		if d.Type != TypeLocal || (d.Data[KeyCRL] == "" && d.Data[KeyWorkingDir] == "") {
			continue
		}
		s.refresh(ctx, d.Name)
	}
}

// Revoked regenerates the CRL of the connector name after a revocation
// committed (a failure is logged; RefreshCRLs retries it).
func (s *Service) Revoked(ctx context.Context, name string) { s.refresh(ctx, name) }

func (s *Service) refresh(ctx context.Context, name string) {
	path, wrote, err := s.CreateCRL(ctx, name, false)
	if err != nil {
		msg := err.Error()
		if _, _, m, _, internal := apierr.Wire(err); !internal {
			msg = m
		}
		s.cfg.Log.Error().Str("component", "caconnector").Str("caconnector", name).Str("error", msg).Msg("the CRL could not be written")
		return
	}
	if wrote {
		s.cfg.Log.Info().Str("component", "caconnector").Str("caconnector", name).Str("crl", path).Msg("CRL written")
	}
}

// Run keeps the CRLs fresh until ctx ends: every interval it regenerates
// those within their overlap period or with new revocations.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 10 * time.Minute
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.RefreshCRLs(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
