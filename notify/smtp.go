package notify

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/store"
)

// smtpBucket holds one record per SMTP server, keyed by its identifier
// (exact, case-sensitive).
const smtpBucket = "smtpservers"

// SMTP defaults (privacyIDEA's).
const (
	defaultSMTPPort    = 25
	defaultSMTPTimeout = 10
	implicitTLSPort    = 465
)

// SMTPServer is an SMTP server definition. Reads return Password and
// PrivateKeyPassword as [Censored] when set.
type SMTPServer struct {
	Identifier string
	Server     string // host name or IP address
	Port       int    // 0 means 25
	Username   string // "" means no authentication
	Password   string
	Sender     string // From address, "Name <addr>" allowed
	// TLS requires STARTTLS: the mail is not sent unless the server
	// offers it and its certificate verifies. Without TLS (and without
	// implicit TLS) the connection stays plain, as in privacyIDEA.
	TLS bool
	// ImplicitTLS speaks TLS from the first byte (SMTPS, RFC 8314). Port
	// 465 always uses implicit TLS, whatever this field says.
	ImplicitTLS bool
	Timeout     int // seconds for the whole conversation; 0 means 10, at most 60
	Description string
	// EnqueueJob is stored for privacyIDEA compatibility; authsrv has no
	// job queue and always sends at once.
	EnqueueJob bool
	// SMIME signs mails with PrivateKey (a PEM file path, optionally
	// encrypted with PrivateKeyPassword in the legacy PEM format) and
	// Certificate (a PEM file path, leaf first). DontSendOnError refuses
	// to send unsigned when signing fails; otherwise the mail goes out
	// unsigned and a warning is logged.
	SMIME              bool
	DontSendOnError    bool
	PrivateKey         string
	PrivateKeyPassword string
	Certificate        string
}

// implicitTLS reports whether the definition uses SMTPS.
func (d SMTPServer) implicitTLS() bool { return d.ImplicitTLS || d.Port == implicitTLSPort }

// String describes the definition without its secrets.
func (d SMTPServer) String() string {
	return fmt.Sprintf("SMTPServer(%s %s:%d)", d.Identifier, d.Server, d.Port)
}

// Mail is one e-mail to send through a stored SMTP server.
type Mail struct {
	To      []string
	Subject string
	Body    string
	// HTML sends Body as text/html instead of text/plain.
	HTML bool
	// ReplyTo is an optional Reply-To address.
	ReplyTo string
}

type smtpRecord struct {
	store.Versioned
	Identifier         string `json:"identifier"`
	Server             string `json:"server"`
	Port               int    `json:"port"`
	Username           string `json:"username,omitempty"`
	Password           []byte `json:"password_sealed,omitempty"`
	Sender             string `json:"sender,omitempty"`
	TLS                bool   `json:"tls"`
	ImplicitTLS        bool   `json:"implicit_tls,omitempty"`
	Timeout            int    `json:"timeout"`
	Description        string `json:"description,omitempty"`
	EnqueueJob         bool   `json:"enqueue_job,omitempty"`
	SMIME              bool   `json:"smime,omitempty"`
	DontSendOnError    bool   `json:"dont_send_on_error,omitempty"`
	PrivateKey         string `json:"private_key,omitempty"`
	PrivateKeyPassword []byte `json:"private_key_password_sealed,omitempty"`
	Certificate        string `json:"certificate,omitempty"`
	Rev                uint64 `json:"rev"`
}

// normalizeSMTP applies defaults and validates a definition.
func normalizeSMTP(d *SMTPServer) error {
	if err := validIdentifier("SMTP server", d.Identifier); err != nil {
		return err
	}
	if err := hostPort(&d.Server, &d.Port, defaultSMTPPort); err != nil {
		return err
	}
	t, err := timeoutSeconds("The timeout", d.Timeout, defaultSMTPTimeout)
	if err != nil {
		return err
	}
	d.Timeout = t
	if hasControl(d.Username) {
		return paramErr("The username contains invalid characters.")
	}
	if d.Sender != "" {
		if err := checkAddress("sender", d.Sender); err != nil {
			return err
		}
	}
	if d.SMIME && (d.PrivateKey == "" || d.Certificate == "") {
		return paramErr("S/MIME needs a private key and a certificate.")
	}
	if hasControl(d.PrivateKey) || hasControl(d.Certificate) {
		return paramErr("The key and certificate paths contain invalid characters.")
	}
	return nil
}

