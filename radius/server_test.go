package radius_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	rad "layeh.com/radius"
	"layeh.com/radius/rfc2865"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/radius"
	"github.com/authsrv/authsrv/validate"
)

// fakeChecker records the requests and answers with res/err, after
// waiting for gate when it is set.
type fakeChecker struct {
	mu   sync.Mutex
	reqs []validate.Request
	res  validate.Response
	err  error
	gate chan struct{}
}

func (f *fakeChecker) Check(_ context.Context, r validate.Request) (validate.Response, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.res, f.err
}

func (f *fakeChecker) calls() []validate.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

var secret = []byte("s3cret-of-the-nas")

func newFake(t *testing.T, f *fakeChecker, mod func(*radius.Config)) (*radius.Server, string) {
	t.Helper()
	cfg := radius.Config{Checker: f, Clients: []radius.Client{
		{Network: host("127.0.0.1"), Secret: secret, Realm: "corp"},
		{Network: host("127.0.0.2"), Secret: secret, Legacy: true},
	}}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := radius.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, serve(t, srv)
}

const wait = 2 * time.Second
const noAnswer = 300 * time.Millisecond

// TestDecodeAndAnswer: what the checker receives, and how its decisions
// become answers.
func TestDecodeAndAnswer(t *testing.T) {
	f := &fakeChecker{res: validate.Response{Value: true, Message: "matching 1 tokens", Serial: "HOTP1",
		UserAttributes: map[string]any{"email": "alice@example.org", "groups": []any{"vpn", "wifi"}}}}
	srv, addr := newFake(t, f, func(c *radius.Config) {
		c.Mapping = []radius.Mapping{{Key: "serial", Attribute: "Class"}, {Key: "user.groups", Attribute: "Filter-Id"}, {Key: "user.none", Attribute: "Callback-Id"}}
	})
	a, ok := exchange(t, "", addr, build(t, pkt{user: "alice", pass: "1234 287082", proxyStates: []string{"first", "second"}}, secret), secret, wait)
	if !ok || a.code != rad.CodeAccessAccept || a.message != "matching 1 tokens" {
		t.Fatalf("answer %+v %v", a, ok)
	}
	var ps, filters []string
	for _, at := range a.p.Attributes {
		switch at.Type {
		case rfc2865.ProxyState_Type:
			ps = append(ps, string(at.Attribute))
		case rfc2865.FilterID_Type:
			filters = append(filters, string(at.Attribute))
		}
	}
	if !slices.Equal(ps, []string{"first", "second"}) {
		t.Errorf("Proxy-State %q", ps)
	}
	if got := rfc2865.Class_GetString(a.p); got != "HOTP1" || !slices.Equal(filters, []string{"vpn", "wifi"}) {
		t.Errorf("mapped Class %q Filter-Id %q", got, filters)
	}
	reqs := f.calls()
	if len(reqs) != 1 {
		t.Fatalf("%d checks", len(reqs))
	}
	r := reqs[0]
	want := caller.Caller{Role: caller.APIKey, Client: netip.MustParseAddr("127.0.0.1"), UserAgent: radius.UserAgent, Action: radius.Action, RequestID: r.Caller.RequestID}
	if r.User != "alice" || r.Realm != "corp" || r.Pass != "1234 287082" || r.TransactionID != "" || r.Caller.RequestID == "" ||
		r.Caller.Role != want.Role || r.Caller.Client != want.Client || r.Caller.UserAgent != want.UserAgent || r.Caller.Action != want.Action {
		t.Errorf("request %v caller %+v", r, r.Caller)
	}

	// A user who names a realm keeps it; the legacy client has no realm.
	exchange(t, "", addr, build(t, pkt{user: "bob@other", pass: "x"}, secret), secret, wait)
	exchange(t, "127.0.0.2", addr, build(t, pkt{user: "carol", pass: "x", noMA: true}, secret), secret, wait)
	reqs = f.calls()
	if len(reqs) != 3 || reqs[1].User != "bob@other" || reqs[1].Realm != "" || reqs[2].User != "carol" || reqs[2].Realm != "" ||
		reqs[2].Caller.Client != netip.MustParseAddr("127.0.0.2") {
		t.Errorf("requests %v", reqs)
	}

	for _, tc := range []struct {
		name    string
		res     validate.Response
		err     error
		code    rad.Code
		message string
		state   string
	}{
		{"Reject", validate.Response{Message: "wrong otp value"}, nil, rad.CodeAccessReject, "wrong otp value", ""},
		{"NoDetail", validate.Response{Message: "wrong otp value", NoDetail: true}, nil, rad.CodeAccessReject, "", ""},
		{"Challenge", validate.Response{Message: "Enter the OTP from the Email", TransactionID: "01234567890123456789"}, nil, rad.CodeAccessChallenge, "Enter the OTP from the Email", "01234567890123456789"},
		{"APIError", validate.Response{}, apierr.New(apierr.User, "The user can not be found in any resolver in this realm!"), rad.CodeAccessReject, "ERR904: The user can not be found in any resolver in this realm!", ""},
		{"InternalError", validate.Response{}, errors.New("store: disk on fire"), rad.CodeAccessReject, "", ""},
		{"LongMessage", validate.Response{Message: strings.Repeat("m", 600)}, nil, rad.CodeAccessReject, strings.Repeat("m", 600), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.mu.Lock()
			f.res, f.err = tc.res, tc.err
			f.mu.Unlock()
			a, ok := exchange(t, "", addr, build(t, pkt{user: "alice", pass: "x", proxyStates: []string{"p"}}, secret), secret, wait)
			if !ok || a.code != tc.code || string(a.state) != tc.state {
				t.Fatalf("answer %v %q state %q (ok %v)", a.code, a.message, a.state, ok)
			}
			if tc.name == "InternalError" {
				if strings.Contains(a.message, "fire") || !strings.Contains(a.message, "ERR") {
					t.Errorf("internal error answered %q", a.message)
				}
			} else if a.message != tc.message {
				t.Errorf("Reply-Message %q, want %q", a.message, tc.message)
			}
			if tc.code != rad.CodeAccessAccept && rfc2865.Class_GetString(a.p) != "" && tc.code != rad.CodeAccessChallenge {
				t.Error("mapped attributes on a reject")
			}
		})
	}

	// The State of a challenge goes back as the transaction id.
	f.mu.Lock()
	f.res, f.err = validate.Response{Value: true, Message: "Found matching challenge"}, nil
	f.mu.Unlock()
	a, _ = exchange(t, "", addr, build(t, pkt{user: "alice", pass: "287082", state: []byte("01234567890123456789")}, secret), secret, wait)
	reqs = f.calls()
	if a.code != rad.CodeAccessAccept || reqs[len(reqs)-1].TransactionID != "01234567890123456789" {
		t.Errorf("second leg: %v, request %v", a.code, reqs[len(reqs)-1])
	}

	// Answers decided without a check: a State that is not ours, CHAP.
	n := len(f.calls())
	for _, p := range []pkt{
		{user: "alice", pass: "287082", state: []byte("not-ours")},
		{user: "alice", pass: "287082", state: []byte("0123456789012345678x")},
		{user: "alice", extra: rad.Attributes{{Type: rfc2865.CHAPPassword_Type, Attribute: make([]byte, 17)}}},
	} {
		a, ok := exchange(t, "", addr, build(t, p, secret), secret, wait)
		if !ok || a.code != rad.CodeAccessReject || a.message == "" {
			t.Errorf("%+v: %v %q", p, a.code, a.message)
		}
	}
	if len(f.calls()) != n {
		t.Error("a request answered without a check was checked")
	}
	if st := srv.Stats(); st.Answered != uint64(len(f.calls())+3) {
		t.Errorf("stats %+v", st)
	}
}

