package notify_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/notify"
)

func TestRadiusDefinitions(t *testing.T) {
	const sec = "radius-secret-7345"

	t.Run("RoundTripCensored", func(t *testing.T) {
		e := newEnv(t)
		rev := e.revision(t)
		err := e.s.SetRadius(t.Context(), notify.RadiusServer{Identifier: "my rad 1", Server: "10.0.0.1", Secret: sec,
			Options: map[string]any{"message_authenticator": true}})
		if err != nil {
			t.Fatal(err)
		}
		if e.revision(t) != rev+1 {
			t.Error("no config revision bump")
		}
		list, err := e.s.RadiusServers(t.Context())
		if err != nil || len(list) != 1 {
			t.Fatalf("RadiusServers = %v, %v", list, err)
		}
		got := list[0]
		if got.Identifier != "my_rad_1" || got.Server != "10.0.0.1" || got.Port != 1812 || got.Retries != 3 || got.Timeout != 5 ||
			got.Dictionary != "/etc/privacyidea/dictionary" || got.Secret != notify.Censored || got.Options["message_authenticator"] != true {
			t.Errorf("got %+v", got)
		}
		if bytes.Contains(e.snapshot(t), []byte(sec)) {
			t.Error("the secret is in clear in the store")
		}
		// The placeholder keeps the secret.
		got.Description = "changed"
		if err := e.s.SetRadius(t.Context(), got); err != nil {
			t.Fatal(err)
		}
		list, _ = e.s.RadiusServers(t.Context())
		if list[0].Secret != notify.Censored || list[0].Description != "changed" {
			t.Errorf("after keep: %+v", list[0])
		}
	})

	t.Run("Validation", func(t *testing.T) {
		e := newEnv(t)
		ok := notify.RadiusServer{Identifier: "r", Server: "radius.example.com", Secret: sec}
		cases := []struct {
			name string
			edit func(*notify.RadiusServer)
		}{
			{"NoIdentifier", func(d *notify.RadiusServer) { d.Identifier = " " }},
			{"NoServer", func(d *notify.RadiusServer) { d.Server = "" }},
			{"BadServer", func(d *notify.RadiusServer) { d.Server = "a b" }},
			{"NoSecret", func(d *notify.RadiusServer) { d.Secret = "" }},
			{"PlaceholderOnCreate", func(d *notify.RadiusServer) { d.Secret = notify.Censored }},
			{"BadPort", func(d *notify.RadiusServer) { d.Port = 70000 }},
			{"BadRetries", func(d *notify.RadiusServer) { d.Retries = 11 }},
			{"BadTimeout", func(d *notify.RadiusServer) { d.Timeout = -5 }},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				d := ok
				tc.edit(&d)
				wantCode(t, e.s.SetRadius(t.Context(), d), apierr.Parameter)
			})
		}
		t.Run("SecretTooLong", func(t *testing.T) {
			d := ok
			d.Secret = strings.Repeat("s", 256)
			err := e.s.SetRadius(t.Context(), d)
			num, status, msg, _, _ := apierr.Wire(err)
			if num != 2234 || status != 400 || msg != "ERR2234: The RADIUS secret is too long" {
				t.Errorf("wire %d %d %q", num, status, msg)
			}
			d.Secret = strings.Repeat("s", 255)
			if err := e.s.SetRadius(t.Context(), d); err != nil {
				t.Errorf("255 bytes: %v", err)
			}
		})
	})

	t.Run("Delete", func(t *testing.T) {
		e := newEnv(t)
		err := e.s.DeleteRadius(t.Context(), "nope")
		wantCode(t, err, apierr.ResourceNotFound)
		_ = e.s.SetRadius(t.Context(), notify.RadiusServer{Identifier: "r", Server: "h", Secret: sec})
		if err := e.s.DeleteRadius(t.Context(), "r"); err != nil {
			t.Fatal(err)
		}
		if l, _ := e.s.RadiusServers(t.Context()); len(l) != 0 {
			t.Errorf("left %v", l)
		}
		_, err = e.s.TestRadius(t.Context(), "r", "u", "p")
		wantCode(t, err, apierr.ResourceNotFound)
	})
}

