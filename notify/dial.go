package notify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"time"

	"github.com/authsrv/authsrv/netguard"
)

// netDialer returns the dialer of every outgoing TCP connection, with the
// dial policy's address check.
func (s *Service) netDialer(timeout time.Duration) *net.Dialer {
	return s.dial.Dialer(timeout)
}

// deadlineConn never lets a deadline go past limit, so that a client
// library that extends deadlines per command still ends at the overall
// timeout.
type deadlineConn struct {
	net.Conn
	limit time.Time
}

func (c *deadlineConn) clamp(t time.Time) time.Time {
	if t.IsZero() || t.After(c.limit) {
		return c.limit
	}
	return t
}

func (c *deadlineConn) SetDeadline(t time.Time) error     { return c.Conn.SetDeadline(c.clamp(t)) }
func (c *deadlineConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.clamp(t)) }
func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.clamp(t))
}

// dialError marks a failure to open the TCP connection.
type dialError struct{ err error }

func (e *dialError) Error() string { return "dial: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// tlsError marks a failed TLS handshake.
type tlsError struct{ err error }

func (e *tlsError) Error() string { return "tls: " + e.err.Error() }
func (e *tlsError) Unwrap() error { return e.err }

// isTimeout reports whether err is a deadline or timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isTLSFailure reports whether err comes from a TLS handshake or
// certificate check.
func isTLSFailure(err error) bool {
	var (
		te  *tlsError
		cve *tls.CertificateVerificationError
		rhe tls.RecordHeaderError
		ae  tls.AlertError
		uae x509.UnknownAuthorityError
		hne x509.HostnameError
		cie x509.CertificateInvalidError
	)
	return errors.As(err, &te) || errors.As(err, &cve) || errors.As(err, &rhe) || errors.As(err, &ae) ||
		errors.As(err, &uae) || errors.As(err, &hne) || errors.As(err, &cie)
}

// unreachable describes why a connection could not be opened, without
// remote text: a refusal by the dial policy is told as such.
func unreachable(err error) string {
	var dnsErr *net.DNSError
	if r, ok := netguard.Refusal(err); ok {
		return "could not be reached: " + r.Error()
	}
	switch {
	case isTimeout(err):
		return "did not answer in time"
	case errors.As(err, &dnsErr):
		return "could not be resolved"
	default:
		return "could not be reached"
	}
}
