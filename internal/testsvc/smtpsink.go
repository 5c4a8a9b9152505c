package testsvc

import (
	"io"
	"log"
	"net"
	"sync"
	"testing"
	"time"

	smtpd "github.com/emersion/go-smtp"
)

// SMTPSink is an SMTP server on loopback that accepts every message
// (plain SMTP, no authentication) and keeps it for the test to read.
type SMTPSink struct {
	Addr string
	Port int

	mu   sync.Mutex
	msgs []Mail
}

// Mail is one message the sink received.
type Mail struct {
	From string
	To   []string
	Data string
}

// NewSMTPSink starts a sink that stops when the test ends.
func NewSMTPSink(tb testing.TB) *SMTPSink {
	tb.Helper()
	k := &SMTPSink{}
	srv := smtpd.NewServer(smtpd.BackendFunc(func(*smtpd.Conn) (smtpd.Session, error) { return &sinkSession{k: k}, nil }))
	srv.Domain = "sink.test"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	k.Addr, k.Port = l.Addr().String(), l.Addr().(*net.TCPAddr).Port
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	// go-smtp's Close closes only the listeners Serve has registered: a
	// Close before Serve got that far would leave Serve in Accept for
	// ever, so the listener is closed here too.
	tb.Cleanup(func() { _ = srv.Close(); _ = l.Close(); <-done })
	return k
}

// Messages returns what arrived so far.
func (k *SMTPSink) Messages() []Mail {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Mail(nil), k.msgs...)
}

type sinkSession struct {
	k    *SMTPSink
	from string
	to   []string
}

func (s *sinkSession) Mail(from string, _ *smtpd.MailOptions) error { s.from = from; return nil }
func (s *sinkSession) Rcpt(to string, _ *smtpd.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}
func (s *sinkSession) Reset()        { s.from, s.to = "", nil }
func (s *sinkSession) Logout() error { return nil }
func (s *sinkSession) Data(r io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return err
	}
	s.k.mu.Lock()
	s.k.msgs = append(s.k.msgs, Mail{From: s.from, To: s.to, Data: string(b)})
	s.k.mu.Unlock()
	return nil
}
