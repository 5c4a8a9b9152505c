package token_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// emailSetup returns a token service whose notify service knows the SMTP
// server "mail" (an in-process sink) and "down" (a closed port).
func emailSetup(t *testing.T) (*env, *testsvc.SMTPSink) {
	t.Helper()
	e := newEnv(t)
	sink := testsvc.NewSMTPSink(t)
	for id, port := range map[string]int{"mail": sink.Port, "down": testsvc.FreePort(t)} {
		err := e.notify.SetSMTP(t.Context(), notify.SMTPServer{Identifier: id, Server: "127.0.0.1", Port: port, Sender: "authsrv@example.org", Timeout: 5})
		if err != nil {
			t.Fatal(err)
		}
	}
	return e, sink
}

// seedOf reads the key from an init detail (seed://<hex>).
func seedOf(t *testing.T, detail map[string]any) []byte {
	t.Helper()
	d, _ := detail["otpkey"].(map[string]any)
	v, _ := d["value"].(string)
	k, err := hex.DecodeString(strings.TrimPrefix(v, "seed://"))
	if err != nil || len(k) == 0 || !strings.HasPrefix(v, "seed://") {
		t.Fatalf("otpkey detail %v", detail["otpkey"])
	}
	return k
}

// sentMail is a received message's recipients, subject and decoded body.
type sentMail struct {
	To      []string
	Subject string
	Body    string
}

func parseSent(t *testing.T, m testsvc.Mail) sentMail {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(m.Data))
	if err != nil {
		t.Fatalf("mail does not parse: %v\n%s", err, m.Data)
	}
	raw, err := io.ReadAll(msg.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := string(raw)
	switch strings.ToLower(msg.Header.Get("Content-Transfer-Encoding")) {
	case "quoted-printable":
		b, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(raw)))
		if err != nil {
			t.Fatal(err)
		}
		body = string(b)
	case "base64":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
		if err != nil {
			t.Fatal(err)
		}
		body = string(b)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	return sentMail{To: m.To, Subject: subject, Body: strings.TrimSpace(body)}
}

// lastMail waits for the n-th message of the sink (1-based) and returns it.
func lastMail(t *testing.T, sink *testsvc.SMTPSink, n int) sentMail {
	t.Helper()
	msgs := sink.Messages()
	if len(msgs) != n {
		t.Fatalf("the sink holds %d messages, want %d", len(msgs), n)
	}
	return parseSent(t, msgs[n-1])
}

func hotpAt(key []byte, c uint64) string { return otp.HOTP(key, c, 6, otp.HashOrSHA1("")) }

// wantNoChallenge fails when serial has a stored challenge.
func wantNoChallenge(t *testing.T, e *env, serial string) {
	t.Helper()
	chs, err := e.svc.Challenges(t.Context(), token.ChallengeFilter{Serial: serial, IncludeExpired: true})
	if err != nil || len(chs) != 0 {
		t.Fatalf("challenges of %s: %v, %v; want none", serial, chs, err)
	}
}

// wantNotSent checks a send failure: the sentinel, its wire text, and
// no secret in the error.
func wantNotSent(t *testing.T, err, sentinel error, secrets ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
	_, status, msg, _, internal := apierr.Wire(err)
	if internal || status != 400 || msg != "ERR401: "+sentinel.Error() {
		t.Errorf("wire %d %q internal=%v", status, msg, internal)
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) || strings.Contains(fmt.Sprintf("%+v", err), s) || strings.Contains(msg, s) {
			t.Errorf("error %q shows a secret", err)
		}
	}
}

