package radclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"

	"github.com/authsrv/authsrv/internal/radclient"
)

var testSecret = []byte("s3cret-shared")

const testPassword = "pw-Ünïcode-€"

// request returns a request for the fake at addr with short timeouts.
func request(addr string) radclient.Request {
	return radclient.Request{
		Addr: addr, Secret: testSecret, Username: "alice", Password: testPassword,
		Timeout: 100 * time.Millisecond, Retries: 1,
	}
}

// noLeak fails when err's text contains the secret or the password.
func noLeak(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if s := err.Error(); strings.Contains(s, string(testSecret)) || strings.Contains(s, testPassword) {
		t.Errorf("error leaks the secret or the password: %s", s)
	}
}

func TestExchangeAccept(t *testing.T) {
	f := newFake(t, testSecret, func(c call) [][]byte {
		return [][]byte{reply(t, c.Req, radius.CodeAccessAccept, testSecret, signed, withReply("hello, "), withReply("alice"))}
	})
	resp, err := radclient.Exchange(t.Context(), request(f.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != radclient.Accept || resp.ReplyMessage != "hello, alice" || resp.State != nil {
		t.Errorf("got %+v, want Accept with the joined Reply-Messages", resp)
	}

	// What the server received: a signed request with the attributes.
	calls := f.calls()
	if len(calls) != 1 {
		t.Fatalf("server got %d requests, want 1", len(calls))
	}
	c := calls[0]
	if err := checkRequestMA(c.Raw, testSecret); err != nil {
		t.Errorf("request Message-Authenticator: %v", err)
	}
	if err := checkRequestMA(c.Raw, []byte("other secret")); err == nil {
		t.Error("the Message-Authenticator verifies with another secret")
	}
	if c.Req.Code != radius.CodeAccessRequest {
		t.Errorf("code %v", c.Req.Code)
	}
	if got := rfc2865.UserName_GetString(c.Req); got != "alice" {
		t.Errorf("User-Name %q", got)
	}
	if got, err := rfc2865.UserPassword_LookupString(c.Req); err != nil || got != testPassword {
		t.Errorf("User-Password %q, %v", got, err)
	}
	if got := rfc2865.NASIdentifier_GetString(c.Req); got != "authsrv" {
		t.Errorf("NAS-Identifier %q, want authsrv", got)
	}
	if _, err := rfc2865.State_Lookup(c.Req); err == nil {
		t.Error("State sent without Request.State")
	}
}

func TestExchangeReplies(t *testing.T) {
	for _, tc := range []struct {
		name string
		code radius.Code
		s    signing
		want radclient.Code
	}{
		{"accept", radius.CodeAccessAccept, signed, radclient.Accept},
		{"reject", radius.CodeAccessReject, signed, radclient.Reject},
		{"challenge", radius.CodeAccessChallenge, signed, radclient.Challenge},
		{"Message-Authenticator last", radius.CodeAccessAccept, signedMALast, radclient.Accept},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, testSecret, func(c call) [][]byte {
				return [][]byte{reply(t, c.Req, tc.code, testSecret, tc.s)}
			})
			resp, err := radclient.Exchange(t.Context(), request(f.Addr()))
			if err != nil || resp.Code != tc.want {
				t.Fatalf("got %v, %v; want %v", resp.Code, err, tc.want)
			}
		})
	}
}

// TestRejectsInvalidReplies: the BlastRADIUS class. A reply that is not
// signed with both authenticators never counts, however often it comes.
func TestRejectsInvalidReplies(t *testing.T) {
	for _, tc := range []struct {
		name string
		code radius.Code
		s    signing
		want string
	}{
		{"no Message-Authenticator", radius.CodeAccessAccept, noMA, "no Message-Authenticator"},
		{"wrong Message-Authenticator", radius.CodeAccessAccept, wrongMA, "wrong Message-Authenticator"},
		{"wrong Response Authenticator", radius.CodeAccessAccept, wrongAuth, "wrong Response Authenticator"},
		{"two Message-Authenticators", radius.CodeAccessAccept, twoMA, "more than one"},
		{"short Message-Authenticator", radius.CodeAccessAccept, shortMA, "wrong length"},
		{"not an answer", radius.CodeAccountingResponse, signed, "code 5"},
		{"reject without Message-Authenticator", radius.CodeAccessReject, noMA, "no Message-Authenticator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, testSecret, func(c call) [][]byte {
				return [][]byte{reply(t, c.Req, tc.code, testSecret, tc.s)}
			})
			start := time.Now()
			resp, err := radclient.Exchange(t.Context(), request(f.Addr()))
			if !errors.Is(err, radclient.ErrInvalidResponse) || !errors.Is(err, radclient.ErrTimeout) {
				t.Fatalf("got %+v, %v; want ErrInvalidResponse and ErrTimeout", resp, err)
			}
			if resp.Code != 0 {
				t.Errorf("response %+v with an error", resp)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "2 replies ignored") {
				t.Errorf("error %q does not say %q and count 2 replies", err, tc.want)
			}
			noLeak(t, err)
			if d := time.Since(start); d < 200*time.Millisecond {
				t.Errorf("gave up after %s, before both tries of 100ms", d)
			}
			if n := len(f.calls()); n != 2 {
				t.Errorf("server got %d requests, want 2 (one retry)", n)
			}
		})
	}
}

