package eventing

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
)

// ntSMTP starts an SMTP sink and stores it as SMTP server "mail1".
func (e *ntEnv) ntSMTP(t *testing.T) *testsvc.SMTPSink {
	t.Helper()
	k := testsvc.NewSMTPSink(t)
	err := e.notify.SetSMTP(t.Context(), notify.SMTPServer{Identifier: "mail1", Server: "127.0.0.1", Port: k.Port,
		Sender: "authsrv <pi@example.com>", Timeout: 5})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestUserNotificationSendMail(t *testing.T) {
	const qr = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="
	detail := map[string]any{"serial": "HOTP0001", "pin": "rnd-pin-4242",
		"googleurl": map[string]any{"value": "otpauth://hotp/x?secret=ABC", "img": qr}}

	// one sends the definition with opts for call c and returns the only
	// message the sink got.
	one := func(t *testing.T, e *ntEnv, k *testsvc.SMTPSink, opts map[string]string, c *Call) (testsvc.Mail, ntMail) {
		t.Helper()
		if err := e.check(t, "UserNotification", "sendmail", opts); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if err := e.do(t, e.run("UserNotification", "sendmail", opts, c)); err != nil {
			t.Fatalf("Do: %v", err)
		}
		msgs := k.Messages()
		if len(msgs) != 1 {
			t.Fatalf("%d messages, want 1", len(msgs))
		}
		return msgs[0], ntParseMail(t, msgs[0].Data)
	}

	t.Run("TokenOwner", func(t *testing.T) {
		e := newNtEnv(t)
		k := e.ntSMTP(t)
		e.token(t, "HOTP0001", "office")
		opts := map[string]string{"emailconfig": "mail1", "To": "tokenowner",
			"subject": "Token {serial} for {user}",
			"body":    "Hi {recipient_givenname} {recipient_surname}, {action} by {admin} at {realm}: {tokentype} {tokendescription}. PIN {pin}. {nosuchtag}"}
		raw, m := one(t, e, k, opts, ntAdminCall("HOTP0001", detail))
		if !slices.Equal(raw.To, []string{"alice@example.com"}) {
			t.Errorf("recipients %v", raw.To)
		}
		if got := m.subject(t); got != "Token HOTP0001 for Alice Smith" {
			t.Errorf("subject %q", got)
		}
		want := "Hi Alice Smith, POST /token/init by super at admins: hotp office. PIN rnd-pin-4242. {nosuchtag}"
		if got := strings.TrimSpace(m.parts["text/plain"]); got != want {
			t.Errorf("body %q, want %q", got, want)
		}
	})

	t.Run("DefaultTexts", func(t *testing.T) {
		e := newNtEnv(t)
		k := e.ntSMTP(t)
		e.token(t, "HOTP0001", "")
		_, m := one(t, e, k, map[string]string{"emailconfig": "mail1"}, ntAdminCall("HOTP0001", detail))
		if got := m.subject(t); got != defaultSubject {
			t.Errorf("subject %q", got)
		}
		body := m.parts["text/plain"]
		for _, s := range []string{"Hello Alice Smith", "POST /token/init", "HOTP0001", "2026-03-04 at 05:06:07", "https://auth.example.com/"} {
			if !strings.Contains(body, s) {
				t.Errorf("default body lacks %q:\n%s", s, body)
			}
		}
	})

	t.Run("AttributeAndReplyTo", func(t *testing.T) {
		e := newNtEnv(t)
		k := e.ntSMTP(t)
		c := ntAdminCall("", nil)
		c.User.Login = "bob"
		opts := map[string]string{"emailconfig": "mail1", "To": "tokenowner", "To tokenowner": "altmail",
			"reply_to": "email", "reply_to email": "help@example.com, other@example.com", "body": "x"}
		raw, m := one(t, e, k, opts, c)
		if !slices.Equal(raw.To, []string{"bob.alt@example.org"}) {
			t.Errorf("recipients %v", raw.To)
		}
		if got := m.header.Get("Reply-To"); !strings.Contains(got, "help@example.com") || strings.Contains(got, "other@") {
			t.Errorf("Reply-To %q", got)
		}
	})

	t.Run("EmailList", func(t *testing.T) {
		e := newNtEnv(t)
		k := e.ntSMTP(t)
		opts := map[string]string{"emailconfig": "mail1", "To": "email", "To email": "a@example.com, b@example.com", "body": "x"}
		raw, _ := one(t, e, k, opts, ntAdminCall("", nil))
		if !slices.Equal(raw.To, []string{"a@example.com", "b@example.com"}) {
			t.Errorf("recipients %v", raw.To)
		}
	})

	t.Run("AdminRealm", func(t *testing.T) {
		e := newNtEnv(t)
		k := e.ntSMTP(t)
		opts := map[string]string{"emailconfig": "mail1", "To": "admin realm", "To admin realm": "admins", "body": "for {recipient_givenname}"}
		raw, m := one(t, e, k, opts, ntAdminCall("", nil))
		got := slices.Sorted(slices.Values(raw.To))
		if !slices.Equal(got, []string{"ops@example.com", "root@example.com"}) {
			t.Errorf("recipients %v", raw.To)
		}
		if !strings.Contains(m.parts["text/plain"], "admins") {
			t.Errorf("body %q", m.parts["text/plain"])
		}
	})

	t.Run("LoggedInUser", func(t *testing.T) {
		e := newNtEnv(t)
		k := e.ntSMTP(t)
		c := ntAdminCall("", nil)
		c.Caller = caller.Caller{Role: caller.User, Name: "bob", Realm: "realm1"}
		c.User.Login = "alice" // the recipient is the caller, not the request's user
		raw, _ := one(t, e, k, map[string]string{"emailconfig": "mail1", "To": "logged_in_user", "body": "x"}, c)
		if !slices.Equal(raw.To, []string{"bob@example.com"}) {
			t.Errorf("recipients %v", raw.To)
		}
	})

	t.Run("HTMLEscapesAndShowsQRCode", func(t *testing.T) {
		e := newNtEnv(t)
		k := e.ntSMTP(t)
		c := ntAdminCall("", detail)
		c.User.Login = "bob"
		opts := map[string]string{"emailconfig": "mail1", "mimetype": "html", "attach_qrcode": "True",
			"subject": "for {surname}", "body": `<p>Dear {recipient_surname}</p><p>{surname}</p><img src="cid:token_image">`}
		_, m := one(t, e, k, opts, c)
		body, ok := m.parts["text/html"]
		if !ok {
			t.Fatalf("no HTML part: %v", m.parts)
		}
		if !strings.Contains(body, "<p>Dear &lt;b&gt;Jones&lt;/b&gt;</p><p>&lt;b&gt;Jones&lt;/b&gt;</p>") {
			t.Errorf("tag value not escaped: %q", body)
		}
		if !strings.Contains(body, `<img src="`+qr+`">`) || strings.Contains(body, "cid:token_image") {
			t.Errorf("QR code not inlined: %q", body)
		}
		if got := m.subject(t); got != "for <b>Jones</b>" {
			t.Errorf("subject %q (a header takes the plain value)", got)
		}
	})

	t.Run("QRCodeAppended", func(t *testing.T) {
		e := newNtEnv(t)
		k := e.ntSMTP(t)
		opts := map[string]string{"emailconfig": "mail1", "mimetype": "html", "attach_qrcode": "1", "body": "<p>hi</p>"}
		_, m := one(t, e, k, opts, ntAdminCall("", detail))
		if !strings.Contains(m.parts["text/html"], `<img src="`+qr+`"`) {
			t.Errorf("QR code missing: %q", m.parts["text/html"])
		}
	})

	t.Run("Failures", func(t *testing.T) {
		e := newNtEnv(t)
		k := e.ntSMTP(t)
		userCall := ntAdminCall("", nil)
		userCall.Caller = caller.Caller{Role: caller.User, Name: "carol", Realm: "realm1"}
		noUser := ntAdminCall("", nil)
		noUser.User.Login, noUser.Serial, noUser.Params = "", "", nil
		carol := ntAdminCall("", nil)
		carol.User.Login = "carol"
		tests := []struct {
			name string
			opts map[string]string
			c    *Call
			want string
		}{
			{"OwnerWithoutEmail", map[string]string{"To": "tokenowner"}, carol, "no e-mail address"},
			{"NoOwner", map[string]string{"To": "tokenowner"}, noUser, "no token owner"},
			{"LoggedInAdmin", map[string]string{"To": "logged_in_user"}, ntAdminCall("", nil), "administrator"},
			{"LoggedInUserWithoutEmail", map[string]string{"To": "logged_in_user"}, userCall, "no e-mail address"},
			{"InternalAdmin", map[string]string{"To": "internal admin", "To internal admin": "admin"}, ntAdminCall("", nil), "administrators have none"},
			{"EmptyAdminRealm", map[string]string{"To": "admin realm", "To admin realm": "nosuchrealm"}, ntAdminCall("", nil), "no user of realm"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tt.opts["emailconfig"] = "mail1"
				err := e.do(t, e.run("UserNotification", "sendmail", tt.opts, tt.c))
				if !errors.Is(err, errNoRecipient) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want no recipient with %q", err, tt.want)
				}
			})
		}
		if n := len(k.Messages()); n != 0 {
			t.Errorf("%d messages sent", n)
		}
	})

	t.Run("UnknownSMTPServer", func(t *testing.T) {
		e := newNtEnv(t)
		err := e.do(t, e.run("UserNotification", "sendmail", map[string]string{"emailconfig": "nosuch"}, ntAdminCall("", nil)))
		if !errors.Is(err, notify.ErrSMTPNotFound) {
			t.Fatalf("error %v", err)
		}
	})
}

