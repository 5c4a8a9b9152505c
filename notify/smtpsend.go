package notify

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
)

// deliver sends m through d, whose secrets are in clear. The whole
// conversation ends at d.Timeout; nothing is retried.
func (s *Service) deliver(ctx context.Context, d SMTPServer, m Mail) error {
	msg, err := s.buildMsg(d, m)
	if err != nil {
		return err
	}
	start := time.Now()
	timeout := time.Duration(d.Timeout) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()

	host := hostOnly(d.Server)
	addr := net.JoinHostPort(host, strconv.Itoa(d.Port))
	tlsCfg := &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, RootCAs: s.roots}
	implicit := d.implicitTLS()
	att := &smtpAttempt{}

	dial := func(dctx context.Context, _, _ string) (net.Conn, error) {
		raw, err := s.netDialer(timeout).DialContext(dctx, "tcp", addr)
		if err != nil {
			return nil, &dialError{err}
		}
		// Closing on cancellation (and at the end of deliver) unblocks
		// any read the client library is waiting in.
		context.AfterFunc(ctx, func() { _ = raw.Close() })
		conn := net.Conn(&deadlineConn{Conn: raw, limit: deadline})
		_ = conn.SetDeadline(deadline)
		if !implicit {
			return conn, nil
		}
		tc := tls.Client(conn, tlsCfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			_ = raw.Close()
			return nil, &tlsError{err}
		}
		return tc, nil
	}
	policy := mail.NoTLS
	if d.TLS && !implicit {
		policy = mail.TLSMandatory
	}
	opts := []mail.Option{
		mail.WithPort(d.Port), mail.WithTimeout(timeout), mail.WithDialContextFunc(dial),
		mail.WithTLSPolicy(policy), mail.WithTLSConfig(tlsCfg),
	}
	if d.Username != "" {
		opts = append(opts, mail.WithSMTPAuthCustom(&pickAuth{user: d.Username, pass: d.Password, host: host, att: att}))
	}
	c, err := mail.NewClient(host, opts...)
	if err != nil {
		return sendErr(fmt.Sprintf("The SMTP server %s is not configured correctly.", d.Identifier), err)
	}
	client, err := c.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return s.smtpFail(ctx, d, att, err)
	}
	serr := c.SendWithSMTPClient(client, msg)
	if serr != nil && !msg.IsDelivered() {
		_ = c.CloseWithSMTPClient(client)
		return s.smtpFail(ctx, d, att, serr)
	}
	// The server accepted the message: a failing RSET or QUIT changes
	// nothing, and the mail must not be sent again.
	_ = c.CloseWithSMTPClient(client)
	s.log.Debug().Str("smtpserver", d.Identifier).Str("result", "sent").
		Int64("duration_ms", time.Since(start).Milliseconds()).Msg("mail sent")
	return nil
}

// smtpAttempt records how far a conversation got, to describe a failure.
type smtpAttempt struct {
	authStarted bool
	authErr     error
}

var (
	errAuthNeedsTLS = errors.New("the SMTP server offers only password mechanisms that would send the password in clear; use TLS")
	errAuthNoMech   = errors.New("the SMTP server offers no supported authentication mechanism")
)