// fakeRadius is an in-process RADIUS server on 127.0.0.1 that signs its
// answers with a Message-Authenticator (RFC 3579) as radclient requires.
// alice/right gets Accept, chal/any a Challenge with State "st-1",
// chal/otp with that State Accept, everything else Reject.
type fakeRadius struct {
	conn   *net.UDPConn
	secret []byte
	silent bool

	mu       sync.Mutex
	requests int
	nas      []string
}

func newFakeRadius(t *testing.T, secret string, silent bool) *fakeRadius {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRadius{conn: conn, secret: []byte(secret), silent: silent}
	done := make(chan struct{})
	go f.serve(done)
	t.Cleanup(func() { _ = conn.Close(); <-done })
	return f
}

func (f *fakeRadius) port() int { return f.conn.LocalAddr().(*net.UDPAddr).Port }

func (f *fakeRadius) serve(done chan struct{}) {
	defer close(done)
	buf := make([]byte, 4096)
	for {
		n, from, err := f.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		req, err := radius.Parse(bytes.Clone(buf[:n]), f.secret)
		if err != nil {
			continue
		}
		f.mu.Lock()
		f.requests++
		f.nas = append(f.nas, string(req.Get(rfc2865.NASIdentifier_Type)))
		f.mu.Unlock()
		if f.silent {
			continue
		}
		user := rfc2865.UserName_GetString(req)
		pass := rfc2865.UserPassword_GetString(req)
		state := rfc2865.State_Get(req)
		code, attrs := radius.CodeAccessReject, []attr{{18, []byte("Go away")}}
		switch {
		case user == "alice" && pass == "right":
			code, attrs = radius.CodeAccessAccept, []attr{{18, []byte("Welcome")}}
		case user == "chal" && string(state) == "st-1" && pass == "otp":
			code, attrs = radius.CodeAccessAccept, nil
		case user == "chal":
			code, attrs = radius.CodeAccessChallenge, []attr{{18, []byte("Enter OTP")}, {24, []byte("st-1")}}
		}
		_, _ = f.conn.WriteToUDP(signedReply(req, code, f.secret, attrs), from)
	}
}

type attr struct {
	typ byte
	val []byte
}

// signedReply builds an answer to req: a Message-Authenticator first
// (HMAC-MD5 over the packet with the Request Authenticator in the header),
// then attrs, then the Response Authenticator.
func signedReply(req *radius.Packet, code radius.Code, secret []byte, attrs []attr) []byte {
	b := []byte{byte(code), req.Identifier, 0, 0}
	b = append(b, req.Authenticator[:]...)
	b = append(b, 80, 18)
	b = append(b, make([]byte, 16)...)
	for _, a := range attrs {
		b = append(b, a.typ, byte(2+len(a.val)))
		b = append(b, a.val...)
	}
	binary.BigEndian.PutUint16(b[2:4], uint16(len(b)))
	mac := hmac.New(md5.New, secret)
	mac.Write(b)
	copy(b[22:38], mac.Sum(nil))
	h := md5.New()
	h.Write(b)
	h.Write(secret)
	copy(b[4:20], h.Sum(nil))
	return b
}

