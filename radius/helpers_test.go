package radius_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	rad "layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"

	"github.com/authsrv/authsrv/radius"
)

// pkt describes one Access-Request of a test.
type pkt struct {
	user, pass  string
	state       []byte
	proxyStates []string
	noMA        bool // send no Message-Authenticator
	badMA       bool // send a wrong one
	extra       rad.Attributes
}

// build encodes p with secret (a random identifier and authenticator).
func build(t testing.TB, p pkt, secret []byte) []byte {
	t.Helper()
	q := rad.New(rad.CodeAccessRequest, secret)
	if !p.noMA {
		_ = rfc2869.MessageAuthenticator_Add(q, make([]byte, 16))
	}
	_ = rfc2865.UserName_SetString(q, p.user)
	if p.pass != "" {
		if err := rfc2865.UserPassword_SetString(q, p.pass); err != nil {
			t.Fatal(err)
		}
	}
	if p.state != nil {
		_ = rfc2865.State_Set(q, p.state)
	}
	for _, ps := range p.proxyStates {
		_ = rfc2865.ProxyState_AddString(q, ps)
	}
	q.Attributes = append(q.Attributes, p.extra...)
	b, err := q.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !p.noMA {
		mac := hmac.New(md5.New, secret)
		mac.Write(b)
		sum := mac.Sum(nil)
		if p.badMA {
			sum[0] ^= 1
		}
		copy(b[22:38], sum) // the first attribute's value
	}
	return b
}

// answer is a verified answer.
type answer struct {
	code    rad.Code
	message string
	state   []byte
	p       *rad.Packet
}

// exchange sends b from a socket bound to the loopback address from (""
// for 127.0.0.1) to addr and waits up to wait for the answer; ok false:
// none came.
func exchange(t testing.TB, from, addr string, b, secret []byte, wait time.Duration) (answer, bool) {
	t.Helper()
	if from == "" {
		from = "127.0.0.1"
	}
	conn, err := net.ListenPacket("udp", from+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	return exchangeOn(t, conn, addr, b, secret, wait)
}

func exchangeOn(t testing.TB, conn net.PacketConn, addr string, b, secret []byte, wait time.Duration) (answer, bool) {
	t.Helper()
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.WriteTo(b, ua); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 4096)
	n, _, err := conn.ReadFrom(buf)
	if err != nil {
		return answer{}, false
	}
	return verify(t, buf[:n], b, secret), true
}

// verify checks an answer's Response Authenticator and its
// Message-Authenticator, which must be the first attribute.
func verify(t testing.TB, resp, req, secret []byte) answer {
	t.Helper()
	if !rad.IsAuthenticResponse(resp, req, secret) {
		t.Fatalf("answer with a wrong Response Authenticator")
	}
	if resp[1] != req[1] {
		t.Fatalf("answer to identifier %d, want %d", resp[1], req[1])
	}
	p, err := rad.Parse(resp, secret)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Attributes) == 0 || p.Attributes[0].Type != rfc2869.MessageAuthenticator_Type || len(p.Attributes[0].Attribute) != 16 {
		t.Fatalf("the first attribute is not a Message-Authenticator: %v", p.Attributes)
	}
	z := append([]byte(nil), resp...)
	copy(z[4:20], req[4:20])
	clear(z[22:38])
	mac := hmac.New(md5.New, secret)
	mac.Write(z)
	if !hmac.Equal(mac.Sum(nil), p.Attributes[0].Attribute) {
		t.Fatal("wrong Message-Authenticator in the answer")
	}
	var msg bytes.Buffer
	for _, a := range p.Attributes {
		if a.Type == rfc2865.ReplyMessage_Type {
			msg.Write(a.Attribute)
		}
	}
	return answer{code: p.Code, message: msg.String(), state: rfc2865.State_Get(p), p: p}
}

// serve runs srv on a fresh loopback port until the test ends.
func serve(t testing.TB, srv *radius.Server) string {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		_ = conn.Close()
	})
	return conn.LocalAddr().String()
}

func host(s string) netip.Prefix {
	a := netip.MustParseAddr(s)
	return netip.PrefixFrom(a, a.BitLen())
}

func netListen() (net.PacketConn, error) { return net.ListenPacket("udp", "127.0.0.1:0") }

func udpAddr(t testing.TB, addr string) net.Addr {
	t.Helper()
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return ua
}

// answerConn is a socket and the request it sent.
type answerConn struct {
	conn net.PacketConn
	b    []byte
}

// readAnswer waits for the answer to req on conn.
func readAnswer(t testing.TB, conn net.PacketConn, req []byte) (answer, bool) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 4096)
	n, _, err := conn.ReadFrom(buf)
	if err != nil {
		return answer{}, false
	}
	return verify(t, buf[:n], req, secret), true
}

// resign recomputes the Message-Authenticator (the first attribute) of a
// changed request.
func resign(b, secret []byte) {
	clear(b[22:38])
	mac := hmac.New(md5.New, secret)
	mac.Write(b)
	copy(b[22:38], mac.Sum(nil))
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