// smtpFail turns a failure into a short error that names the step that
// failed, never the server's answer, and logs the cause.
func (s *Service) smtpFail(ctx context.Context, d SMTPServer, att *smtpAttempt, err error) error {
	var (
		de     *dialError
		se     *mail.SendError
		reason string
	)
	switch {
	case errors.As(err, &de):
		reason = "the SMTP server " + unreachable(de.err)
	case ctx.Err() != nil || isTimeout(err):
		reason = "the SMTP server did not answer in time"
	case isTLSFailure(err):
		reason = "the TLS connection to the SMTP server failed"
	case strings.Contains(err.Error(), "does not support STARTTLS"):
		reason = "the SMTP server does not offer STARTTLS"
	case errors.Is(att.authErr, errAuthNeedsTLS):
		reason = "authentication needs TLS"
	case errors.Is(att.authErr, errAuthNoMech):
		reason = "the SMTP server offers no supported authentication"
	case att.authStarted && !errors.As(err, &se):
		reason = "authentication failed"
	case errors.As(err, &se):
		reason = "the SMTP server refused the message"
	default:
		reason = "the SMTP server refused the connection"
	}
	ev := s.log.Warn().Str("smtpserver", d.Identifier).Str("result", "failed")
	if !att.authStarted || errors.As(err, &se) {
		ev = ev.AnErr("error", err) // auth failures are logged without the server's text
	}
	ev.Msg("mail not sent: " + reason)
	return sendErr(fmt.Sprintf("The mail could not be sent through %s: %s.", d.Identifier, reason), err)
}

// pickAuth chooses the SASL mechanism from what the server offers. It
// never sends a password in clear: PLAIN and LOGIN are used only over TLS.
type pickAuth struct {
	user, pass, host string
	att              *smtpAttempt
	inner            smtp.Auth
}

func (a *pickAuth) Start(si *smtp.ServerInfo) (string, []byte, error) {
	a.att.authStarted = true
	prefer := []string{"SCRAM-SHA-256", "SCRAM-SHA-1", "CRAM-MD5"}
	if si.TLS {
		prefer = append(prefer, "PLAIN", "LOGIN")
	}
	for _, m := range prefer {
		if !slices.Contains(si.Auth, m) {
			continue
		}
		switch m {
		case "SCRAM-SHA-256":
			a.inner = smtp.ScramSHA256Auth(a.user, a.pass)
		case "SCRAM-SHA-1":
			a.inner = smtp.ScramSHA1Auth(a.user, a.pass)
		case "CRAM-MD5":
			a.inner = smtp.CRAMMD5Auth(a.user, a.pass)
		case "PLAIN":
			a.inner = smtp.PlainAuth("", a.user, a.pass, a.host, false)
		case "LOGIN":
			a.inner = smtp.LoginAuth(a.user, a.pass, a.host, false)
		}
		return a.inner.Start(si)
	}
	if slices.Contains(si.Auth, "PLAIN") || slices.Contains(si.Auth, "LOGIN") {
		a.att.authErr = errAuthNeedsTLS
	} else {
		a.att.authErr = errAuthNoMech
	}
	return "", nil, a.att.authErr
}

func (a *pickAuth) Next(fromServer []byte, more bool) ([]byte, error) {
	if a.inner == nil {
		return nil, errAuthNoMech
	}
	return a.inner.Next(fromServer, more)
}