// ntGateway is an HTTP SMS gateway that records the forms it gets.
type ntGateway struct {
	srv   *httptest.Server
	mu    sync.Mutex
	forms []url.Values
}

func newNtGateway(t *testing.T, e *ntEnv) *ntGateway {
	t.Helper()
	g := &ntGateway{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f, _ := url.ParseQuery(string(b))
		g.mu.Lock()
		g.forms = append(g.forms, f)
		g.mu.Unlock()
		_, _ = io.WriteString(w, "OK")
	}))
	t.Cleanup(g.srv.Close)
	_, err := e.notify.SetGateway(t.Context(), notify.Gateway{Name: "gw", Module: notify.ModuleHTTP,
		Options: map[string]string{"URL": g.srv.URL + "/send", "HTTP_METHOD": "POST", "to": "{phone}", "text": "{otp}"}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *ntGateway) got() []url.Values {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.forms)
}

func TestUserNotificationSendSMS(t *testing.T) {
	t.Run("TokenOwner", func(t *testing.T) {
		e := newNtEnv(t)
		g := newNtGateway(t, e)
		e.token(t, "HOTP0001", "")
		opts := map[string]string{"smsconfig": "gw", "body": "Token {serial} of {user} changed: {action}"}
		if err := e.check(t, "UserNotification", "sendsms", opts); err != nil {
			t.Fatal(err)
		}
		if err := e.do(t, e.run("UserNotification", "sendsms", opts, ntAdminCall("HOTP0001", nil))); err != nil {
			t.Fatal(err)
		}
		forms := g.got()
		if len(forms) != 1 {
			t.Fatalf("%d requests", len(forms))
		}
		if forms[0].Get("to") != "+49 170 1111" || forms[0].Get("text") != "Token HOTP0001 of Alice Smith changed: POST /token/init" {
			t.Errorf("form %v", forms[0])
		}
	})

	t.Run("AdminRealmWithoutMobiles", func(t *testing.T) {
		e := newNtEnv(t)
		g := newNtGateway(t, e)
		opts := map[string]string{"smsconfig": "gw", "To": "admin realm", "To admin realm": "admins"}
		err := e.do(t, e.run("UserNotification", "sendsms", opts, ntAdminCall("", nil)))
		if !errors.Is(err, errNoRecipient) || !strings.Contains(err.Error(), "mobile number") {
			t.Fatalf("error %v", err)
		}
		if len(g.got()) != 0 {
			t.Error("an SMS was sent")
		}
	})

	t.Run("EmailTypeHasNoPhone", func(t *testing.T) {
		e := newNtEnv(t)
		opts := map[string]string{"smsconfig": "gw", "To": "email", "To email": "a@example.com"}
		if err := e.do(t, e.run("UserNotification", "sendsms", opts, ntAdminCall("", nil))); !errors.Is(err, errNoRecipient) {
			t.Fatalf("error %v", err)
		}
	})
}