func TestEmailEnroll(t *testing.T) {
	e := newEnv(t)
	bad := []struct {
		name   string
		params token.Params
	}{
		{"NoAddress", token.Params{}},
		{"EmptyAddress", token.Params{"email": " "}},
		{"NotAnAddress", token.Params{"email": "not an address"}},
		{"HeaderInjection", token.Params{"email": "a@example.org\r\nBcc: b@example.org"}},
		{"ControlIdentifier", token.Params{"email": "a@example.org", "email.identifier": "m\nx"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.svc.Init(t.Context(), token.InitRequest{Type: "email", Params: tc.params})
			if !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("err %v, want a parameter error", err)
			}
		})
	}

	t.Run("Address", func(t *testing.T) {
		tok, detail := e.initToken(t, "email", "", token.Params{"email": "alice@example.org", "email.identifier": "mail"})
		if !strings.HasPrefix(tok.Serial, "PIEM") || tok.Type != "email" || tok.OTPLen != 6 || tok.Count != 0 {
			t.Errorf("token %+v", tok)
		}
		if tok.Info["email"] != "alice@example.org" || tok.Info["email.identifier"] != "mail" || tok.Info["dynamic_email"] != "" {
			t.Errorf("info %v", tok.Info)
		}
		if len(seedOf(t, detail)) != 20 {
			t.Error("the generated key is not 20 bytes")
		}
		g, _ := detail["googleurl"].(map[string]any)
		if v, _ := g["value"].(string); !strings.HasPrefix(v, "otpauth://email/") {
			t.Errorf("googleurl %v", detail["googleurl"])
		}
		if _, ok := detail["oathurl"]; !ok {
			t.Error("no oathurl")
		}
	})

	t.Run("Dynamic", func(t *testing.T) {
		tok, _ := e.initToken(t, "email", "PIEMDYN", token.Params{"dynamic_email": "1"})
		if tok.Info["dynamic_email"] != "True" || tok.Info["email"] != "" {
			t.Errorf("info %v", tok.Info)
		}
		// Re-initialised with an address, it is static again.
		tok, _ = e.initToken(t, "email", "PIEMDYN", token.Params{"email": "b@example.org"})
		if tok.Info["dynamic_email"] != "" || tok.Info["email"] != "b@example.org" {
			t.Errorf("info after re-init %v", tok.Info)
		}
	})
}

