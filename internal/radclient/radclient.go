package radclient

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"layeh.com/radius"
	"layeh.com/radius/rfc2865"
	"layeh.com/radius/rfc2869"
)

// Code is the kind of answer a RADIUS server gave to an Access-Request.
type Code int

// The answers to an Access-Request (RFC 2865 section 3), with their wire
// values.
const (
	Accept    Code = Code(radius.CodeAccessAccept)
	Reject    Code = Code(radius.CodeAccessReject)
	Challenge Code = Code(radius.CodeAccessChallenge)
)

// String returns the RFC name of the code, such as "Access-Accept".
func (c Code) String() string {
	switch c {
	case Accept:
		return "Access-Accept"
	case Reject:
		return "Access-Reject"
	case Challenge:
		return "Access-Challenge"
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// Defaults for the zero values of Request's fields; the timeout and retries
// are privacyIDEA's defaults for a RADIUS server definition.
const (
	DefaultTimeout       = 5 * time.Second
	DefaultRetries       = 3
	DefaultNASIdentifier = "authsrv"
)

// Length limits of the request's attributes (RFC 2865 sections 5.1, 5.2).
const (
	MaxUsernameLen = 253
	MaxPasswordLen = 128
	MaxStateLen    = 253
)

var (
	// ErrTimeout means that no valid answer arrived in any of the tries.
	// An error that also wraps ErrInvalidResponse tells that answers did
	// arrive but none passed verification.
	ErrTimeout = errors.New("no valid answer")
	// ErrInvalidResponse marks a reply that fails verification: malformed,
	// not an answer to our request, a wrong Response Authenticator (often a
	// wrong shared secret), or a missing or wrong Message-Authenticator.
	ErrInvalidResponse = errors.New("invalid response")
	// ErrInvalidRequest means the Request cannot be sent (missing address
	// or secret, an attribute too long).
	ErrInvalidRequest = errors.New("invalid RADIUS request")
)

// Request is one Access-Request with PAP (User-Password) and where to send
// it. It holds the shared secret and the password; String redacts them.
type Request struct {
	// Addr is the server's host:port.
	Addr string
	// Secret is the shared secret of the client and the server.
	Secret []byte
	// Username is the User-Name (at most 253 bytes).
	Username string
	// Password is sent as User-Password, hidden as RFC 2865 section 5.2
	// prescribes (at most 128 bytes).
	Password string
	// State is the State attribute of an Access-Challenge, sent back in the
	// second leg of a challenge; nil sends none.
	State []byte
	// NASIdentifier is sent as NAS-Identifier; empty means "authsrv".
	NASIdentifier string
	// Timeout is how long each try waits for an answer; zero or negative
	// means 5s.
	Timeout time.Duration
	// Retries is how many times the request is resent after the first try
	// went unanswered: zero means 3 (privacyIDEA's default), a negative
	// value means no resending.
	Retries int
	// Control, when set, judges the server's resolved address before the
	// socket connects (a net.Dialer ControlContext hook: the dial policy);
	// an error refuses the exchange and is in the returned error's chain.
	Control func(ctx context.Context, network, address string, c syscall.RawConn) error
}

// String describes the request without its secret and password, so that
// logging it cannot leak them.
func (r Request) String() string {
	return fmt.Sprintf("radclient.Request{Addr: %q, Username: %q, Secret: <redacted>, Password: <redacted>, State: %d bytes}",
		r.Addr, r.Username, len(r.State))
}

// GoString is String, so that %#v redacts too.
func (r Request) GoString() string { return r.String() }

func (r Request) timeout() time.Duration {
	if r.Timeout <= 0 {
		return DefaultTimeout
	}
	return r.Timeout
}

// tries is the number of sends: the first and the retries.
func (r Request) tries() int {
	switch {
	case r.Retries == 0:
		return 1 + DefaultRetries
	case r.Retries < 0:
		return 1
	}
	return 1 + r.Retries
}

// Response is a verified answer of the server.
type Response struct {
	// Code is Accept, Reject or Challenge.
	Code Code
	// ReplyMessage is the concatenation of the Reply-Message attributes in
	// packet order (a long message is split over several).
	ReplyMessage string
	// State is the State attribute (sent with a Challenge); nil without.
	State []byte
}

// Exchange sends one Access-Request over UDP and waits for its answer.
//
// The request carries a Message-Authenticator as its first attribute. A
// reply is accepted only when it answers this request (identifier, code),
// its Response Authenticator is right and it carries exactly one valid
// Message-Authenticator; any other packet is counted and ignored, and the
// wait goes on. A try that brings no valid answer within Timeout resends the
// same packet (same identifier and authenticator, so the server can detect
// the duplicate), Retries times. When all tries are spent the error wraps
// ErrTimeout, and also ErrInvalidResponse if invalid replies were ignored.
// Cancelling ctx (or its deadline) ends the wait at once with ctx's error.
// Errors never contain the secret or the password.
func Exchange(ctx context.Context, req Request) (Response, error) {
	wire, err := req.encode()
	if err != nil {
		return Response{}, err
	}
	if err := ctx.Err(); err != nil {
		return Response{}, fmt.Errorf("radius %s: %w", req.Addr, err)
	}
	d := net.Dialer{ControlContext: req.Control}
	conn, err := d.DialContext(ctx, "udp", req.Addr)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		}
		return Response{}, fmt.Errorf("radius %s: %w", req.Addr, err)
	}
	defer func() { _ = conn.Close() }()
	// Closing the socket is the one way to end a blocked Read at once; the
	// loop then sees ctx's error.
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()

	timeout, tries := req.timeout(), req.tries()
	var (
		buf         = make([]byte, radius.MaxPacketLength+1)
		invalid     int
		lastInvalid error
		unreachable bool
	)
	ctxErr := func() error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("radius %s: %w", req.Addr, err)
		}
		return nil
	}
	for range tries {
		if err := send(conn, wire); err != nil {
			if cerr := ctxErr(); cerr != nil {
				return Response{}, cerr
			}
			if !isUnreachable(err) {
				return Response{}, fmt.Errorf("radius %s: send: %w", req.Addr, err)
			}
			// The server's port is closed: this try is lost like a
			// dropped packet; wait it out, the server may come back.
			unreachable = true
		}
		if err := conn.SetReadDeadline(time.Now().Add(timeout)); err != nil {
			if cerr := ctxErr(); cerr != nil {
				return Response{}, cerr
			}
			return Response{}, fmt.Errorf("radius %s: %w", req.Addr, err)
		}
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if cerr := ctxErr(); cerr != nil {
					return Response{}, cerr
				}
				if errors.Is(err, os.ErrDeadlineExceeded) {
					break
				}
				if isUnreachable(err) {
					// An ICMP error for an earlier send; keep waiting.
					unreachable = true
					continue
				}
				return Response{}, fmt.Errorf("radius %s: receive: %w", req.Addr, err)
			}
			resp, err := parseResponse(buf[:n], wire, req.Secret)
			if err != nil {
				invalid++
				lastInvalid = err
				continue
			}
			return resp, nil
		}
	}
	switch {
	case invalid > 0:
		return Response{}, fmt.Errorf("radius %s: %w after %d tries of %s; %d replies ignored, the last: %w",
			req.Addr, ErrTimeout, tries, timeout, invalid, lastInvalid)
	case unreachable:
		return Response{}, fmt.Errorf("radius %s: %w after %d tries of %s (port unreachable)", req.Addr, ErrTimeout, tries, timeout)
	}
	return Response{}, fmt.Errorf("radius %s: %w after %d tries of %s", req.Addr, ErrTimeout, tries, timeout)
}

