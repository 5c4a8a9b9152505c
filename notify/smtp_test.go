package notify_test

import (
	"bytes"
	"encoding/pem"
	"mime"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
)

func TestSMTPDefinitions(t *testing.T) {
	const pw, kpw = "smtp-pass-Q7x!", "key-pass-Z9y?"

	t.Run("RoundTripCensored", func(t *testing.T) {
		e := newEnv(t)
		rev := e.revision(t)
		err := e.s.SetSMTP(t.Context(), notify.SMTPServer{
			Identifier: "mail1", Server: "mail.example.com", Username: "u", Password: pw,
			Sender: "pi@example.com", TLS: true, Description: "d", PrivateKeyPassword: kpw,
		})
		if err != nil {
			t.Fatal(err)
		}
		if e.revision(t) != rev+1 {
			t.Errorf("config revision %d, want %d", e.revision(t), rev+1)
		}
		list, err := e.s.SMTPServers(t.Context())
		if err != nil || len(list) != 1 {
			t.Fatalf("SMTPServers = %v, %v", list, err)
		}
		got := list[0]
		want := notify.SMTPServer{
			Identifier: "mail1", Server: "mail.example.com", Port: 25, Username: "u", Password: notify.Censored,
			Sender: "pi@example.com", TLS: true, Timeout: 10, Description: "d", PrivateKeyPassword: notify.Censored,
		}
		if got.String() != want.String() || got.Password != want.Password || got.PrivateKeyPassword != want.PrivateKeyPassword ||
			got.Port != 25 || got.Timeout != 10 || !got.TLS || got.Sender != want.Sender || got.Username != "u" {
			t.Errorf("got %+v\nwant %+v", got, want)
		}
		snap := e.snapshot(t)
		for _, s := range []string{pw, kpw} {
			if bytes.Contains(snap, []byte(s)) {
				t.Errorf("the store holds %q in clear", s)
			}
		}
	})

	t.Run("CensoredKeepsEmptyClears", func(t *testing.T) {
		e := newEnv(t)
		ctx := t.Context()
		def := notify.SMTPServer{Identifier: "m", Server: "127.0.0.1", Password: pw, PrivateKeyPassword: kpw}
		if err := e.s.SetSMTP(ctx, def); err != nil {
			t.Fatal(err)
		}
		def.Password, def.PrivateKeyPassword, def.Description = notify.Censored, notify.Censored, "changed"
		if err := e.s.SetSMTP(ctx, def); err != nil {
			t.Fatal(err)
		}
		list, _ := e.s.SMTPServers(ctx)
		if list[0].Password != notify.Censored || list[0].PrivateKeyPassword != notify.Censored || list[0].Description != "changed" {
			t.Fatalf("after sending the placeholder back: %+v", list[0])
		}
		def.Password, def.PrivateKeyPassword = "", ""
		if err := e.s.SetSMTP(ctx, def); err != nil {
			t.Fatal(err)
		}
		list, _ = e.s.SMTPServers(ctx)
		if list[0].Password != "" || list[0].PrivateKeyPassword != "" {
			t.Fatalf("empty did not clear: %+v", list[0])
		}
	})

	t.Run("Validation", func(t *testing.T) {
		e := newEnv(t)
		ok := notify.SMTPServer{Identifier: "m", Server: "mail.example.com", Sender: "a@example.com"}
		cases := []struct {
			name string
			edit func(*notify.SMTPServer)
		}{
			{"NoIdentifier", func(d *notify.SMTPServer) { d.Identifier = "" }},
			{"SlashInIdentifier", func(d *notify.SMTPServer) { d.Identifier = "a/b" }},
			{"NoServer", func(d *notify.SMTPServer) { d.Server = "" }},
			{"BadServer", func(d *notify.SMTPServer) { d.Server = "mail example.com" }},
			{"URLServer", func(d *notify.SMTPServer) { d.Server = "smtp://mail.example.com" }},
			{"PortTooBig", func(d *notify.SMTPServer) { d.Port = 65536 }},
			{"NegativePort", func(d *notify.SMTPServer) { d.Port = -1 }},
			{"NegativeTimeout", func(d *notify.SMTPServer) { d.Timeout = -1 }},
			{"HugeTimeout", func(d *notify.SMTPServer) { d.Timeout = 3600 }},
			{"BadSender", func(d *notify.SMTPServer) { d.Sender = "not an address" }},
			{"SenderInjection", func(d *notify.SMTPServer) { d.Sender = "a@example.com\r\nBcc: x@evil" }},
			{"SMIMEWithoutKey", func(d *notify.SMTPServer) { d.SMIME = true }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				d := ok
				tc.edit(&d)
				wantCode(t, e.s.SetSMTP(t.Context(), d), apierr.Parameter)
			})
		}
		t.Run("IPv6AndNamedSender", func(t *testing.T) {
			d := ok
			d.Server, d.Sender = "::1", "authsrv <pi@example.com>"
			if err := e.s.SetSMTP(t.Context(), d); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("Delete", func(t *testing.T) {
		e := newEnv(t)
		err := e.s.DeleteSMTP(t.Context(), "nope")
		wantCode(t, err, apierr.ResourceNotFound)
		if err.Error() != "The requested SMTPServer could not be found." {
			t.Errorf("message %q", err.Error())
		}
		if err := e.s.SetSMTP(t.Context(), notify.SMTPServer{Identifier: "m", Server: "h"}); err != nil {
			t.Fatal(err)
		}
		rev := e.revision(t)
		if err := e.s.DeleteSMTP(t.Context(), "m"); err != nil {
			t.Fatal(err)
		}
		if e.revision(t) != rev+1 {
			t.Error("delete did not bump the config revision")
		}
		if list, _ := e.s.SMTPServers(t.Context()); len(list) != 0 {
			t.Errorf("still listed: %v", list)
		}
	})
}

// smtpDef is a definition for a sink.
func smtpDef(k *sink, id string) notify.SMTPServer {
	return notify.SMTPServer{Identifier: id, Server: "127.0.0.1", Port: k.port, Sender: "authsrv <pi@example.com>", Timeout: 5}
}

func TestSendMail(t *testing.T) {
	cert := newCert(t)
	withRoots := func(c *notify.Config) { c.RootCAs = cert.pool }
	mailTo := notify.Mail{To: []string{"alice@example.com"}, Subject: "Hello Wörld", Body: "Your code is 123456.\nBye äöü"}

	check := func(t *testing.T, k *sink, wantTLS bool, wantAuth string) {
		t.Helper()
		msgs := k.messages()
		if len(msgs) != 1 {
			t.Fatalf("sink received %d messages, want 1", len(msgs))
		}
		m := msgs[0]
		if m.From != "pi@example.com" || !slices.Equal(m.To, []string{"alice@example.com"}) || m.TLS != wantTLS || m.Auth != wantAuth {
			t.Errorf("envelope from %q to %v tls %v auth %q", m.From, m.To, m.TLS, m.Auth)
		}
		p := parseMsg(t, m.Data)
		from, _ := p.Header.AddressList("From")
		to, _ := p.Header.AddressList("To")
		if len(from) != 1 || from[0].Address != "pi@example.com" || len(to) != 1 || to[0].Address != "alice@example.com" {
			t.Errorf("From %v To %v", from, to)
		}
		subj, err := new(mime.WordDecoder).DecodeHeader(p.Header.Get("Subject"))
		if err != nil || subj != "Hello Wörld" {
			t.Errorf("Subject %q (%v)", subj, err)
		}
		if strings.TrimRight(strings.ReplaceAll(p.Body, "\r\n", "\n"), "\n") != "Your code is 123456.\nBye äöü" {
			t.Errorf("Body %q", p.Body)
		}
		if d, err := p.Header.Date(); err != nil || !d.Equal(testNow) {
			t.Errorf("Date %v (%v)", d, err)
		}
	}

	t.Run("Plain", func(t *testing.T) {
		e := newEnv(t)
		k := newSink(t, nil, false, false, nil)
		if err := e.s.SetSMTP(t.Context(), smtpDef(k, "m")); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SendMail(t.Context(), "m", mailTo); err != nil {
			t.Fatal(err)
		}
		check(t, k, false, "")
	})

	t.Run("STARTTLSRequired", func(t *testing.T) {
		e := newEnv(t, withRoots)
		k := newSink(t, &cert, false, true, func(k *sink) { k.requireTLS = true })
		d := smtpDef(k, "m")
		d.TLS = true
		if err := e.s.SetSMTP(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SendMail(t.Context(), "m", mailTo); err != nil {
			t.Fatal(err)
		}
		check(t, k, true, "")
	})

	t.Run("STARTTLSUntrustedCertificate", func(t *testing.T) {
		e := newEnv(t) // system roots only
		k := newSink(t, &cert, false, true, nil)
		d := smtpDef(k, "m")
		d.TLS = true
		_ = e.s.SetSMTP(t.Context(), d)
		err := e.s.SendMail(t.Context(), "m", mailTo)
		wantSendFailed(t, err)
		if !strings.Contains(err.Error(), "TLS") || len(k.messages()) != 0 {
			t.Errorf("err %v, %d messages", err, len(k.messages()))
		}
	})

	t.Run("STARTTLSNotOffered", func(t *testing.T) {
		e := newEnv(t, withRoots)
		k := newSink(t, nil, false, false, nil)
		d := smtpDef(k, "m")
		d.TLS = true
		_ = e.s.SetSMTP(t.Context(), d)
		err := e.s.SendMail(t.Context(), "m", mailTo)
		wantSendFailed(t, err)
		if !strings.Contains(err.Error(), "STARTTLS") || len(k.messages()) != 0 {
			t.Errorf("err %v, %d messages", err, len(k.messages()))
		}
	})

	t.Run("AuthPlainOverSTARTTLS", func(t *testing.T) {
		e := newEnv(t, withRoots)
		k := newSink(t, &cert, false, true, func(k *sink) { k.user, k.pass = "mailer", "s3cret-mail-pw" })
		d := smtpDef(k, "m")
		d.TLS, d.Username, d.Password = true, "mailer", "s3cret-mail-pw"
		if err := e.s.SetSMTP(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SendMail(t.Context(), "m", mailTo); err != nil {
			t.Fatal(err)
		}
		check(t, k, true, "mailer")

		// The placeholder keeps the stored password, which still works.
		d.Password = notify.Censored
		if err := e.s.SetSMTP(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SendMail(t.Context(), "m", mailTo); err != nil {
			t.Fatalf("with the kept password: %v", err)
		}
	})

	t.Run("AuthWrongPassword", func(t *testing.T) {
		e := newEnv(t, withRoots)
		k := newSink(t, &cert, false, true, func(k *sink) { k.user, k.pass = "mailer", "right" })
		d := smtpDef(k, "m")
		d.TLS, d.Username, d.Password = true, "mailer", "wrong-pw-31337"
		_ = e.s.SetSMTP(t.Context(), d)
		err := e.s.SendMail(t.Context(), "m", mailTo)
		wantSendFailed(t, err, "wrong-pw-31337", "Authentication failed")
		if !strings.Contains(err.Error(), "authentication failed") {
			t.Errorf("err %v", err)
		}
		if strings.Contains(e.log.String(), "wrong-pw-31337") {
			t.Error("the password is in the log")
		}
	})

	t.Run("NoPasswordInClear", func(t *testing.T) {
		// A server that offers AUTH PLAIN only without TLS gets no
		// password: go-smtp does not even advertise it, and authsrv never
		// sends PLAIN or LOGIN over a plain connection.
		e := newEnv(t)
		k := newSink(t, nil, false, false, func(k *sink) { k.user, k.pass = "mailer", "pw" })
		d := smtpDef(k, "m")
		d.Username, d.Password = "mailer", "pw"
		_ = e.s.SetSMTP(t.Context(), d)
		wantSendFailed(t, e.s.SendMail(t.Context(), "m", mailTo))
		if len(k.messages()) != 0 {
			t.Error("mail sent")
		}
	})

	t.Run("ImplicitTLS", func(t *testing.T) {
		e := newEnv(t, withRoots)
		k := newSink(t, &cert, true, false, func(k *sink) { k.user, k.pass = "mailer", "pw-implicit" })
		d := smtpDef(k, "m")
		d.ImplicitTLS, d.Username, d.Password = true, "mailer", "pw-implicit"
		if err := e.s.SetSMTP(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SendMail(t.Context(), "m", mailTo); err != nil {
			t.Fatal(err)
		}
		check(t, k, true, "mailer")
	})

	t.Run("Refused550", func(t *testing.T) {
		e := newEnv(t)
		k := newSink(t, nil, false, false, func(k *sink) { k.rejectRcpt = true })
		_ = e.s.SetSMTP(t.Context(), smtpDef(k, "m"))
		err := within(t, 3*time.Second, func() error { return e.s.SendMail(t.Context(), "m", mailTo) })
		wantSendFailed(t, err, sinkRemoteText, "4711", "550")
		if !strings.Contains(err.Error(), "refused the message") {
			t.Errorf("err %v", err)
		}
	})

	t.Run("ClosedPort", func(t *testing.T) {
		e := newEnv(t)
		_ = e.s.SetSMTP(t.Context(), notify.SMTPServer{Identifier: "m", Server: "127.0.0.1", Port: closedPort(t), Sender: "a@example.com", Timeout: 2})
		err := within(t, 3*time.Second, func() error { return e.s.SendMail(t.Context(), "m", mailTo) })
		wantSendFailed(t, err)
		if !strings.Contains(err.Error(), "could not be reached") {
			t.Errorf("err %v", err)
		}
	})

	t.Run("NeverAnswers", func(t *testing.T) {
		e := newEnv(t)
		_ = e.s.SetSMTP(t.Context(), notify.SMTPServer{Identifier: "m", Server: "127.0.0.1", Port: silentPort(t), Sender: "a@example.com", Timeout: 1})
		err := within(t, 2500*time.Millisecond, func() error { return e.s.SendMail(t.Context(), "m", mailTo) })
		wantSendFailed(t, err)
		if !strings.Contains(err.Error(), "did not answer in time") {
			t.Errorf("err %v", err)
		}
	})

	t.Run("HeaderInjection", func(t *testing.T) {
		e := newEnv(t)
		k := newSink(t, nil, false, false, nil)
		_ = e.s.SetSMTP(t.Context(), smtpDef(k, "m"))
		for name, m := range map[string]notify.Mail{
			"Recipient":      {To: []string{"a@b.c\r\nBcc: x@evil"}, Subject: "s", Body: "b"},
			"RecipientLF":    {To: []string{"a@b.c\nBcc: x@evil"}, Subject: "s", Body: "b"},
			"Subject":        {To: []string{"a@b.c"}, Subject: "hi\r\nBcc: x@evil", Body: "b"},
			"ReplyTo":        {To: []string{"a@b.c"}, Subject: "s", ReplyTo: "r@b.c\r\nBcc: x@evil"},
			"NotAnAddress":   {To: []string{"a b c"}, Subject: "s"},
			"NoRecipient":    {Subject: "s"},
			"SecondRcptEvil": {To: []string{"ok@b.c", "a@b.c\r\nBcc: x@evil"}, Subject: "s"},
		} {
			t.Run(name, func(t *testing.T) { wantCode(t, e.s.SendMail(t.Context(), "m", m), apierr.Parameter) })
		}
		if len(k.messages()) != 0 {
			t.Errorf("%d messages sent", len(k.messages()))
		}
	})

	t.Run("NoSender", func(t *testing.T) {
		e := newEnv(t)
		k := newSink(t, nil, false, false, nil)
		d := smtpDef(k, "m")
		d.Sender = ""
		_ = e.s.SetSMTP(t.Context(), d)
		wantCode(t, e.s.SendMail(t.Context(), "m", mailTo), apierr.ConfigAdmin)
	})

	t.Run("UnknownServer", func(t *testing.T) {
		e := newEnv(t)
		wantCode(t, e.s.SendMail(t.Context(), "nope", mailTo), apierr.ResourceNotFound)
	})

	t.Run("TestMail", func(t *testing.T) {
		e := newEnv(t, withRoots)
		k := newSink(t, &cert, false, true, func(k *sink) { k.user, k.pass = "mailer", "stored-pw" })
		d := smtpDef(k, "mail1")
		d.TLS, d.Username, d.Password = true, "mailer", "stored-pw"
		if err := e.s.SetSMTP(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		inline := d
		inline.Password = notify.Censored
		if err := e.s.SendTestMail(t.Context(), inline, "bob@example.com"); err != nil {
			t.Fatal(err)
		}
		msgs := k.messages()
		if len(msgs) != 1 {
			t.Fatalf("%d messages", len(msgs))
		}
		p := parseMsg(t, msgs[0].Data)
		if p.Header.Get("Subject") != "Test Email from authsrv" ||
			strings.TrimSpace(p.Body) != "This is a test email from authsrv. The configuration mail1 is working." {
			t.Errorf("subject %q body %q", p.Header.Get("Subject"), p.Body)
		}
		// Inline definitions are not stored, and a bad recipient is refused.
		inline.Identifier = "unsaved"
		inline.Password = "stored-pw"
		if err := e.s.SendTestMail(t.Context(), inline, "bob@example.com"); err != nil {
			t.Fatal(err)
		}
		if list, _ := e.s.SMTPServers(t.Context()); len(list) != 1 {
			t.Errorf("the test definition was stored: %v", list)
		}
		wantCode(t, e.s.SendTestMail(t.Context(), inline, "x@y.z\r\nBcc: x@evil"), apierr.Parameter)
		wantCode(t, e.s.SendTestMail(t.Context(), inline, ""), apierr.Parameter)
	})

	t.Run("SMIME", func(t *testing.T) {
		dir := t.TempDir()
		certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		if err := os.WriteFile(certFile, cert.certPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: cert.keyDER})
		if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
			t.Fatal(err)
		}
		e := newEnv(t)
		k := newSink(t, nil, false, false, nil)
		d := smtpDef(k, "signed")
		d.SMIME, d.PrivateKey, d.Certificate = true, keyFile, certFile
		if err := e.s.SetSMTP(t.Context(), d); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SendMail(t.Context(), "signed", mailTo); err != nil {
			t.Fatal(err)
		}
		d.Identifier, d.PrivateKey, d.DontSendOnError = "broken-strict", filepath.Join(dir, "missing.pem"), true
		_ = e.s.SetSMTP(t.Context(), d)
		wantSendFailed(t, e.s.SendMail(t.Context(), "broken-strict", mailTo))
		d.Identifier, d.DontSendOnError = "broken-lenient", false
		_ = e.s.SetSMTP(t.Context(), d)
		if err := e.s.SendMail(t.Context(), "broken-lenient", mailTo); err != nil {
			t.Fatal(err)
		}
		msgs := k.messages()
		if len(msgs) != 2 {
			t.Fatalf("%d messages, want 2 (signed, unsigned)", len(msgs))
		}
		signed, unsigned := parseMsg(t, msgs[0].Data), parseMsg(t, msgs[1].Data)
		if ct := signed.Header.Get("Content-Type"); !strings.HasPrefix(ct, "multipart/signed") || !strings.Contains(ct, "pkcs7-signature") {
			t.Errorf("signed Content-Type %q", ct)
		}
		if ct := unsigned.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("unsigned Content-Type %q", ct)
		}
	})
}

// silentPort is the port of a listener that accepts and never says a word.
func silentPort(t *testing.T) int {
	_, port, _ := net.SplitHostPort(testsvc.BlackHole(t))
	n, _ := strconv.Atoi(port)
	return n
}
