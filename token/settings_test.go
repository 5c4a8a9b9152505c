package token_test

import (
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/token"
)

// settingsSource is a Config.Source whose settings a test changes while
// the service runs (as the system configuration does).
type settingsSource struct {
	mu  sync.Mutex
	set token.Settings
}

func (s *settingsSource) get() *token.Settings {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.set.WithDefaults()
	return &c
}

func (s *settingsSource) change(f func(*token.Settings)) {
	s.mu.Lock()
	f(&s.set)
	s.mu.Unlock()
}

// newSettingsEnv is newEnv with settings read from a source at each use.
func newSettingsEnv(t *testing.T, set token.Settings) (*env, *settingsSource) {
	t.Helper()
	src := &settingsSource{set: set}
	return newEnv(t, func(c *token.Config) { c.Source = src.get }), src
}

func countAuths(t *testing.T, e *env, serial string) (auth, success string) {
	t.Helper()
	tok, err := e.svc.Get(t.Context(), serial)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Info[token.InfoCountAuth], tok.Info[token.InfoCountAuthSuccess]
}

func TestSettingsNoAuthCounter(t *testing.T) {
	e, src := newSettingsEnv(t, token.Settings{NoAuthCounter: true})
	ctx := t.Context()
	key, _ := hex.DecodeString(rfcKey)
	tok, _ := e.initToken(t, "hotp", "OATHNOCOUNT", token.Params{"otpkey": rfcKey})

	if r, err := e.svc.CheckOTP(ctx, tok.Serial, hotpAt(key, 0), nil); err != nil || !r.OK {
		t.Fatalf("check: %+v %v", r, err)
	}
	if r, err := e.svc.CheckOTP(ctx, tok.Serial, "000000", nil); err != nil || r.OK {
		t.Fatalf("wrong check: %+v %v", r, err)
	}
	if a, s := countAuths(t, e, tok.Serial); a != "" || s != "" {
		t.Errorf("no_auth_counter: count_auth %q count_auth_success %q, want both unset", a, s)
	}
	got, _ := e.svc.Get(ctx, tok.Serial)
	if got.FailCount != 1 || got.Count != 1 {
		t.Errorf("fail counter %d, counter %d: want 1 and 1 (only the auth counters are off)", got.FailCount, got.Count)
	}

	// The setting changes at run time: the counters count again.
	src.change(func(s *token.Settings) { s.NoAuthCounter = false })
	if r, err := e.svc.CheckOTP(ctx, tok.Serial, hotpAt(key, 1), nil); err != nil || !r.OK {
		t.Fatalf("check: %+v %v", r, err)
	}
	if r, err := e.svc.CheckOTP(ctx, tok.Serial, "000000", nil); err != nil || r.OK {
		t.Fatalf("wrong check: %+v %v", r, err)
	}
	if a, s := countAuths(t, e, tok.Serial); a != "2" || s != "1" {
		t.Errorf("counting again: count_auth %q count_auth_success %q, want 2 and 1", a, s)
	}
}