// TestDropped: packets that get no answer and no check.
func TestDropped(t *testing.T) {
	f := &fakeChecker{res: validate.Response{Value: true}}
	srv, addr := newFake(t, f, nil)
	good := func() []byte { return build(t, pkt{user: "alice", pass: "pw"}, secret) }
	truncate := func(b []byte) []byte { return b[:len(b)-1] }
	nasIP3 := rad.Attributes{{Type: rfc2865.NASIPAddress_Type, Attribute: []byte{127, 0, 0}}}
	overflow := func(b []byte) []byte {
		b = append(b, 1, 200, 'x')
		b[2], b[3] = byte(len(b)>>8), byte(len(b))
		return b
	}
	big := func(b []byte) []byte { return append(b, make([]byte, 4097-len(b))...) }
	accounting := func(b []byte) []byte { b[0] = byte(rad.CodeAccountingRequest); return b }
	for _, tc := range []struct {
		name   string
		from   string
		b      []byte
		reason string
	}{
		{"UnknownClient", "127.0.0.3", good(), "unknown_client"},
		{"WrongSecret", "", build(t, pkt{user: "alice", pass: "pw"}, []byte("other")), "bad_message_authenticator"},
		{"BadMessageAuthenticator", "", build(t, pkt{user: "alice", pass: "pw", badMA: true}, secret), "bad_message_authenticator"},
		{"NoMessageAuthenticator", "", build(t, pkt{user: "alice", pass: "pw", noMA: true}, secret), "no_message_authenticator"},
		{"LegacyWrongSecret", "127.0.0.2", build(t, pkt{user: "alice", pass: "pw"}, []byte("other")), "bad_message_authenticator"},
		{"Truncated", "", truncate(good()), "malformed"},
		{"AttributeWrongLength", "", build(t, pkt{user: "alice", pass: "pw", extra: nasIP3}, secret), "malformed"},
		{"AttributeOverflow", "", overflow(good()), "malformed"},
		{"Oversized", "", big(good()), "malformed"},
		{"NotAnAccessRequest", "", accounting(good()), "malformed"},
		{"Short", "", []byte{1, 2, 0, 19}, "malformed"},
		{"NoUserName", "", build(t, pkt{pass: "pw"}, secret), "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.Stats().Dropped[tc.reason]
			if a, ok := exchange(t, tc.from, addr, tc.b, secret, noAnswer); ok {
				t.Fatalf("answered %v", a.code)
			}
			if after := srv.Stats().Dropped[tc.reason]; after != before+1 {
				t.Errorf("dropped %s: %d, was %d", tc.reason, after, before)
			}
		})
	}
	if n := len(f.calls()); n != 0 {
		t.Errorf("%d checks for dropped packets", n)
	}
}

