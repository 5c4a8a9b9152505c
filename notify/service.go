package notify

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/store"
)

// Censored stands in for a stored secret in reads; sent back in a write it
// keeps the stored value.
const Censored = "__CENSORED__"

const schema = 1

// Errors of the package.
var (
	// ErrSendFailed is the cause of every failed delivery (an SMTP server
	// or SMS gateway that refuses, errs or does not answer in time). The
	// error returned carries a short text of its own and wraps this
	// sentinel, so callers test it with errors.Is.
	ErrSendFailed = apierr.New(apierr.ConfigAdmin, "The message could not be sent.")

	// ErrSMTPNotFound is returned for an unknown SMTP server identifier.
	ErrSMTPNotFound = apierr.New(apierr.ResourceNotFound, "The requested SMTPServer could not be found.")
	// ErrGatewayNotFound is returned for an unknown SMS gateway.
	ErrGatewayNotFound = apierr.New(apierr.ResourceNotFound, "The requested SMSGateway could not be found.")
	// ErrRadiusNotFound is returned for an unknown RADIUS server identifier.
	ErrRadiusNotFound = apierr.New(apierr.ResourceNotFound, "The requested RADIUSServer could not be found.")
	// ErrRadiusSecretTooLong is privacyIDEA's ERR2234.
	ErrRadiusSecretTooLong = apierr.New(apierr.ConfigAdmin, "The RADIUS secret is too long").WithNumber(2234)
	// ErrScriptsDisabled is returned when the script SMS provider is used
	// but no script directory is configured.
	ErrScriptsDisabled = apierr.New(apierr.ConfigAdmin, "The script SMS provider is disabled: no script directory is configured.")
)

// Sealer seals and opens the secrets this package stores (AES-256-GCM with
// additional data binding each ciphertext to its record). The root passes
// its key set; the interface keeps the internal implementation out of this
// package's API.
type Sealer interface {
	Seal(plaintext []byte, ad ...string) ([]byte, error)
	Open(ciphertext []byte, ad ...string) ([]byte, error)
}

var _ Sealer = (*secret.Sealer)(nil)

// Config holds the dependencies of a Service.
type Config struct {
	Store  store.Store
	Sealer Sealer
	// Log is the component logger's parent; silent when zero.
	Log zerolog.Logger
	// Now is the clock (mail Date headers); time.Now when nil.
	Now func() time.Time
	// AllowScripts is the directory the script SMS provider may run
	// programs from; "" disables the script provider.
	AllowScripts string
	// Dial judges the resolved address of every outgoing connection
	// (SMTP, SMS HTTP and its proxies, RADIUS) before it is made. Nil is
	// netguard's safe default: loopback, link-local, private and the other
	// special ranges are refused.
	Dial *netguard.Policy
	// RootCAs verifies the certificates of SMTP servers (STARTTLS and
	// implicit TLS) and HTTPS SMS gateways; nil means the system pool.
	RootCAs *x509.CertPool
	// Files confines the S/MIME key and certificate files an SMTP server
	// definition names (checked when it is saved and at every read); the
	// root sets it from its file roots and data directory. The zero value
	// allows any regular file outside /proc, /sys and /dev.
	Files fileroot.Confinement
}

// Service manages the SMTP server, SMS gateway and RADIUS server
// definitions and sends through them. It is safe for concurrent use.
type Service struct {
	st      store.Store
	sealer  Sealer
	log     zerolog.Logger
	now     func() time.Time
	scripts string
	dial    *netguard.Policy
	roots   *x509.CertPool
	files   fileroot.Confinement
}