func TestUserNotificationSaveFile(t *testing.T) {
	t.Run("Writes", func(t *testing.T) {
		e := newNtEnv(t)
		e.token(t, "HOTP0001", "")
		opts := map[string]string{"filename": "{serial}-{random}.txt", "body": "user={username} serial={serial} pin={pin}"}
		if err := e.check(t, "UserNotification", "savefile", opts); err != nil {
			t.Fatal(err)
		}
		r := e.run("UserNotification", "savefile", opts, ntAdminCall("HOTP0001", map[string]any{"pin": "p-77"}))
		if err := e.do(t, r); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(e.spool, "HOTP0001-*.txt"))
		if len(files) != 1 {
			t.Fatalf("files %v", files)
		}
		if rnd := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(files[0]), "HOTP0001-"), ".txt"); len(rnd) != 16 {
			t.Errorf("random part %q", rnd)
		}
		b, err := os.ReadFile(files[0])
		if err != nil || string(b) != "user=alice serial=HOTP0001 pin=p-77" {
			t.Errorf("content %q (%v)", b, err)
		}
		fi, _ := os.Stat(files[0])
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("mode %v", fi.Mode())
		}
		// A second run gets another random name.
		if err := e.do(t, e.run("UserNotification", "savefile", opts, ntAdminCall("HOTP0001", nil))); err != nil {
			t.Fatal(err)
		}
		if files, _ := filepath.Glob(filepath.Join(e.spool, "HOTP0001-*.txt")); len(files) != 2 {
			t.Errorf("files %v", files)
		}
	})

	t.Run("RefusesEscapes", func(t *testing.T) {
		e := newNtEnv(t)
		outside := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(e.spool, "link")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(outside, "target.txt"), filepath.Join(e.spool, "file.txt")); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"../escape.txt", "/tmp/abs.txt", "a/../../escape.txt", "link/x.txt", "file.txt", "{tokendescription}"} {
			t.Run(name, func(t *testing.T) {
				c := ntAdminCall("", nil)
				if name == "{tokendescription}" {
					e.token(t, "HOTP0009", "../escape-by-tag.txt")
					c.Serial = "HOTP0009"
				}
				err := e.do(t, e.run("UserNotification", "savefile", map[string]string{"filename": name, "body": "x"}, c))
				if !apierr.Is(err, apierr.Parameter) {
					t.Fatalf("error %v, want a parameter error", err)
				}
			})
		}
		if entries, _ := os.ReadDir(outside); len(entries) != 0 {
			t.Errorf("written outside the spool directory: %v", entries)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(e.spool), "escape.txt")); err == nil {
			t.Error("escape.txt written next to the spool directory")
		}
		// Check refuses what it can see before tags are substituted.
		for _, name := range []string{"../x", "/abs", ""} {
			if err := e.check(t, "UserNotification", "savefile", map[string]string{"filename": name}); !apierr.Is(err, apierr.Parameter) {
				t.Errorf("Check(%q) = %v", name, err)
			}
		}
	})

	t.Run("NoSpoolDir", func(t *testing.T) {
		e := newNtEnv(t, func(c *Config) { c.SpoolDir = "" })
		opts := map[string]string{"filename": "x.txt", "body": "x"}
		for _, err := range []error{
			e.check(t, "UserNotification", "savefile", opts),
			e.do(t, e.run("UserNotification", "savefile", opts, ntAdminCall("", nil))),
		} {
			if !apierr.Is(err, apierr.ConfigAdmin) || !strings.Contains(err.Error(), "no spool directory is configured") {
				t.Errorf("error %v", err)
			}
		}
	})
}