func TestSettingsDefaultHashlib(t *testing.T) {
	e, src := newSettingsEnv(t, token.Settings{HOTPHashlib: "sha256", TOTPHashlib: "sha512"})
	cases := []struct {
		typ    string
		params token.Params
		want   string
	}{
		{"hotp", nil, "sha256"},
		{"hotp", token.Params{"hashlib": "sha1"}, "sha1"},
		{"totp", nil, "sha512"},
		{"totp", token.Params{"hashlib": "sha256"}, "sha256"},
		{"daypassword", nil, "sha512"},
		{"email", token.Params{"email": "alice@example.org"}, "sha256"},
		{"sms", token.Params{"phone": "+4912345"}, "sha256"},
		{"paper", nil, "sha256"},
	}
	for _, tc := range cases {
		t.Run(tc.typ+"_"+tc.want, func(t *testing.T) {
			p := token.Params{"genkey": "1"}
			for k, v := range tc.params {
				p[k] = v
			}
			tok, _ := e.initToken(t, tc.typ, "", p)
			if got := tok.Info[token.InfoHashlib]; got != tc.want {
				t.Errorf("hashlib %q, want %q", got, tc.want)
			}
		})
	}

	// The token checks with its hash: an HOTP value made with SHA-256
	// is accepted, one made with SHA-1 is not.
	tok, _ := e.initToken(t, "hotp", "OATHSHA256", token.Params{"otpkey": rfcKey})
	key, _ := hex.DecodeString(rfcKey)
	if r, err := e.svc.CheckOTP(t.Context(), tok.Serial, otp.HOTP(key, 0, 6, otp.SHA1), nil); err != nil || r.OK {
		t.Errorf("a SHA-1 value: %+v %v, want rejected", r, err)
	}
	if r, err := e.svc.CheckOTP(t.Context(), tok.Serial, otp.HOTP(key, 1, 6, otp.SHA256), nil); err != nil || !r.OK {
		t.Errorf("a SHA-256 value: %+v %v, want accepted", r, err)
	}

	// Unset (or unknown): SHA-1, as before.
	src.change(func(s *token.Settings) { s.HOTPHashlib, s.TOTPHashlib = "", "md5" })
	for _, typ := range []string{"hotp", "totp"} {
		tok, _ := e.initToken(t, typ, "", token.Params{"genkey": "1"})
		if got := tok.Info[token.InfoHashlib]; got != "sha1" {
			t.Errorf("%s without setting: hashlib %q, want sha1", typ, got)
		}
	}
}