// TestDuplicates: a retransmission gets the first answer and no second
// check, also while the first is being decided; a new identifier is a
// new request.
func TestDuplicates(t *testing.T) {
	f := &fakeChecker{res: validate.Response{Value: true, Message: "matching 1 tokens"}, gate: make(chan struct{})}
	srv, addr := newFake(t, f, nil)
	conn, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := build(t, pkt{user: "alice", pass: "pw"}, secret)
	// While in flight: dropped.
	if _, ok := exchangeOn(t, conn, addr, b, secret, noAnswer); ok {
		t.Fatal("answer before the decision")
	}
	if _, ok := exchangeOn(t, conn, addr, b, secret, noAnswer); ok {
		t.Fatal("answer to the retransmission before the decision")
	}
	close(f.gate)
	// The first answer arrives; a third send gets it from the cache.
	first, ok := readAnswer(t, conn, b)
	if !ok || first.code != rad.CodeAccessAccept {
		t.Fatalf("first answer %v %v", first.code, ok)
	}
	f.mu.Lock()
	f.res = validate.Response{Message: "wrong otp value"}
	f.mu.Unlock()
	again, ok := exchangeOn(t, conn, addr, b, secret, wait)
	if !ok || again.code != rad.CodeAccessAccept {
		t.Fatalf("retransmission answered %v %v", again.code, ok)
	}
	if n := len(f.calls()); n != 1 {
		t.Errorf("%d checks for one request", n)
	}
	st := srv.Stats()
	if st.Duplicates != 1 || st.Dropped["duplicate_in_flight"] != 1 {
		t.Errorf("stats %+v", st)
	}
	// The same identifier with another authenticator is another request.
	c := build(t, pkt{user: "alice", pass: "pw"}, secret)
	c[1] = b[1]
	resign(c, secret)
	if a, ok := exchangeOn(t, conn, addr, c, secret, wait); !ok || a.code != rad.CodeAccessReject {
		t.Errorf("new request answered %v %v", a.code, ok)
	}
}