func TestUserNotificationCheck(t *testing.T) {
	e := newNtEnv(t)
	tests := []struct {
		name, action string
		opts         map[string]string
		ok           bool
	}{
		{"MailOK", "sendmail", map[string]string{"emailconfig": "m", "To": "email", "To email": "a@example.com", "mimetype": "HTML"}, true},
		{"MailDefaults", "sendmail", map[string]string{"emailconfig": "m"}, true},
		{"MailNoConfig", "sendmail", map[string]string{"To": "tokenowner"}, false},
		{"MailBadTo", "sendmail", map[string]string{"emailconfig": "m", "To": "everybody"}, false},
		{"MailBadEmail", "sendmail", map[string]string{"emailconfig": "m", "To": "email", "To email": "not an address"}, false},
		{"MailNoEmail", "sendmail", map[string]string{"emailconfig": "m", "To": "email"}, false},
		{"MailAdminRealmMissing", "sendmail", map[string]string{"emailconfig": "m", "To": "admin realm"}, false},
		{"MailBadReplyTo", "sendmail", map[string]string{"emailconfig": "m", "reply_to": "x"}, false},
		{"MailEmptyReplyTo", "sendmail", map[string]string{"emailconfig": "m", "reply_to": ""}, true},
		{"MailBadMimetype", "sendmail", map[string]string{"emailconfig": "m", "mimetype": "rtf"}, false},
		{"MailFileBody", "sendmail", map[string]string{"emailconfig": "m", "body": "file:/etc/passwd"}, false},
		{"MailSubjectLines", "sendmail", map[string]string{"emailconfig": "m", "subject": "a\r\nBcc: x@example.com"}, false},
		{"SMSOK", "sendsms", map[string]string{"smsconfig": "gw"}, true},
		{"SMSNoConfig", "sendsms", map[string]string{}, false},
		{"SaveOK", "savefile", map[string]string{"filename": "n/{serial}.txt", "body": "b"}, true},
		{"SaveNoName", "savefile", map[string]string{"body": "b"}, false},
		{"UnknownActionStored", "nosuchaction", map[string]string{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.check(t, "UserNotification", tt.action, tt.opts)
			if tt.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tt.ok && !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("error %v, want a parameter error", err)
			}
		})
	}
	if err := e.do(t, e.run("UserNotification", "sendmail", map[string]string{"emailconfig": "m", "body": "file:/etc/passwd"},
		ntAdminCall("", nil))); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("Do with a file body: %v", err)
	}
}