// TestIgnoresForgedReplies: replies from another port, for another
// identifier or unsigned are ignored and the valid answer that follows
// them counts.
func TestIgnoresForgedReplies(t *testing.T) {
	other, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	f := newFake(t, testSecret, func(c call) [][]byte {
		// A signed Accept from another port of the server's host.
		if _, err := other.WriteToUDP(reply(t, c.Req, radius.CodeAccessAccept, testSecret, signed), c.From); err != nil {
			t.Error(err)
		}
		otherID := *c.Req
		otherID.Identifier++
		return [][]byte{
			reply(t, &otherID, radius.CodeAccessAccept, testSecret, signed),
			reply(t, c.Req, radius.CodeAccessAccept, testSecret, noMA),
			[]byte("garbage"),
			reply(t, c.Req, radius.CodeAccessReject, testSecret, signed, withReply("denied")),
		}
	})
	req := request(f.Addr())
	req.Timeout, req.Retries = 5*time.Second, -1
	resp, err := radclient.Exchange(t.Context(), req)
	if err != nil || resp.Code != radclient.Reject || resp.ReplyMessage != "denied" {
		t.Fatalf("got %+v, %v; want the signed Reject", resp, err)
	}
}

func TestRetransmitsSamePacket(t *testing.T) {
	f := newFake(t, testSecret, func(c call) [][]byte {
		if c.N < 3 {
			return nil // lost
		}
		return [][]byte{reply(t, c.Req, radius.CodeAccessAccept, testSecret, signed)}
	})
	req := request(f.Addr())
	req.Retries = 3
	resp, err := radclient.Exchange(t.Context(), req)
	if err != nil || resp.Code != radclient.Accept {
		t.Fatalf("got %v, %v", resp.Code, err)
	}
	calls := f.calls()
	if len(calls) != 3 {
		t.Fatalf("server got %d requests, want 3", len(calls))
	}
	for _, c := range calls[1:] {
		if !bytes.Equal(c.Raw, calls[0].Raw) {
			t.Errorf("retry %d differs from the first send (identifier %d vs %d)", c.N, c.Req.Identifier, calls[0].Req.Identifier)
		}
		if c.From.Port != calls[0].From.Port {
			t.Errorf("retry %d from port %d, first from %d", c.N, c.From.Port, calls[0].From.Port)
		}
	}
}

// TestLateReplyToFirstTry: the answer to the first send, arriving during
// the second try, is the answer to the request.
func TestLateReplyToFirstTry(t *testing.T) {
	f := newFake(t, testSecret, func(c call) [][]byte {
		if c.N == 1 {
			time.Sleep(150 * time.Millisecond) // past the first try's 100ms
			return [][]byte{reply(t, c.Req, radius.CodeAccessAccept, testSecret, signed)}
		}
		return nil
	})
	resp, err := radclient.Exchange(t.Context(), request(f.Addr()))
	if err != nil || resp.Code != radclient.Accept {
		t.Fatalf("got %v, %v", resp.Code, err)
	}
}

func TestSilentServerTimesOut(t *testing.T) {
	f := newFake(t, testSecret, func(call) [][]byte { return nil })
	req := request(f.Addr())
	req.Timeout, req.Retries = 50*time.Millisecond, 2
	start := time.Now()
	_, err := radclient.Exchange(t.Context(), req)
	d := time.Since(start)
	if !errors.Is(err, radclient.ErrTimeout) || errors.Is(err, radclient.ErrInvalidResponse) {
		t.Fatalf("got %v; want ErrTimeout alone", err)
	}
	if d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("took %s, want about 3 tries of 50ms", d)
	}
	if n := len(f.calls()); n != 3 {
		t.Errorf("server got %d requests, want 3", n)
	}
	noLeak(t, err)
}

func TestClosedPortTimesOut(t *testing.T) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := c.LocalAddr().String()
	_ = c.Close()
	req := request(addr)
	req.Timeout, req.Retries = 50*time.Millisecond, 2
	start := time.Now()
	_, err = radclient.Exchange(t.Context(), req)
	if !errors.Is(err, radclient.ErrTimeout) {
		t.Fatalf("got %v; want ErrTimeout", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("gave up after %s, before 3 tries of 50ms", d)
	}
	t.Log(err)
}

func TestContextEndsWait(t *testing.T) {
	f := newFake(t, testSecret, func(call) [][]byte { return nil })
	req := request(f.Addr())
	req.Timeout, req.Retries = 10*time.Second, 3

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		_, err := radclient.Exchange(ctx, req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("returned %s after the cancel", d)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := radclient.Exchange(ctx, req)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("returned %s after a 50ms deadline", d)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := radclient.Exchange(ctx, req); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})
}

