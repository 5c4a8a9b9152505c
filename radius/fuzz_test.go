package radius_test

import (
	"net/netip"
	"testing"

	rad "layeh.com/radius"
	"layeh.com/radius/rfc2865"

	"github.com/authsrv/authsrv/radius"
	"github.com/authsrv/authsrv/validate"
)

// FuzzHandle feeds packets to the handler of a strict and a legacy
// client: it never panics, and whatever it answers is an authentic answer
// to that packet with a Message-Authenticator first.
func FuzzHandle(f *testing.F) {
	f.Add(build(f, pkt{user: "alice", pass: "1234287082", proxyStates: []string{"a"}}, secret), false)
	f.Add(build(f, pkt{user: "alice", pass: "pw", noMA: true}, secret), true)
	f.Add(build(f, pkt{user: "alice", pass: "pw", state: []byte("01234567890123456789")}, secret), false)
	f.Add(build(f, pkt{user: "a", extra: rad.Attributes{{Type: rfc2865.CHAPPassword_Type, Attribute: make([]byte, 17)}}}, secret), true)
	f.Add([]byte{1, 0, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, true)
	f.Add([]byte{1, 0, 0, 23, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 3, 'a'}, true)
	srv, err := radius.New(radius.Config{Checker: &fakeChecker{res: validate.Response{Value: true, Message: "ok", Serial: "S"}},
		Clients: []radius.Client{{Network: host("127.0.0.1"), Secret: secret}, {Network: host("127.0.0.2"), Secret: secret, Legacy: true}},
		Mapping: []radius.Mapping{{Key: "serial", Attribute: "Class"}}})
	if err != nil {
		f.Fatal(err)
	}
	strict, legacy := netip.MustParseAddrPort("127.0.0.1:1000"), netip.MustParseAddrPort("127.0.0.2:1000")
	f.Fuzz(func(t *testing.T, b []byte, isLegacy bool) {
		src := strict
		if isLegacy {
			src = legacy
		}
		out := srv.Handle(t.Context(), src, b)
		if out == nil {
			return
		}
		if len(b) < 20 || b[0] != byte(rad.CodeAccessRequest) {
			t.Fatalf("answered a packet that is no Access-Request: %x", b)
		}
		verify(t, out, b, secret)
	})
}

// FuzzParseClients: the clients parser never panics, and what it accepts
// has an address and a secret.
func FuzzParseClients(f *testing.F) {
	f.Add([]byte("127.0.0.1 s3cret realm=corp legacy\n10.0.0.0/8 x\n# comment\n"))
	f.Add([]byte("::1 secret_file=nas.secret\n"))
	f.Add([]byte("300.0.0.1 x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := radius.ParseClients(data, t.TempDir())
		if err != nil {
			return
		}
		for _, c := range cs {
			if !c.Network.IsValid() || len(c.Secret) == 0 {
				t.Fatalf("accepted %v", c)
			}
		}
	})
}

// FuzzParseMapping: the mapping parser never panics and accepts only
// valid mappings.
func FuzzParseMapping(f *testing.F) {
	f.Add([]byte("serial = Class\nuser.email = Reply-Message\n"))
	f.Add([]byte("= Class\nx ="))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := radius.ParseMapping(data)
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.Validate() != nil {
				t.Fatalf("accepted %+v", m)
			}
		}
	})
}