func TestUserNotificationActions(t *testing.T) {
	e := newNtEnv(t)
	e.ntSMTP(t)
	m, _ := e.svc.Module("UserNotification")
	acts, err := m.Actions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mail := acts["sendmail"]
	if !mail["emailconfig"].Required || !slices.Equal(mail["emailconfig"].Value, []string{"mail1"}) {
		t.Errorf("emailconfig %+v", mail["emailconfig"])
	}
	for _, k := range []string{"To", "To tokenowner", "To email", "To admin realm", "To internal admin", "To logged_in_user",
		"reply_to", "reply_to email", "subject", "body", "mimetype", "attach_qrcode"} {
		if _, ok := mail[k]; !ok {
			t.Errorf("sendmail lacks option %q", k)
		}
	}
	if ar := mail["To admin realm"]; ar.VisibleIf != "To" || ar.VisibleValue != "admin realm" || !slices.Equal(ar.Value, []string{"admins"}) {
		t.Errorf("To admin realm %+v", ar)
	}
	if _, ok := acts["sendsms"]["smsconfig"]; !ok {
		t.Error("sendsms lacks smsconfig")
	}
	if !acts["savefile"]["filename"].Required {
		t.Error("savefile filename not required")
	}
	if m.Name() != "UserNotification" || m.DefaultAbort() || !slices.Equal(m.Positions(), []string{"post", "pre"}) {
		t.Errorf("module %s %v %v", m.Name(), m.DefaultAbort(), m.Positions())
	}
}
