package radclient_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"testing"

	"layeh.com/radius"

	"github.com/authsrv/authsrv/internal/radclient"
)

// fuzzRequest is a fixed Access-Request header (identifier 42) that the
// fuzzed bytes answer; parseResponse reads only its identifier and Request
// Authenticator.
func fuzzRequest() (*radius.Packet, []byte) {
	p := &radius.Packet{Code: radius.CodeAccessRequest, Identifier: 42, Secret: testSecret}
	for i := range p.Authenticator {
		p.Authenticator[i] = byte(i + 1)
	}
	wire, _ := p.MarshalBinary()
	return p, wire
}

// FuzzParseResponse: no bytes make the parser panic, and it accepts only
// packets that layeh's Response Authenticator check and an independent
// Message-Authenticator check call signed; random bytes never are.
func FuzzParseResponse(f *testing.F) {
	req, wire := fuzzRequest()
	for _, s := range []signing{signed, noMA, wrongMA, wrongAuth, twoMA, shortMA, signedMALast} {
		f.Add(reply(f, req, radius.CodeAccessAccept, testSecret, s, withReply("hi")))
	}
	f.Add(reply(f, req, radius.CodeAccessChallenge, testSecret, signed, withState("st"), withReply("otp?")))
	f.Add(reply(f, req, radius.CodeAccessReject, testSecret, signed))
	f.Add([]byte{})
	f.Add(make([]byte, 20))
	f.Add([]byte{2, 42, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 80, 18})
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := radclient.ParseResponse(b, wire, testSecret)
		if err != nil {
			if !errors.Is(err, radclient.ErrInvalidResponse) {
				t.Fatalf("error %v is not ErrInvalidResponse", err)
			}
			if resp.Code != 0 || resp.State != nil || resp.ReplyMessage != "" {
				t.Fatalf("response %+v with an error", resp)
			}
			return
		}
		if !signedAnswer(b, wire, testSecret) {
			t.Fatalf("accepted an unsigned packet as %v: %x", resp.Code, b)
		}
		switch resp.Code {
		case radclient.Accept, radclient.Reject, radclient.Challenge:
		default:
			t.Fatalf("code %v", resp.Code)
		}
	})
}

// signedAnswer is the test's own judgement of a reply: layeh's Response
// Authenticator check, then one 16-byte Message-Authenticator with the
// right HMAC.
func signedAnswer(b, request, secret []byte) bool {
	if len(b) < 20 {
		return false
	}
	length := int(binary.BigEndian.Uint16(b[2:4]))
	if length < 20 || length > len(b) || b[1] != request[1] {
		return false
	}
	b = b[:length]
	p, err := radius.Parse(b, secret)
	if err != nil || !radius.IsAuthenticResponse(b, request, secret) {
		return false
	}
	var mas [][]byte
	for _, a := range p.Attributes {
		if a.Type == 80 {
			mas = append(mas, a.Attribute)
		}
	}
	offs := maOffsets(b)
	if len(mas) != 1 || len(mas[0]) != 16 || len(offs) != 1 {
		return false
	}
	zeroed := bytes.Clone(b)
	copy(zeroed[4:20], request[4:20])
	clear(zeroed[offs[0] : offs[0]+16])
	mac := hmac.New(md5.New, secret)
	mac.Write(zeroed)
	return hmac.Equal(mac.Sum(nil), mas[0])
}