func TestSettingsEmailDefaults(t *testing.T) {
	e, src := newSettingsEnv(t, token.Settings{})
	ctx := t.Context()
	sink := testsvc.NewSMTPSink(t)
	if err := e.notify.SetSMTP(ctx, notify.SMTPServer{Identifier: "mail", Server: "127.0.0.1", Port: sink.Port, Sender: "authsrv@example.org", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	tok, detail := e.initToken(t, "email", "PIEM0001A", token.Params{"email": "alice@example.org"})
	key := seedOf(t, detail)

	t.Run("NoServerAnywhere", func(t *testing.T) {
		_, _, err := e.svc.CreateChallenge(ctx, tok, "10000000000000000001", "", nil, nil)
		wantNotSent(t, err, token.ErrEmailNotSent, hotpAt(key, 1))
		cause := token.SendCause(err)
		want := "e-mail token PIEM0001A has no SMTP server: set the system setting email.identifier or the token's email.identifier"
		if cause == nil || cause.Error() != want {
			t.Errorf("cause %v, want %q", cause, want)
		}
		wantNoChallenge(t, e, tok.Serial)
		if got, _ := e.svc.Get(ctx, tok.Serial); got.Count != 0 {
			t.Errorf("counter %d after a challenge that could not be sent, want 0", got.Count)
		}
	})

	t.Run("SystemSetting", func(t *testing.T) {
		src.change(func(s *token.Settings) {
			s.Values = map[string]string{token.EmailIdentifier: "mail", token.EmailValidTime: "600"}
		})
		res, ch, err := e.svc.CreateChallenge(ctx, tok, "10000000000000000002", "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Validity != 600*time.Second || ch == nil || !ch.Expiration.Equal(e.clock.Now().Add(600*time.Second)) {
			t.Errorf("validity %v, challenge %+v: want 600 s from email.validtime", res.Validity, ch)
		}
		if m := lastMail(t, sink, 1); m.Body != hotpAt(key, 1) {
			t.Errorf("mail %+v", m)
		}
		// A request option still wins over the system setting.
		res, _, err = e.svc.CreateChallenge(ctx, tok, "10000000000000000003", "", token.Params{token.EmailValidTime: "60"}, nil)
		if err != nil || res.Validity != 60*time.Second {
			t.Errorf("option validity: %v %v, want 60 s", res, err)
		}
	})

	t.Run("TokenIdentifierWins", func(t *testing.T) {
		src.change(func(s *token.Settings) { s.Values = map[string]string{token.EmailIdentifier: "nope"} })
		own, _ := e.initToken(t, "email", "PIEM0002B", token.Params{"email": "bob@example.org", "email.identifier": "mail"})
		if _, _, err := e.svc.CreateChallenge(ctx, own, "10000000000000000004", "", nil, nil); err != nil {
			t.Fatalf("the token's own SMTP server: %v", err)
		}
		// The unknown server of the system setting: the cause names it.
		_, _, err := e.svc.CreateChallenge(ctx, tok, "10000000000000000005", "", nil, nil)
		wantNotSent(t, err, token.ErrEmailNotSent)
		if cause := token.SendCause(err); cause == nil || !strings.Contains(cause.Error(), "PIEM0001A") || !strings.Contains(cause.Error(), "nope") {
			t.Errorf("cause %v, want the serial and the server", cause)
		}
	})
}

func TestSettingsSMSDefaults(t *testing.T) {
	e, src := newSettingsEnv(t, token.Settings{})
	ctx := t.Context()
	rec := newSMSRecorder(t)
	g := notify.Gateway{Name: "gw", Module: notify.ModuleHTTP, Options: map[string]string{
		"URL": rec.srv.URL + "/send", "HTTP_METHOD": "GET", "to": "{phone}", "text": "{otp}", "TIMEOUT": "2"}}
	if _, err := e.notify.SetGateway(ctx, g); err != nil {
		t.Fatal(err)
	}
	tok, detail := e.initToken(t, "sms", "PISM0001A", token.Params{"phone": "+4912345"})
	key := seedOf(t, detail)

	_, _, err := e.svc.CreateChallenge(ctx, tok, "20000000000000000001", "", nil, nil)
	wantNotSent(t, err, token.ErrSMSNotSent, hotpAt(key, 1))
	want := "SMS token PISM0001A has no SMS gateway: set the system setting sms.identifier or the token's sms.identifier"
	if cause := token.SendCause(err); cause == nil || cause.Error() != want {
		t.Errorf("cause %v, want %q", cause, want)
	}
	wantNoChallenge(t, e, tok.Serial)

	src.change(func(s *token.Settings) {
		s.Values = map[string]string{token.SMSIdentifier: "gw", token.SMSProviderTimeout: "90"}
	})
	res, ch, err := e.svc.CreateChallenge(ctx, tok, "20000000000000000002", "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Validity != 90*time.Second || ch == nil || !ch.Expiration.Equal(e.clock.Now().Add(90*time.Second)) {
		t.Errorf("validity %v, challenge %+v: want 90 s from sms.providerTimeout", res.Validity, ch)
	}
	if phone, text := rec.last(t, 1); phone != "+4912345" || text != hotpAt(key, 1) {
		t.Errorf("sent to %q: %q", phone, text)
	}
}

func TestSendCauseOfOtherErrors(t *testing.T) {
	if c := token.SendCause(token.ErrLocked); c != nil {
		t.Errorf("SendCause(ErrLocked) = %v, want nil", c)
	}
	if c := token.SendCause(nil); c != nil {
		t.Errorf("SendCause(nil) = %v", c)
	}
}

// TestSettingsHashlibNotForImports: a token file that names no hash
// describes SHA-1 tokens, whatever hotp.hashlib says of new enrollments.
func TestSettingsHashlibNotForImports(t *testing.T) {
	e, _ := newSettingsEnv(t, token.Settings{HOTPHashlib: "sha256", TOTPHashlib: "sha256"})
	key := []byte("12345678901234567890")
	recs := []token.ImportRecord{
		{Serial: "IMPH1", Type: "hotp", Key: key},
		{Serial: "IMPT1", Type: "totp", Key: key},
		{Serial: "IMPH2", Type: "hotp", Key: key, HashLib: "sha512"},
	}
	if n, failed := e.svc.Import(t.Context(), recs, nil); n != 3 || len(failed) != 0 {
		t.Fatalf("Import = %d, %+v", n, failed)
	}
	for serial, want := range map[string]string{"IMPH1": "sha1", "IMPT1": "sha1", "IMPH2": "sha512"} {
		tok, err := e.svc.Get(t.Context(), serial)
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Info[token.InfoHashlib]; got != want {
			t.Errorf("%s hashlib %q, want %q", serial, got, want)
		}
	}
}