// TestFlood: requests beyond the per-client bound are dropped and the
// drops logged once a minute; the others are answered.
func TestFlood(t *testing.T) {
	f := &fakeChecker{res: validate.Response{Value: true}, gate: make(chan struct{})}
	var logs syncBuffer
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv, addr := newFake(t, f, func(c *radius.Config) {
		c.MaxPerClient, c.MaxInFlight = 2, 3
		c.Log = zerolog.New(&logs)
		c.Now = clock
	})
	var conns []answerConn
	for range 5 {
		conn, err := netListen()
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		b := build(t, pkt{user: "alice", pass: "pw"}, secret)
		if _, err := conn.WriteTo(b, udpAddr(t, addr)); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, answerConn{conn, b})
	}
	waitFor(t, func() bool { return srv.Stats().Dropped["busy"] == 3 && len(f.calls()) == 2 })
	// The legacy client has its own bound; the overall one (3) leaves it one.
	if _, ok := exchange(t, "127.0.0.2", addr, build(t, pkt{user: "x", pass: "pw", noMA: true}, secret), secret, noAnswer); ok {
		t.Fatal("answered while the checker is blocked")
	}
	if n := len(f.calls()); n != 3 {
		t.Errorf("%d checks, want 3", n)
	}
	close(f.gate)
	answered := 0
	for _, c := range conns {
		if _, ok := readAnswer(t, c.conn, c.b); ok {
			answered++
		}
	}
	if answered != 2 {
		t.Errorf("%d answers, want 2", answered)
	}
	if strings.Contains(logs.String(), "dropped") {
		t.Errorf("logged before a minute passed: %s", logs.String())
	}
	mu.Lock()
	now = now.Add(61 * time.Second)
	mu.Unlock()
	exchange(t, "127.0.0.3", addr, []byte{1}, secret, 50*time.Millisecond)
	waitFor(t, func() bool { return strings.Contains(logs.String(), `"busy":3`) })
	if strings.Contains(logs.String(), string(secret)) || strings.Contains(logs.String(), "pw") {
		t.Errorf("a secret in the log: %s", logs.String())
	}
}

// TestNew: a configuration without checker, clients or with a bad client
// or mapping is refused, with every problem named.
func TestNew(t *testing.T) {
	_, err := radius.New(radius.Config{Clients: []radius.Client{{Network: host("127.0.0.1")}, {Network: host("127.0.0.2"), Secret: secret}, {Network: host("127.0.0.2"), Secret: secret}},
		Mapping: []radius.Mapping{{Key: "serial", Attribute: "Nonsense"}}})
	for _, want := range []string{"no Checker", "empty secret", "listed twice", "unknown attribute"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if _, err := radius.New(radius.Config{Checker: &fakeChecker{}}); err == nil || !strings.Contains(err.Error(), "no clients") {
		t.Errorf("no clients: %v", err)
	}
	c := radius.Client{Network: host("127.0.0.1"), Secret: secret}
	if s := c.String() + " " + c.GoString(); strings.Contains(s, string(secret)) {
		t.Errorf("client string shows the secret: %s", s)
	}
}

// TestDrain: when the context of Serve ends, it stops reading but lets
// the requests in flight finish and answer before it returns.
func TestDrain(t *testing.T) {
	f := &fakeChecker{res: validate.Response{Value: true, Message: "matching 1 tokens"}, gate: make(chan struct{})}
	srv, err := radius.New(radius.Config{Checker: f, Clients: []radius.Client{{Network: host("127.0.0.1"), Secret: secret}}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, conn) }()
	nas, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer nas.Close()
	b := build(t, pkt{user: "alice", pass: "pw"}, secret)
	if _, err := nas.WriteTo(b, conn.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(f.calls()) == 1 })
	cancel()
	select {
	case <-done:
		t.Fatal("Serve returned with a request in flight")
	case <-time.After(200 * time.Millisecond):
	}
	close(f.gate)
	if a, ok := readAnswer(t, nas, b); !ok || a.code != rad.CodeAccessAccept {
		t.Fatalf("the request in flight got %v %v", a.code, ok)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// TestDuplicateWindow: past DuplicateWindow a retransmission is a new
// request.
func TestDuplicateWindow(t *testing.T) {
	f := &fakeChecker{res: validate.Response{Value: true}}
	var mu sync.Mutex
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	_, addr := newFake(t, f, func(c *radius.Config) {
		c.DuplicateWindow = 2 * time.Second
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	conn, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := build(t, pkt{user: "alice", pass: "pw"}, secret)
	for i, step := range []time.Duration{0, time.Second, 2 * time.Second} {
		mu.Lock()
		now = now.Add(step)
		mu.Unlock()
		if _, ok := exchangeOn(t, conn, addr, b, secret, wait); !ok {
			t.Fatalf("send %d: no answer", i)
		}
	}
	if n := len(f.calls()); n != 2 {
		t.Errorf("%d checks, want 2 (the second send within the window, the third after it)", n)
	}
}