// New returns the service. It starts no goroutines.
func New(cfg Config) *Service {
	s := &Service{
		st:      cfg.Store,
		sealer:  cfg.Sealer,
		log:     cfg.Log.With().Str("component", "notify").Logger(),
		now:     cfg.Now,
		scripts: cfg.AllowScripts,
		dial:    cfg.Dial,
		roots:   cfg.RootCAs,
		files:   cfg.Files.Copy(),
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// paramErr is a Parameter error with a formatted text.
func paramErr(format string, args ...any) error {
	return apierr.New(apierr.Parameter, fmt.Sprintf(format, args...))
}

// sendErr builds the error of a failed delivery: text is shown, cause is
// kept hidden (it may hold the remote server's answer) and ErrSendFailed
// is in the chain.
func sendErr(text string, cause error) error {
	if cause == nil {
		return apierr.New(apierr.ConfigAdmin, text).Wrap(ErrSendFailed)
	}
	return apierr.New(apierr.ConfigAdmin, text).Wrap(errors.Join(ErrSendFailed, cause))
}

// hasCRLF reports whether s holds a line break (header injection).
func hasCRLF(s string) bool { return strings.ContainsAny(s, "\r\n") }

// hasControl reports whether s holds any control character.
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// validIdentifier checks the name of a definition: not empty, at most 128
// bytes, no control characters and no slash (it is a URL path segment).
func validIdentifier(kind, id string) error {
	switch {
	case strings.TrimSpace(id) == "":
		return apierr.MissingParameter("identifier")
	case len(id) > 128:
		return paramErr("The %s identifier is too long (at most 128 characters).", kind)
	case hasControl(id) || strings.ContainsRune(id, '/'):
		return paramErr("The %s identifier contains invalid characters.", kind)
	}
	return nil
}

// validHost checks a host name or IP address (IPv6 with or without
// brackets).
func validHost(h string) bool {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if h == "" || len(h) > 253 {
		return false
	}
	if strings.Contains(h, ":") { // IPv6
		_, err := netip.ParseAddr(h)
		return err == nil
	}
	for _, r := range h {
		if !((r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// hostOnly strips IPv6 brackets for dialing with net.JoinHostPort.
func hostOnly(h string) string { return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]") }

// seal seals v for (bucket, key, field); "" stays empty.
func (s *Service) seal(v, bucket, key, field string) ([]byte, error) {
	if v == "" {
		return nil, nil
	}
	return s.sealer.Seal([]byte(v), bucket, key, field)
}

// open opens a sealed value; nil opens to "".
func (s *Service) open(c []byte, bucket, key, field string) (string, error) {
	if c == nil {
		return "", nil
	}
	p, err := s.sealer.Open(c, bucket, key, field)
	if err != nil {
		return "", fmt.Errorf("%s %s: field %s: %w", bucket, key, field, err)
	}
	return string(p), nil
}

// timeoutSeconds applies a default to a timeout in seconds and checks its
// range (at most 60 s, below the HTTP server's write timeout).
func timeoutSeconds(name string, v, def int) (int, error) {
	if v == 0 {
		return def, nil
	}
	if v < 0 || v > 60 {
		return 0, paramErr("%s must be between 1 and 60 seconds.", name)
	}
	return v, nil
}

// listDefs decodes every record of bucket, converts each with def and
// returns them ordered by id.
func listDefs[R any, D any](ctx context.Context, st store.Store, bucket string, def func(R) D, id func(D) string) ([]D, error) {
	out := []D{}
	err := st.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		return tx.Bucket(bucket).ForEach(nil, func(_, v []byte) error {
			var rec R
			if err := json.Unmarshal(v, &rec); err != nil {
				return err
			}
			out = append(out, def(rec))
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b D) int { return strings.Compare(id(a), id(b)) })
	return out, nil
}

// deleteDef removes the record id of bucket, or answers notFound.
func deleteDef(ctx context.Context, st store.Store, bucket, id string, notFound error, also []func(store.Tx) error) error {
	return st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		if b.Get([]byte(id)) == nil {
			return notFound
		}
		if _, err := store.BumpConfigRevision(tx); err != nil {
			return err
		}
		if err := b.Delete([]byte(id)); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
}

// hostPort trims and checks a server's host and port (def when 0).
func hostPort(server *string, port *int, def int) error {
	*server = strings.TrimSpace(*server)
	if *server == "" {
		return apierr.MissingParameter("server")
	}
	if !validHost(*server) {
		return paramErr("The server must be a host name or an IP address.")
	}
	if *port == 0 {
		*port = def
	}
	if *port < 1 || *port > 65535 {
		return paramErr("The port must be between 1 and 65535.")
	}
	return nil
}