func TestRadiusAuth(t *testing.T) {
	const sec = "shared-secret-2828"
	e := newEnv(t)
	ctx := t.Context()
	f := newFakeRadius(t, sec, false)
	if err := e.s.SetRadius(ctx, notify.RadiusServer{Identifier: "rad", Server: "127.0.0.1", Port: f.port(), Secret: sec, Timeout: 1, Retries: 1,
		Options: map[string]any{"nas_identifier": "nas-test"}}); err != nil {
		t.Fatal(err)
	}

	t.Run("Accept", func(t *testing.T) {
		ok, err := e.s.TestRadius(ctx, "rad", "alice", "right")
		if err != nil || !ok {
			t.Fatalf("TestRadius = %v, %v", ok, err)
		}
		resp, err := e.s.RadiusAuth(ctx, "rad", "alice", "right", nil)
		if err != nil || resp.Code != notify.RadiusAccept || resp.ReplyMessage != "Welcome" {
			t.Errorf("RadiusAuth = %+v, %v", resp, err)
		}
		f.mu.Lock()
		nas := f.nas[len(f.nas)-1]
		f.mu.Unlock()
		if nas != "nas-test" {
			t.Errorf("NAS-Identifier %q", nas)
		}
	})

	t.Run("Reject", func(t *testing.T) {
		ok, err := e.s.TestRadius(ctx, "rad", "alice", "wrong")
		if err != nil || ok {
			t.Fatalf("TestRadius = %v, %v", ok, err)
		}
	})

	t.Run("Challenge", func(t *testing.T) {
		resp, err := e.s.RadiusAuth(ctx, "rad", "chal", "pin", nil)
		if err != nil || resp.Code != notify.RadiusChallenge || string(resp.State) != "st-1" || resp.ReplyMessage != "Enter OTP" {
			t.Fatalf("first leg %+v, %v", resp, err)
		}
		if ok, _ := e.s.TestRadius(ctx, "rad", "chal", "pin"); ok {
			t.Error("a challenge counts as success")
		}
		resp, err = e.s.RadiusAuth(ctx, "rad", "chal", "otp", resp.State)
		if err != nil || resp.Code != notify.RadiusAccept {
			t.Fatalf("second leg %+v, %v", resp, err)
		}
	})

	t.Run("KeptSecretStillWorks", func(t *testing.T) {
		list, _ := e.s.RadiusServers(ctx)
		if err := e.s.SetRadius(ctx, list[0]); err != nil { // Secret is the placeholder
			t.Fatal(err)
		}
		if ok, err := e.s.TestRadius(ctx, "rad", "alice", "right"); err != nil || !ok {
			t.Fatalf("TestRadius = %v, %v", ok, err)
		}
	})

	t.Run("WrongSecret", func(t *testing.T) {
		_ = e.s.SetRadius(ctx, notify.RadiusServer{Identifier: "wrong", Server: "127.0.0.1", Port: f.port(), Secret: "not-the-secret-1", Timeout: 1, Retries: 1})
		var ok bool
		err := within(t, 2500*time.Millisecond, func() error {
			var err error
			ok, err = e.s.TestRadius(ctx, "wrong", "alice", "right")
			return err
		})
		wantCode(t, err, apierr.ConfigAdmin)
		if ok || !errors.Is(err, notify.ErrRadiusFailed) || !strings.Contains(err.Error(), "shared secret") ||
			strings.Contains(err.Error(), "not-the-secret-1") {
			t.Errorf("ok %v err %v", ok, err)
		}
	})

	t.Run("NoAnswer", func(t *testing.T) {
		silent := newFakeRadius(t, sec, true)
		_ = e.s.SetRadius(ctx, notify.RadiusServer{Identifier: "silent", Server: "127.0.0.1", Port: silent.port(), Secret: sec, Timeout: 1, Retries: 2})
		err := within(t, 3500*time.Millisecond, func() error { _, err := e.s.TestRadius(ctx, "silent", "alice", "right"); return err })
		wantCode(t, err, apierr.ConfigAdmin)
		if !strings.Contains(err.Error(), "did not answer in time") {
			t.Errorf("err %v", err)
		}
		silent.mu.Lock()
		n := silent.requests
		silent.mu.Unlock()
		if n != 2 {
			t.Errorf("%d sends, want 2 (retries = number of tries)", n)
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		_, err := e.s.RadiusAuth(ctx, "nope", "alice", "right", nil)
		wantCode(t, err, apierr.ResourceNotFound)
	})

	if strings.Contains(e.log.String(), sec) || strings.Contains(e.log.String(), "right") {
		t.Error("a secret or password is in the log")
	}
}
