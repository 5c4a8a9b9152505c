package token_test

import (
	"crypto/hmac"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// radiusLocalPIN is the method the validate layer asks.
type radiusLocalPIN interface{ LocalPIN(*token.Token) bool }

func TestRadiusEnroll(t *testing.T) {
	e := newEnv(t)
	if err := e.notify.SetRadius(t.Context(), notify.RadiusServer{Identifier: "rad 1", Server: "127.0.0.1", Secret: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		params token.Params
	}{
		{"NoIdentifier", token.Params{}},
		{"UnknownIdentifier", token.Params{"radius.identifier": "nope"}},
		{"ControlUser", token.Params{"radius.identifier": "rad_1", "radius.user": "a\nb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.svc.Init(t.Context(), token.InitRequest{Type: "radius", Params: tc.params})
			if !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("err %v, want a parameter error", err)
			}
		})
	}
	typ, ok := e.svc.Types().Get("radius")
	if !ok {
		t.Fatal("radius is not registered")
	}
	lp, ok := typ.(radiusLocalPIN)
	if !ok {
		t.Fatal("the radius type has no LocalPIN")
	}
	tok, detail := e.initToken(t, "radius", "", token.Params{"radius.identifier": "rad 1", "radius.user": "bob"})
	if tok.Serial[:4] != "PIRA" || tok.Info["radius.identifier"] != "rad_1" || tok.Info["radius.user"] != "bob" || len(tok.Sealed) != 0 {
		t.Errorf("token %+v", tok)
	}
	if _, ok := detail["otpkey"]; ok {
		t.Errorf("detail %v shows a key", detail)
	}
	if lp.LocalPIN(tok) {
		t.Error("LocalPIN without radius.local_checkpin")
	}
	tok, _ = e.initToken(t, "radius", "", token.Params{"radius.identifier": "rad_1", "radius.local_checkpin": "1"})
	if !lp.LocalPIN(tok) || tok.Info["radius.local_checkpin"] != "True" {
		t.Errorf("LocalPIN with radius.local_checkpin=1: info %v", tok.Info)
	}
}

func TestRadiusCheckFreeRADIUS(t *testing.T) {
	rad := testsvc.FreeRADIUS(t, map[string]string{"raduser": "rad-Pass-1", "alice": "alice-Pass-2"})
	e := newEnv(t)
	ctx := t.Context()
	if err := e.notify.SetRadius(ctx, notify.RadiusServer{Identifier: "rad1", Server: "127.0.0.1", Port: rad.Port,
		Secret: string(rad.Secret), Timeout: 1, Retries: 1}); err != nil {
		t.Fatal(err)
	}
	fixed, _ := e.initToken(t, "radius", "PIRA0001", token.Params{"radius.identifier": "rad1", "radius.user": "raduser"})
	owned, _, err := e.svc.Init(ctx, token.InitRequest{Type: "radius", Serial: "PIRA0002",
		Owner: &user.User{Login: "alice", Realm: "r1", Resolver: "res1", UID: "1"}, Params: token.Params{"radius.identifier": "rad1"}})
	if err != nil {
		t.Fatal(err)
	}
	unowned, _ := e.initToken(t, "radius", "PIRA0003", token.Params{"radius.identifier": "rad1"})

	for _, tc := range []struct {
		name, serial, pass string
		ok                 bool
	}{
		{"AcceptConfiguredUser", fixed.Serial, "rad-Pass-1", true},
		{"RejectConfiguredUser", fixed.Serial, "wrong", false},
		{"AcceptOwner", owned.Serial, "alice-Pass-2", true},
		{"RejectOwnerWithOtherPassword", owned.Serial, "rad-Pass-1", false},
		// No replay protection here: the RADIUS server decides.
		{"AcceptAgain", fixed.Serial, "rad-Pass-1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := e.svc.CheckOTP(ctx, tc.serial, tc.pass, nil)
			if err != nil || r.OK != tc.ok {
				t.Fatalf("CheckOTP = %+v, %v; want ok=%v", r, err, tc.ok)
			}
			if !tc.ok && r.Message != token.MsgWrongOTP {
				t.Errorf("message %q", r.Message)
			}
		})
	}

	t.Run("NoUserName", func(t *testing.T) {
		m, err := e.svc.Verify(ctx, unowned, "rad-Pass-1", nil, nil)
		if err == nil || m.OK {
			t.Fatalf("Verify = %+v, %v", m, err)
		}
	})

	t.Run("ServerDown", func(t *testing.T) {
		rad.Stop(t)
		tok, _ := e.svc.Get(ctx, fixed.Serial)
		m, err := e.svc.Verify(ctx, tok, "rad-Pass-1", nil, nil)
		if m.OK || !errors.Is(err, notify.ErrRadiusFailed) {
			t.Fatalf("Verify = %+v, %v; want no match and ErrRadiusFailed", m, err)
		}
		rad.Start(t)
		if m, err := e.svc.Verify(ctx, tok, "rad-Pass-1", nil, nil); err != nil || !m.OK {
			t.Fatalf("after the restart: %+v, %v", m, err)
		}
	})
}

// radiusChallenger answers every Access-Request with an Access-Challenge
// signed with secret (Message-Authenticator and Response Authenticator).
func radiusChallenger(t *testing.T, secret string) int {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if n < 20 || buf[0] != 1 {
				continue
			}
			// Code, identifier, length, the Request Authenticator; then a
			// zeroed Message-Authenticator, a Reply-Message and a State.
			b := []byte{11, buf[1], 0, 0}
			b = append(b, buf[4:20]...)
			b = append(b, 80, 18)
			b = append(b, make([]byte, 16)...)
			b = append(b, 18, 2+9)
			b = append(b, "Enter OTP"...)
			b = append(b, 24, 2+4)
			b = append(b, "st-1"...)
			binary.BigEndian.PutUint16(b[2:4], uint16(len(b)))
			mac := hmac.New(md5.New, []byte(secret))
			mac.Write(b)
			copy(b[22:38], mac.Sum(nil))
			h := md5.New()
			h.Write(b)
			h.Write([]byte(secret))
			copy(b[4:20], h.Sum(nil))
			_, _ = conn.WriteToUDP(b, from)
		}
	}()
	t.Cleanup(func() { _ = conn.Close(); <-done })
	return conn.LocalAddr().(*net.UDPAddr).Port
}

func TestRadiusChallengeIsNoMatch(t *testing.T) {
	const secret = "challenge-secret"
	port := radiusChallenger(t, secret)
	e := newEnv(t)
	ctx := t.Context()
	if err := e.notify.SetRadius(ctx, notify.RadiusServer{Identifier: "chal", Server: "127.0.0.1", Port: port, Secret: secret, Timeout: 2, Retries: 1}); err != nil {
		t.Fatal(err)
	}
	tok, _ := e.initToken(t, "radius", "PIRA0009", token.Params{"radius.identifier": "chal", "radius.user": "u"})
	m, err := e.svc.Verify(ctx, tok, "whatever", nil, nil)
	if err != nil || m.OK || m.Message != token.MsgRadiusChallenge {
		t.Fatalf("Verify = %+v, %v", m, err)
	}
	r, err := e.svc.CheckOTP(ctx, tok.Serial, "whatever", nil)
	if err != nil || r.OK || r.Message != token.MsgRadiusChallenge {
		t.Fatalf("CheckOTP = %+v, %v", r, err)
	}
}
