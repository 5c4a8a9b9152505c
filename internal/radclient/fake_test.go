package radclient_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"errors"
	"net"
	"sync"
	"testing"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"
)

// signing says how reply signs an answer.
type signing int

const (
	signed       signing = iota // right Response Authenticator and Message-Authenticator
	noMA                        // no Message-Authenticator, right Response Authenticator
	wrongMA                     // Message-Authenticator with another key
	wrongAuth                   // right Message-Authenticator, wrong Response Authenticator
	twoMA                       // two valid-looking Message-Authenticators
	shortMA                     // a Message-Authenticator of 8 bytes
	signedMALast                // Message-Authenticator as the last attribute
)

// reply returns the wire form of an answer with code to the request req,
// with the attributes set by attrs, signed with secret as s says.
func reply(tb testing.TB, req *radius.Packet, code radius.Code, secret []byte, s signing, attrs ...func(*radius.Packet)) []byte {
	tb.Helper()
	p := req.Response(code) // identifier and Request Authenticator of req
	p.Secret = secret
	switch s {
	case signed, wrongMA, wrongAuth:
		p.Add(rfc2869.MessageAuthenticator_Type, make(radius.Attribute, 16))
	case twoMA:
		p.Add(rfc2869.MessageAuthenticator_Type, make(radius.Attribute, 16))
		p.Add(rfc2869.MessageAuthenticator_Type, make(radius.Attribute, 16))
	case shortMA:
		p.Add(rfc2869.MessageAuthenticator_Type, make(radius.Attribute, 8))
	}
	for _, f := range attrs {
		f(p)
	}
	if s == signedMALast {
		p.Add(rfc2869.MessageAuthenticator_Type, make(radius.Attribute, 16))
	}
	b, err := p.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	key := secret
	if s == wrongMA {
		key = []byte("not the secret")
	}
	// Sign every Message-Authenticator; the header holds the Request
	// Authenticator while the HMAC is computed.
	offs := maOffsets(b)
	for _, off := range offs {
		clear(b[off : off-2+int(b[off-1])])
	}
	mac := hmac.New(md5.New, key)
	mac.Write(b)
	sum := mac.Sum(nil)
	for _, off := range offs {
		copy(b[off:off-2+int(b[off-1])], sum)
	}
	h := md5.New()
	h.Write(b[:4])
	h.Write(req.Authenticator[:])
	h.Write(b[20:])
	h.Write(secret)
	copy(b[4:20], h.Sum(nil))
	if s == wrongAuth {
		b[4] ^= 1
	}
	return b
}

// maOffsets returns where the values of the Message-Authenticators of the
// wire packet b start.
func maOffsets(b []byte) []int {
	var offs []int
	for i := 20; i+1 < len(b) && b[i+1] >= 2; i += int(b[i+1]) {
		if radius.Type(b[i]) == rfc2869.MessageAuthenticator_Type {
			offs = append(offs, i+2)
		}
	}
	return offs
}

// checkRequestMA verifies the Message-Authenticator of a wire request the
// way a server does (RFC 3579 section 3.2) and that it is the first
// attribute.
func checkRequestMA(raw, secret []byte) error {
	offs := maOffsets(raw)
	switch {
	case len(offs) == 0:
		return errors.New("no Message-Authenticator")
	case len(offs) > 1:
		return errors.New("several Message-Authenticators")
	case offs[0] != 22 || raw[21] != 18:
		return errors.New("Message-Authenticator is not the first attribute of 18 bytes")
	}
	zeroed := bytes.Clone(raw)
	clear(zeroed[22:38])
	mac := hmac.New(md5.New, secret)
	mac.Write(zeroed)
	if !hmac.Equal(mac.Sum(nil), raw[22:38]) {
		return errors.New("wrong Message-Authenticator")
	}
	return nil
}

// call is one request the fake server received.
type call struct {
	N    int // 1 for the first request
	Raw  []byte
	Req  *radius.Packet
	From *net.UDPAddr
}

// fake is an in-process RADIUS server on 127.0.0.1: handle returns the
// datagrams to send back to the request's sender (none to stay silent).
type fake struct {
	conn   *net.UDPConn
	secret []byte
	handle func(call) [][]byte

	mu   sync.Mutex
	got  []call
	errs []error
	done chan struct{}
}

func newFake(tb testing.TB, secret []byte, handle func(call) [][]byte) *fake {
	tb.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	f := &fake{conn: conn, secret: secret, handle: handle, done: make(chan struct{})}
	go f.serve()
	tb.Cleanup(func() {
		_ = conn.Close()
		<-f.done
		for _, err := range f.errors() {
			tb.Errorf("fake server: %v", err)
		}
	})
	return f
}

func (f *fake) Addr() string { return f.conn.LocalAddr().String() }

func (f *fake) serve() {
	defer close(f.done)
	buf := make([]byte, 4096)
	for {
		n, from, err := f.conn.ReadFromUDP(buf)
		if err != nil {
			return // closed
		}
		raw := bytes.Clone(buf[:n])
		req, err := radius.Parse(raw, f.secret)
		if err != nil {
			f.fail(err)
			continue
		}
		f.mu.Lock()
		c := call{N: len(f.got) + 1, Raw: raw, Req: req, From: from}
		f.got = append(f.got, c)
		f.mu.Unlock()
		for _, out := range f.handle(c) {
			if _, err := f.conn.WriteToUDP(out, from); err != nil {
				f.fail(err)
			}
		}
	}
}

func (f *fake) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
}

func (f *fake) errors() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.errs
}

// calls returns the requests received so far.
func (f *fake) calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.got...)
}

// withReply and withState add a Reply-Message and a State to an answer.
func withReply(msg string) func(*radius.Packet) {
	return func(p *radius.Packet) { _ = rfc2865.ReplyMessage_AddString(p, msg) }
}

func withState(state string) func(*radius.Packet) {
	return func(p *radius.Packet) { _ = rfc2865.State_AddString(p, state) }
}