// send writes the packet; a pending ICMP error of the connected socket may
// fail the first write without sending, so an unreachable error is retried
// once.
func send(conn net.Conn, wire []byte) error {
	_, err := conn.Write(wire)
	if err != nil && isUnreachable(err) {
		_, err = conn.Write(wire)
	}
	return err
}

// isUnreachable reports an ICMP error that a connected UDP socket reports.
func isUnreachable(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH)
}

// encode builds the wire form of the Access-Request with a fresh random
// identifier and Request Authenticator, and signs it with the
// Message-Authenticator.
func (r Request) encode() ([]byte, error) {
	switch {
	case r.Addr == "":
		return nil, fmt.Errorf("%w: no server address", ErrInvalidRequest)
	case len(r.Secret) == 0:
		return nil, fmt.Errorf("%w: empty shared secret", ErrInvalidRequest)
	case r.Username == "":
		return nil, fmt.Errorf("%w: empty user name", ErrInvalidRequest)
	case len(r.Username) > MaxUsernameLen:
		return nil, fmt.Errorf("%w: user name longer than %d bytes", ErrInvalidRequest, MaxUsernameLen)
	case len(r.Password) > MaxPasswordLen:
		return nil, fmt.Errorf("%w: password longer than %d bytes", ErrInvalidRequest, MaxPasswordLen)
	case len(r.State) > MaxStateLen:
		return nil, fmt.Errorf("%w: state longer than %d bytes", ErrInvalidRequest, MaxStateLen)
	case len(r.NASIdentifier) > MaxUsernameLen:
		return nil, fmt.Errorf("%w: NAS-Identifier longer than %d bytes", ErrInvalidRequest, MaxUsernameLen)
	}
	var rnd [1 + 16]byte
	_, _ = rand.Read(rnd[:]) // never fails (crypto/rand since Go 1.24)
	p := &radius.Packet{Code: radius.CodeAccessRequest, Identifier: rnd[0], Secret: r.Secret}
	copy(p.Authenticator[:], rnd[1:])

	// Message-Authenticator first, as the BlastRADIUS advisories
	// recommend; its value is computed over the zeroed attribute below.
	p.Add(rfc2869.MessageAuthenticator_Type, make(radius.Attribute, md5.Size))
	p.Add(rfc2865.UserName_Type, radius.Attribute(r.Username))
	pw, err := radius.NewUserPassword([]byte(r.Password), r.Secret, p.Authenticator[:])
	if err != nil {
		// layeh's messages name no secret or password; keep it that way
		// by not passing its error on.
		return nil, fmt.Errorf("%w: cannot hide the password", ErrInvalidRequest)
	}
	p.Add(rfc2865.UserPassword_Type, pw)
	nas := r.NASIdentifier
	if nas == "" {
		nas = DefaultNASIdentifier
	}
	p.Add(rfc2865.NASIdentifier_Type, radius.Attribute(nas))
	if len(r.State) > 0 {
		p.Add(rfc2865.State_Type, radius.Attribute(bytes.Clone(r.State)))
	}
	wire, err := p.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	// The first attribute starts at 20: type, length, then the value.
	mac := hmac.New(md5.New, r.Secret)
	_, _ = mac.Write(wire)
	copy(wire[22:22+md5.Size], mac.Sum(nil))
	return wire, nil
}