// checkSMIMEFiles refuses S/MIME key and certificate names that break a
// rule of the service's file confinement (outside the file roots, in the
// data directory, through a link to either); the refusal names the rule.
// A file that does not exist yet is accepted here and fails at signing.
func (s *Service) checkSMIMEFiles(d SMTPServer) error {
	for _, f := range []struct{ what, path string }{{"private key", d.PrivateKey}, {"certificate", d.Certificate}} {
		if f.path == "" {
			continue
		}
		if err := s.files.Check(f.path); err != nil {
			return paramErr("The S/MIME %s is refused: %s", f.what, fileroot.Describe(err, f.path))
		}
	}
	return nil
}

// checkAddress refuses an e-mail address with line breaks (header
// injection) or that does not parse as an RFC 5322 address.
func checkAddress(what, addr string) error {
	if hasCRLF(addr) || hasControl(addr) {
		return paramErr("The %s address contains a line break or a control character.", what)
	}
	if _, err := mail.ParseAddress(addr); err != nil {
		return paramErr("The %s address is not a valid e-mail address.", what)
	}
	return nil
}

// SetSMTP creates or replaces the SMTP server def.Identifier. Password and
// PrivateKeyPassword equal to [Censored] keep the stored values; "" clears
// them. Each of also runs in the same transaction after the write (the
// caller's audit entry commits with the change).
func (s *Service) SetSMTP(ctx context.Context, def SMTPServer, also ...func(store.Tx) error) error {
	if err := normalizeSMTP(&def); err != nil {
		return err
	}
	if err := s.checkSMIMEFiles(def); err != nil {
		return err
	}
	id := def.Identifier
	pw, err := s.sealIfNew(def.Password, smtpBucket, id, "password")
	if err != nil {
		return err
	}
	kpw, err := s.sealIfNew(def.PrivateKeyPassword, smtpBucket, id, "private_key_password")
	if err != nil {
		return err
	}
	err = s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(smtpBucket)
		var old smtpRecord
		if err := store.GetJSON(b, []byte(id), &old); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		rec := smtpRecord{
			Identifier: id, Server: def.Server, Port: def.Port, Username: def.Username,
			Sender: def.Sender, TLS: def.TLS, ImplicitTLS: def.ImplicitTLS, Timeout: def.Timeout,
			Description: def.Description, EnqueueJob: def.EnqueueJob, SMIME: def.SMIME,
			DontSendOnError: def.DontSendOnError, PrivateKey: def.PrivateKey, Certificate: def.Certificate,
			Password:           keepOrNew(def.Password, pw, old.Password),
			PrivateKeyPassword: keepOrNew(def.PrivateKeyPassword, kpw, old.PrivateKeyPassword),
		}
		rev, err := store.BumpConfigRevision(tx)
		if err != nil {
			return err
		}
		rec.Schema, rec.Rev = schema, rev
		if err := store.PutJSON(b, []byte(id), rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return fmt.Errorf("smtp server %s: %w", id, err)
	}
	return nil
}

// sealIfNew seals a new secret value; "" and Censored give nil.
func (s *Service) sealIfNew(v, bucket, key, field string) ([]byte, error) {
	if v == "" || v == Censored {
		return nil, nil
	}
	return s.seal(v, bucket, key, field)
}

// keepOrNew picks the stored sealed value for Censored, nothing for "",
// and the new sealed value otherwise.
func keepOrNew(v string, sealed, stored []byte) []byte {
	switch v {
	case Censored:
		return stored
	case "":
		return nil
	}
	return sealed
}

func censor(sealed []byte) string {
	if sealed == nil {
		return ""
	}
	return Censored
}