// buildMsg validates m against header injection and builds the message.
func (s *Service) buildMsg(d SMTPServer, m Mail) (*mail.Msg, error) {
	if d.Sender == "" {
		return nil, apierr.New(apierr.ConfigAdmin, fmt.Sprintf("The SMTP server %s has no sender address.", d.Identifier))
	}
	if len(m.To) == 0 {
		return nil, apierr.MissingParameter("recipient")
	}
	for _, to := range m.To {
		if err := checkAddress("recipient", to); err != nil {
			return nil, err
		}
	}
	if strings.ContainsAny(m.Subject, "\r\n\x00") {
		return nil, paramErr("The subject contains a line break.")
	}
	if m.ReplyTo != "" {
		if err := checkAddress("reply-to", m.ReplyTo); err != nil {
			return nil, err
		}
	}
	build := func(sign bool) (*mail.Msg, error) {
		msg := mail.NewMsg(mail.WithNoDefaultUserAgent())
		if err := msg.From(d.Sender); err != nil {
			return nil, paramErr("The sender address is not a valid e-mail address.")
		}
		if err := msg.To(m.To...); err != nil {
			return nil, paramErr("The recipient address is not a valid e-mail address.")
		}
		if m.ReplyTo != "" {
			if err := msg.ReplyTo(m.ReplyTo); err != nil {
				return nil, paramErr("The reply-to address is not a valid e-mail address.")
			}
		}
		msg.Subject(m.Subject)
		msg.SetDateWithValue(s.now())
		msg.SetMessageID()
		ct := mail.TypeTextPlain
		if m.HTML {
			ct = mail.TypeTextHTML
		}
		msg.SetBodyString(ct, m.Body)
		if sign {
			if err := signSMIME(msg, d, s.files); err != nil {
				return nil, err
			}
			// Sign once now, so that a signing failure shows before any
			// byte goes to the server.
			if _, err := msg.WriteTo(io.Discard); err != nil {
				return nil, err
			}
		}
		return msg, nil
	}
	if !d.SMIME {
		return build(false)
	}
	msg, err := build(true)
	if err == nil {
		return msg, nil
	}
	if _, ok := errors.AsType[*apierr.Error](err); ok {
		return nil, err
	}
	if d.DontSendOnError {
		s.log.Warn().Str("smtpserver", d.Identifier).AnErr("error", err).Msg("S/MIME signing failed; mail not sent")
		return nil, sendErr(fmt.Sprintf("The mail could not be signed with the S/MIME key of %s and was not sent.", d.Identifier), err)
	}
	s.log.Warn().Str("smtpserver", d.Identifier).AnErr("error", err).Msg("S/MIME signing failed; sending unsigned")
	return build(false)
}

// maxPEM caps the key and certificate files read for S/MIME.
const maxPEM = 1 << 20

// signSMIME loads the key pair of d, each file opened under files, and
// sets the message up for signing.
func signSMIME(msg *mail.Msg, d SMTPServer, files fileroot.Confinement) error {
	certPEM, err := files.ReadFile(d.Certificate, maxPEM)
	if err != nil {
		return fmt.Errorf("s/mime certificate: %w", err)
	}
	var chain [][]byte
	for rest := certPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			chain = append(chain, b.Bytes)
		}
	}
	if len(chain) == 0 {
		return errors.New("s/mime certificate: no PEM certificate found")
	}
	keyPEM, err := files.ReadFile(d.PrivateKey, maxPEM)
	if err != nil {
		return fmt.Errorf("s/mime key: %w", err)
	}
	key, err := parseKey(keyPEM, d.PrivateKeyPassword)
	if err != nil {
		return fmt.Errorf("s/mime key: %w", err)
	}
	return msg.SignWithTLSCertificate(&tls.Certificate{Certificate: chain, PrivateKey: key})
}

// parseKey reads an RSA or ECDSA private key in PKCS #8, PKCS #1 or SEC 1
// PEM, decrypting a legacy encrypted PEM block with password.
func parseKey(data []byte, password string) (crypto.PrivateKey, error) {
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("no PEM private key found")
		}
		if !strings.HasSuffix(b.Type, "PRIVATE KEY") {
			continue
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" {
			return nil, errors.New("encrypted PKCS #8 keys are not supported; use an unencrypted key or legacy PEM encryption")
		}
		der := b.Bytes
		//lint:ignore SA1019 legacy PEM encryption is what OpenSSL's -des3/-aes256 options write; only reading it
		if x509.IsEncryptedPEMBlock(b) { //nolint:staticcheck // see above
			var err error
			//lint:ignore SA1019 see above
			der, err = x509.DecryptPEMBlock(b, []byte(password)) //nolint:staticcheck // see above
			if err != nil {
				return nil, errors.New("the private key password does not decrypt the key")
			}
		}
		if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
			switch k.(type) {
			case *rsa.PrivateKey, *ecdsa.PrivateKey:
				return k, nil
			}
			return nil, fmt.Errorf("unsupported key type %T", k)
		}
		if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
			return k, nil
		}
		if k, err := x509.ParseECPrivateKey(der); err == nil {
			return k, nil
		}
		return nil, errors.New("the private key cannot be parsed")
	}
}
