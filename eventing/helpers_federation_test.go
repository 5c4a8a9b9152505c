package eventing

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/store/storetest"
)

// fedEnv is an eventing service with the Federation module, a
// notification service that may dial loopback (it holds the remote server
// definitions), a real audit log and the log captured.
type fedEnv struct {
	svc    *Service
	notify *notify.Service
	audit  *audit.Log
	log    *syncLog
}

func newFedEnv(t *testing.T) *fedEnv {
	t.Helper()
	st := storetest.Open(t)
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	al, err := audit.New(audit.Config{Store: st, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncLog{}
	lg := zerolog.New(buf).Level(zerolog.DebugLevel)
	n := notify.New(notify.Config{Store: st, Sealer: sealer, Log: lg, Dial: netguard.MustParse("127.0.0.0/8", "::1/128")})
	s := New(Config{Store: st, Audit: al, Notify: n, Log: lg})
	s.Register(newFederation(s))
	t.Cleanup(s.Close)
	return &fedEnv{svc: s, notify: n, audit: al, log: buf}
}

// define stores a Federation definition for event with opts (abort_on_error
// left to the module's default) and returns its id.
func (e *fedEnv) define(t *testing.T, event string, opts map[string]string) int {
	t.Helper()
	id, err := e.svc.Set(t.Context(), Definition{Name: "fed-" + event, Active: true, Events: []string{event},
		HandlerModule: "Federation", Action: "forward", Options: opts}, false)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// fedHit is one request the remote server received.
type fedHit struct {
	method, path, contentType string
	header                    http.Header
	query, form               url.Values
}

// fedRemote stands in for the remote privacyIDEA server: it records each
// request and answers with status and body (settable).
type fedRemote struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hits   []fedHit
	status int
	body   string
}

func newFedRemote(t *testing.T, status int, body string) *fedRemote {
	t.Helper()
	f := &fedRemote{status: status, body: body}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// net/http parses no DELETE body: read the form by hand.
		b, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(b))
		f.mu.Lock()
		f.hits = append(f.hits, fedHit{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"),
			header: r.Header.Clone(), query: r.URL.Query(), form: form})
		status, body := f.status, f.body
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fedRemote) got() []fedHit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fedHit(nil), f.hits...)
}

func (f *fedRemote) answer(status int, body string) {
	f.mu.Lock()
	f.status, f.body = status, body
	f.mu.Unlock()
}

// auditRows returns the audit entries whose action matches pattern.
func (e *fedEnv) auditRows(t *testing.T, pattern string) []audit.Row {
	t.Helper()
	res, err := e.audit.Search(t.Context(), audit.Query{PageSize: 50, Filters: map[string]string{"action": pattern}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Rows
}

// succeeded reports whether an audit row is a success.
func succeeded(row audit.Row) bool { return fmt.Sprint(row["success"]) == "1" }