func (r smtpRecord) def() SMTPServer {
	return SMTPServer{
		Identifier: r.Identifier, Server: r.Server, Port: r.Port, Username: r.Username,
		Password: censor(r.Password), Sender: r.Sender, TLS: r.TLS, ImplicitTLS: r.ImplicitTLS,
		Timeout: r.Timeout, Description: r.Description, EnqueueJob: r.EnqueueJob, SMIME: r.SMIME,
		DontSendOnError: r.DontSendOnError, PrivateKey: r.PrivateKey,
		PrivateKeyPassword: censor(r.PrivateKeyPassword), Certificate: r.Certificate,
	}
}

// SMTPServers returns every SMTP server definition, ordered by identifier,
// with secrets censored.
func (s *Service) SMTPServers(ctx context.Context) ([]SMTPServer, error) {
	return listDefs(ctx, s.st, smtpBucket, smtpRecord.def, func(d SMTPServer) string { return d.Identifier })
}

// DeleteSMTP removes the SMTP server id; also runs in the change's
// transaction.
func (s *Service) DeleteSMTP(ctx context.Context, id string, also ...func(store.Tx) error) error {
	return deleteDef(ctx, s.st, smtpBucket, id, ErrSMTPNotFound, also)
}

// smtpRecordOf reads a record; ErrSMTPNotFound when missing.
func smtpRecordOf(tx store.Tx, id string) (smtpRecord, error) {
	var rec smtpRecord
	err := store.GetJSON(tx.Bucket(smtpBucket), []byte(id), &rec)
	if errors.Is(err, store.ErrNotFound) {
		return rec, ErrSMTPNotFound
	}
	return rec, err
}

// plainSMTP returns the stored definition id with its secrets opened.
func (s *Service) plainSMTP(ctx context.Context, id string) (SMTPServer, error) {
	var rec smtpRecord
	err := s.st.View(ctx, func(tx store.Tx) error {
		var err error
		rec, err = smtpRecordOf(tx, id)
		return err
	})
	if err != nil {
		return SMTPServer{}, err
	}
	d := rec.def()
	if d.Password, err = s.open(rec.Password, smtpBucket, id, "password"); err != nil {
		return SMTPServer{}, err
	}
	if d.PrivateKeyPassword, err = s.open(rec.PrivateKeyPassword, smtpBucket, id, "private_key_password"); err != nil {
		return SMTPServer{}, err
	}
	return d, nil
}

// SendMail sends m through the stored SMTP server id.
func (s *Service) SendMail(ctx context.Context, id string, m Mail) error {
	d, err := s.plainSMTP(ctx, id)
	if err != nil {
		return err
	}
	return s.deliver(ctx, d, m)
}

// Test mail texts.
const (
	testMailSubject = "Test Email from authsrv"
	testMailBody    = "This is a test email from authsrv. The configuration %s is working."
)

// SendTestMail sends a test mail to recipient through the inline
// definition def, which is not stored. A [Censored] password (or private
// key password) takes the stored value of def.Identifier.
func (s *Service) SendTestMail(ctx context.Context, def SMTPServer, recipient string) error {
	if strings.TrimSpace(recipient) == "" {
		return apierr.MissingParameter("recipient")
	}
	if err := normalizeSMTP(&def); err != nil {
		return err
	}
	if err := s.checkSMIMEFiles(def); err != nil {
		return err
	}
	if def.Password == Censored || def.PrivateKeyPassword == Censored {
		stored, err := s.plainSMTP(ctx, def.Identifier)
		if err != nil && !errors.Is(err, ErrSMTPNotFound) {
			return err
		}
		if def.Password == Censored {
			def.Password = stored.Password
		}
		if def.PrivateKeyPassword == Censored {
			def.PrivateKeyPassword = stored.PrivateKeyPassword
		}
	}
	return s.deliver(ctx, def, Mail{
		To:      []string{recipient},
		Subject: testMailSubject,
		Body:    fmt.Sprintf(testMailBody, def.Identifier),
	})
}