func TestChallenge(t *testing.T) {
	f := newFake(t, testSecret, func(c call) [][]byte {
		pw, _ := rfc2865.UserPassword_LookupString(c.Req)
		state := rfc2865.State_GetString(c.Req)
		switch {
		case state == "" && pw == "pin":
			return [][]byte{reply(t, c.Req, radius.CodeAccessChallenge, testSecret, signed,
				withState("st-\x00\xff-1"), withReply("Enter your OTP"))}
		case state == "st-\x00\xff-1" && pw == "123456":
			return [][]byte{reply(t, c.Req, radius.CodeAccessAccept, testSecret, signed)}
		}
		return [][]byte{reply(t, c.Req, radius.CodeAccessReject, testSecret, signed)}
	})
	req := request(f.Addr())
	req.Password = "pin"
	resp, err := radclient.Exchange(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != radclient.Challenge || resp.ReplyMessage != "Enter your OTP" || string(resp.State) != "st-\x00\xff-1" {
		t.Fatalf("first leg: got %+v, want the Challenge", resp)
	}
	req.Password, req.State = "123456", resp.State
	resp, err = radclient.Exchange(t.Context(), req)
	if err != nil || resp.Code != radclient.Accept {
		t.Fatalf("second leg: got %+v, %v; want Accept", resp, err)
	}
	if got := f.calls()[1].Req; rfc2865.State_GetString(got) != "st-\x00\xff-1" {
		t.Errorf("second leg sent State %q", rfc2865.State_GetString(got))
	}
}

func TestNASIdentifier(t *testing.T) {
	f := newFake(t, testSecret, func(c call) [][]byte {
		return [][]byte{reply(t, c.Req, radius.CodeAccessAccept, testSecret, signed)}
	})
	req := request(f.Addr())
	req.NASIdentifier = "node-7"
	if _, err := radclient.Exchange(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := rfc2865.NASIdentifier_GetString(f.calls()[0].Req); got != "node-7" {
		t.Errorf("NAS-Identifier %q", got)
	}
}

func TestInvalidRequest(t *testing.T) {
	ok := request("127.0.0.1:1812")
	for _, tc := range []struct {
		name   string
		change func(*radclient.Request)
	}{
		{"no address", func(r *radclient.Request) { r.Addr = "" }},
		{"no secret", func(r *radclient.Request) { r.Secret = nil }},
		{"no user", func(r *radclient.Request) { r.Username = "" }},
		{"long user", func(r *radclient.Request) { r.Username = strings.Repeat("u", 254) }},
		{"long password", func(r *radclient.Request) { r.Password = testPassword + strings.Repeat("p", 129-len(testPassword)) }},
		{"long state", func(r *radclient.Request) { r.State = make([]byte, 254) }},
		{"long NAS-Identifier", func(r *radclient.Request) { r.NASIdentifier = strings.Repeat("n", 254) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := ok
			tc.change(&req)
			_, err := radclient.Exchange(t.Context(), req)
			if !errors.Is(err, radclient.ErrInvalidRequest) {
				t.Fatalf("got %v, want ErrInvalidRequest", err)
			}
			noLeak(t, err)
		})
	}
	t.Run("limits", func(t *testing.T) {
		req := ok
		req.Username, req.Password, req.State = strings.Repeat("u", 253), strings.Repeat("p", 128), make([]byte, 253)
		if _, err := radclient.EncodeRequest(req); err != nil {
			t.Fatal(err)
		}
	})
}

func TestRequestStringRedacts(t *testing.T) {
	req := request("127.0.0.1:1812")
	for _, s := range []string{req.String(), fmt.Sprint(req), fmt.Sprintf("%v %+v %#v", req, req, req)} {
		if strings.Contains(s, string(testSecret)) || strings.Contains(s, testPassword) {
			t.Errorf("%s leaks", s)
		}
	}
	if !strings.Contains(req.String(), "alice") {
		t.Errorf("%s lacks the user", req)
	}
}

func TestCodeString(t *testing.T) {
	for c, want := range map[radclient.Code]string{
		radclient.Accept: "Access-Accept", radclient.Reject: "Access-Reject",
		radclient.Challenge: "Access-Challenge", 0: "Code(0)",
	} {
		if got := c.String(); got != want {
			t.Errorf("%d: %q, want %q", int(c), got, want)
		}
	}
}

func BenchmarkExchange(b *testing.B) {
	f := newFake(b, testSecret, func(c call) [][]byte {
		return [][]byte{reply(b, c.Req, radius.CodeAccessAccept, testSecret, signed)}
	})
	req := request(f.Addr())
	req.Timeout = 5 * time.Second
	b.ReportAllocs()
	for b.Loop() {
		resp, err := radclient.Exchange(b.Context(), req)
		if err != nil || resp.Code != radclient.Accept {
			b.Fatalf("got %v, %v", resp.Code, err)
		}
	}
}
