package notify_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	smtpd "github.com/emersion/go-smtp"
	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// env is a service on a real bbolt store, with its log captured.
type env struct {
	s   *notify.Service
	st  store.Store
	log *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var testNow = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// loopback is the dial policy of the tests, whose servers listen on
// loopback addresses.
var loopback = netguard.MustParse("127.0.0.0/8", "::1/128")

// newEnv returns a service that may dial loopback; edit adjusts its
// Config (scripts, roots, dial policy).
func newEnv(t *testing.T, edit ...func(*notify.Config)) *env {
	t.Helper()
	st := storetest.Open(t)
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	cfg := notify.Config{
		Store: st, Sealer: sealer, Log: zerolog.New(buf).Level(zerolog.DebugLevel),
		Now: func() time.Time { return testNow }, Dial: loopback,
	}
	for _, f := range edit {
		f(&cfg)
	}
	return &env{s: notify.New(cfg), st: st, log: buf}
}

// snapshot returns the raw bytes of the whole store.
func (e *env) snapshot(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	snap, ok := e.st.(store.Snapshotter)
	if !ok {
		t.Fatal("the test store cannot snapshot")
	}
	if _, err := snap.Snapshot(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// revision returns the config revision.
func (e *env) revision(t *testing.T) uint64 {
	t.Helper()
	var rev uint64
	if err := e.st.View(t.Context(), func(tx store.Tx) error { rev = store.ConfigRevision(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	return rev
}

// wantCode fails unless err carries an apierr of kind c.
func wantCode(t *testing.T, err error, c apierr.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want apierr kind %v", c)
	}
	if !apierr.Is(err, c) {
		t.Fatalf("error %v (%T), want apierr kind %v", err, err, c)
	}
}

// wantSendFailed fails unless err is a delivery failure: ConfigAdmin,
// ErrSendFailed in the chain, and none of the leaks in its text.
func wantSendFailed(t *testing.T, err error, leaks ...string) {
	t.Helper()
	wantCode(t, err, apierr.ConfigAdmin)
	if !errors.Is(err, notify.ErrSendFailed) {
		t.Fatalf("error %v does not wrap ErrSendFailed", err)
	}
	_, _, msg, _, _ := apierr.Wire(err)
	t.Logf("error on the wire: %s", msg)
	for _, l := range leaks {
		if l != "" && (strings.Contains(err.Error(), l) || strings.Contains(msg, l)) {
			t.Fatalf("error %q leaks %q", msg, l)
		}
	}
}

// testCert is a self-signed certificate for 127.0.0.1 and localhost, and a
// pool that trusts it.
type testCert struct {
	cert    tls.Certificate
	pool    *x509.CertPool
	certPEM []byte
	keyDER  []byte
}

func newCert(t *testing.T) testCert {
	t.Helper()
	c := testsvc.SelfSignedCert(t)
	return testCert{cert: c.TLS, pool: c.Pool, certPEM: c.CertPEM, keyDER: c.KeyDER}
}

// sink is an in-process SMTP server on 127.0.0.1 (github.com/emersion/go-smtp).
type sink struct {
	addr string
	port int

	user, pass string // when set, AUTH PLAIN is required
	requireTLS bool   // MAIL is refused on a plain connection
	rejectRcpt bool   // RCPT answers 550 with a telltale text

	mu   sync.Mutex
	msgs []received
}

// received is one accepted message.
type received struct {
	From string
	To   []string
	Data []byte
	TLS  bool
	Auth string // the user name that authenticated
}

// sinkRemoteText is what the refusing sink answers; no error may show it.
const sinkRemoteText = "relay denied by policy 4711-SECRET-INTERNAL"

func newSink(t *testing.T, c *testCert, implicitTLS, startTLS bool, setup func(*sink)) *sink {
	t.Helper()
	k := &sink{}
	if setup != nil {
		setup(k)
	}
	srv := smtpd.NewServer(smtpd.BackendFunc(func(conn *smtpd.Conn) (smtpd.Session, error) {
		_, isTLS := conn.TLSConnectionState()
		return &sinkSession{k: k, conn: conn, tls: isTLS}, nil
	}))
	srv.Domain = "sink.test"
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	srv.AllowInsecureAuth = false
	srv.ErrorLog = quietLog{}
	if c != nil && (startTLS || implicitTLS) {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{c.cert}, MinVersion: tls.VersionTLS12}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if implicitTLS {
		l = tls.NewListener(l, srv.TLSConfig)
	}
	k.addr = l.Addr().String()
	k.port = l.Addr().(*net.TCPAddr).Port
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	// go-smtp's Close closes only the listeners Serve has registered: a
	// Close that runs before Serve got that far would leave Serve in
	// Accept for ever, so the listener is closed here too.
	t.Cleanup(func() { _ = srv.Close(); _ = l.Close(); <-done })
	return k
}

func (k *sink) messages() []received {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]received(nil), k.msgs...)
}

type sinkSession struct {
	k        *sink
	conn     *smtpd.Conn
	tls      bool
	authUser string
	from     string
	to       []string
}

func (s *sinkSession) AuthMechanisms() []string {
	if s.k.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *sinkSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.k.user || pass != s.k.pass {
			return smtpd.ErrAuthFailed
		}
		s.authUser = user
		return nil
	}), nil
}

func (s *sinkSession) Mail(from string, _ *smtpd.MailOptions) error {
	_, isTLS := s.conn.TLSConnectionState()
	if s.k.requireTLS && !isTLS {
		return &smtpd.SMTPError{Code: 530, EnhancedCode: smtpd.EnhancedCode{5, 7, 0}, Message: "Must issue a STARTTLS command first"}
	}
	if s.k.user != "" && s.authUser == "" {
		return smtpd.ErrAuthRequired
	}
	s.tls = isTLS
	s.from = from
	return nil
}

func (s *sinkSession) Rcpt(to string, _ *smtpd.RcptOptions) error {
	if s.k.rejectRcpt {
		return &smtpd.SMTPError{Code: 550, EnhancedCode: smtpd.EnhancedCode{5, 7, 1}, Message: sinkRemoteText}
	}
	s.to = append(s.to, to)
	return nil
}

func (s *sinkSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.k.mu.Lock()
	s.k.msgs = append(s.k.msgs, received{From: s.from, To: s.to, Data: b, TLS: s.tls, Auth: s.authUser})
	s.k.mu.Unlock()
	return nil
}

func (s *sinkSession) Reset()        { s.from, s.to = "", nil }
func (s *sinkSession) Logout() error { return nil }

// parsed is a received message's headers and decoded body.
type parsed struct {
	Header mail.Header
	Body   string
}

func parseMsg(t *testing.T, data []byte) parsed {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("received message does not parse: %v\n%s", err, data)
	}
	body, err := io.ReadAll(m.Body)
	if err != nil {
		t.Fatal(err)
	}
	return parsed{Header: m.Header, Body: decodeBody(t, m.Header, body)}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }

// within fails unless fn returns within limit; it returns fn's error.
func within(t *testing.T, limit time.Duration, fn func() error) error {
	t.Helper()
	start := time.Now()
	err := fn()
	if d := time.Since(start); d > limit {
		t.Fatalf("took %v, want at most %v", d, limit)
	}
	return err
}

// decodeBody undoes the Content-Transfer-Encoding of a single-part body.
func decodeBody(t *testing.T, h mail.Header, body []byte) string {
	t.Helper()
	switch strings.ToLower(h.Get("Content-Transfer-Encoding")) {
	case "quoted-printable":
		b, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	case "base64":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(body)), ""))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return string(body)
}

// quietLog silences go-smtp's server log (clients that hang up are
// expected here).
type quietLog struct{}

func (quietLog) Printf(string, ...any) {}
func (quietLog) Println(...any)        {}