// parseResponse verifies that b is a signed answer to request (the wire
// form Exchange sent) and decodes it.
func parseResponse(b, request, secret []byte) (Response, error) {
	bad := func(reason string) (Response, error) {
		return Response{}, fmt.Errorf("%w: %s", ErrInvalidResponse, reason)
	}
	if len(b) < 20 || len(request) < 20 {
		return bad("shorter than 20 bytes")
	}
	length := int(binary.BigEndian.Uint16(b[2:4]))
	if length < 20 || length > radius.MaxPacketLength || length > len(b) {
		return bad("wrong length")
	}
	b = b[:length] // RFC 2865 section 3: octets beyond Length are padding
	code := Code(b[0])
	switch code {
	case Accept, Reject, Challenge:
	default:
		return bad("code " + strconv.Itoa(int(b[0])) + " does not answer an Access-Request")
	}
	if b[1] != request[1] {
		return bad("identifier " + strconv.Itoa(int(b[1])) + " is not the request's")
	}
	attrs, err := radius.ParseAttributes(b[20:])
	if err != nil {
		return bad("malformed attributes")
	}

	// Response Authenticator = MD5(Code+ID+Length+RequestAuth+Attributes+Secret).
	h := md5.New()
	h.Write(b[:4])
	h.Write(request[4:20])
	h.Write(b[20:])
	h.Write(secret)
	if subtle.ConstantTimeCompare(h.Sum(nil), b[4:20]) != 1 {
		return bad("wrong Response Authenticator (wrong shared secret?)")
	}

	// Exactly one Message-Authenticator, 16 bytes, HMAC-MD5 over the
	// packet with the Request Authenticator in the header and the
	// attribute's value zeroed (RFC 3579 section 3.2).
	off := -1
	for i := 20; i < len(b); i += int(b[i+1]) { // ParseAttributes checked the layout
		if radius.Type(b[i]) != rfc2869.MessageAuthenticator_Type {
			continue
		}
		if off >= 0 {
			return bad("more than one Message-Authenticator")
		}
		if int(b[i+1]) != 2+md5.Size {
			return bad("Message-Authenticator of wrong length")
		}
		off = i + 2
	}
	if off < 0 {
		return bad("no Message-Authenticator")
	}
	signed := bytes.Clone(b)
	copy(signed[4:20], request[4:20])
	clear(signed[off : off+md5.Size])
	mac := hmac.New(md5.New, secret)
	mac.Write(signed)
	if !hmac.Equal(mac.Sum(nil), b[off:off+md5.Size]) {
		return bad("wrong Message-Authenticator")
	}

	resp := Response{Code: code}
	for _, a := range attrs {
		switch a.Type {
		case rfc2865.ReplyMessage_Type:
			resp.ReplyMessage += string(a.Attribute)
		case rfc2865.State_Type:
			if resp.State == nil {
				resp.State = append([]byte{}, a.Attribute...)
			}
		}
	}
	return resp, nil
}