func TestEmailChallengeSendsEachOTPOnce(t *testing.T) {
	e, sink := emailSetup(t)
	ctx := t.Context()
	owner := &user.User{Login: "alice", Realm: "r1", Resolver: "res1", UID: "1"}
	tok, detail, err := e.svc.Init(ctx, token.InitRequest{Type: "email", Serial: "PIEM0001", Owner: owner,
		Params: token.Params{"email": "alice@example.org", "email.identifier": "mail"}})
	if err != nil {
		t.Fatal(err)
	}
	key := seedOf(t, detail)
	opts := token.Params{
		"emailsubject":         "OTP for {user}",
		"emailtext":            "Hello {user}, your code for {serial} is {otp} (<otp>).",
		"email_challenge_text": "Sent to {email_redacted} for {user} ({serial}, {email})",
	}
	res, ch, err := e.svc.CreateChallenge(ctx, tok, "11111111111111111111", "", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Message != "Sent to a****@example.org for alice (PIEM0001, alice@example.org)" || res.ClientMode != "interactive" ||
		res.Validity != 120*time.Second ||
		fmt.Sprint(res.Attributes) != fmt.Sprintf("map[state:<nil> valid_until:%s]", pyTime(e.clock.Now().Add(120*time.Second))) {
		t.Errorf("result %+v", res)
	}
	if ch == nil || !ch.Expiration.Equal(e.clock.Now().Add(120*time.Second)) {
		t.Errorf("challenge %+v", ch)
	}
	first := hotpAt(key, 1)
	m := lastMail(t, sink, 1)
	want := fmt.Sprintf("Hello alice, your code for PIEM0001 is %s (%s).", first, first)
	if len(m.To) != 1 || m.To[0] != "alice@example.org" || m.Subject != "OTP for alice" || m.Body != want {
		t.Errorf("mail %+v, want body %q", m, want)
	}
	if got, _ := e.svc.Get(ctx, tok.Serial); got.Count != 1 {
		t.Errorf("count after the challenge %d, want 1", got.Count)
	}

	r, err := e.svc.CheckOTP(ctx, tok.Serial, first, nil)
	if err != nil || !r.OK {
		t.Fatalf("the mailed OTP: %+v, %v", r, err)
	}
	r, err = e.svc.CheckOTP(ctx, tok.Serial, first, nil)
	if err != nil || r.OK {
		t.Fatalf("the mailed OTP a second time: %+v, %v", r, err)
	}

	// The next challenge mails the next value; defaults apply.
	res, _, err = e.svc.CreateChallenge(ctx, tok, "22222222222222222222", "11111111111111111111", token.Params{"email.validtime": "300"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Message != "Enter the OTP from the Email" || res.Validity != 300*time.Second || res.Attributes["state"] != "11111111111111111111" ||
		res.Attributes["valid_until"] != pyTime(e.clock.Now().Add(300*time.Second)) {
		t.Errorf("second result %+v", res)
	}
	second := hotpAt(key, 3)
	m = lastMail(t, sink, 2)
	if m.Subject != "Your OTP" || m.Body != second || second == first {
		t.Errorf("second mail %+v, want body %q", m, second)
	}
	if r, err := e.svc.CheckOTP(ctx, tok.Serial, second, nil); err != nil || !r.OK {
		t.Fatalf("the second mailed OTP: %+v, %v", r, err)
	}
}

func TestEmailSendFailure(t *testing.T) {
	e, sink := emailSetup(t)
	ctx := t.Context()
	cases := []struct {
		name   string
		params token.Params
		opts   token.Params
	}{
		{"ServerDown", token.Params{"email.identifier": "down"}, nil},
		{"UnknownServer", token.Params{"email.identifier": "nope"}, nil},
		{"NoServer", token.Params{}, nil},
		{"OptionServerDown", token.Params{}, token.Params{"email.identifier": "down"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.params["email"] = "alice@example.org"
			tok, detail := e.initToken(t, "email", fmt.Sprintf("PIEMFAIL%d", i), tc.params)
			_, _, err := e.svc.CreateChallenge(ctx, tok, "33333333333333333333", "", tc.opts, nil)
			wantNotSent(t, err, token.ErrEmailNotSent, hotpAt(seedOf(t, detail), 1))
			wantNoChallenge(t, e, tok.Serial)
		})
	}
	if n := len(sink.Messages()); n != 0 {
		t.Errorf("the sink received %d messages", n)
	}
}

func TestEmailDynamicAddress(t *testing.T) {
	e, sink := emailSetup(t)
	ctx := t.Context()
	tok, detail := e.initToken(t, "email", "PIEMDYN1", token.Params{"dynamic_email": "true", "email.identifier": "mail"})
	key := seedOf(t, detail)

	t.Run("OwnerAddress", func(t *testing.T) {
		_, _, err := e.svc.CreateChallenge(ctx, tok, "44444444444444444444", "", token.Params{"email_challenge_text": "to {email}"}, map[string]string{"email": "bob@example.org"})
		if err != nil {
			t.Fatal(err)
		}
		m := lastMail(t, sink, 1)
		if len(m.To) != 1 || m.To[0] != "bob@example.org" || m.Body != hotpAt(key, 1) {
			t.Errorf("mail %+v", m)
		}
	})
	for _, tc := range []struct {
		name string
		info map[string]string
	}{
		{"NoOwnerInfo", nil},
		{"NoAddress", map[string]string{"mobile": "123"}},
		{"BadAddress", map[string]string{"email": "bob@example.org\nBcc: eve@example.org"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.svc.CreateChallenge(ctx, tok, "55555555555555555555", "", nil, tc.info)
			wantNotSent(t, err, token.ErrEmailNotSent)
			chs, _ := e.svc.Challenges(ctx, token.ChallengeFilter{TransactionID: "55555555555555555555"})
			if len(chs) != 0 {
				t.Errorf("challenges %v", chs)
			}
		})
	}
	if n := len(sink.Messages()); n != 1 {
		t.Errorf("the sink received %d messages, want 1", n)
	}
}
