package notify_test

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/store"
)

// piHit is one request a fake remote privacyIDEA server received.
type piHit struct {
	method, path, contentType, auth string
	query, form                     url.Values
}

// fakePI is a remote privacyIDEA server on loopback: /validate/check
// accepts user "alice" with password "remote-Pass-1"; other paths answer
// as answer says (default: a JSON envelope with value "ok").
type fakePI struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hits   []piHit
	answer func(w http.ResponseWriter, r *http.Request)
}

func newFakePI(t *testing.T, tlsServer bool) *fakePI {
	t.Helper()
	f := &fakePI{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var form url.Values
		if r.Method == http.MethodDelete {
			// net/http parses no DELETE body: read the form by hand.
			b, _ := io.ReadAll(r.Body)
			form, _ = url.ParseQuery(string(b))
		} else {
			_ = r.ParseForm()
			form = r.PostForm
		}
		hit := piHit{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"),
			auth: r.Header.Get("Authorization"), query: r.URL.Query(), form: form}
		f.mu.Lock()
		f.hits = append(f.hits, hit)
		answer := f.answer
		f.mu.Unlock()
		if answer != nil {
			answer(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/validate/check" {
			ok := r.PostForm.Get("user") == "alice" && r.PostForm.Get("pass") == "remote-Pass-1"
			if ok {
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","result":{"status":true,"value":true},"detail":{"message":"matching 1 tokens"}}`)
			} else {
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","result":{"status":true,"value":false},"detail":{"message":"wrong otp pin"}}`)
			}
			return
		}
		_, _ = io.WriteString(w, `{"result":{"status":true,"value":"ok"}}`)
	})
	f.srv = httptest.NewUnstartedServer(h)
	// A client that refuses the certificate is expected here.
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if tlsServer {
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakePI) got() []piHit {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]piHit(nil), f.hits...)
}

func (f *fakePI) setAnswer(a func(w http.ResponseWriter, r *http.Request)) {
	f.mu.Lock()
	f.answer = a
	f.mu.Unlock()
}

func TestPIServerDefinitions(t *testing.T) {
	t.Run("RoundTrip", func(t *testing.T) {
		e := newEnv(t)
		rev := e.revision(t)
		if err := e.s.SetPIServer(t.Context(), notify.PIServer{Identifier: " remote pi ", URL: " https://pi.example.com/pi/ ", TLS: true, Description: "child"}); err != nil {
			t.Fatal(err)
		}
		if e.revision(t) != rev+1 {
			t.Error("no config revision bump")
		}
		if err := e.s.SetPIServer(t.Context(), notify.PIServer{Identifier: "a", URL: "http://10.0.0.1:8080"}); err != nil {
			t.Fatal(err)
		}
		list, err := e.s.PIServers(t.Context())
		if err != nil || len(list) != 2 {
			t.Fatalf("PIServers = %v, %v", list, err)
		}
		if list[0].Identifier != "a" || list[1].Identifier != "remote_pi" {
			t.Fatalf("order or identifiers: %+v", list)
		}
		got := list[1]
		if got.URL != "https://pi.example.com/pi" || !got.TLS || got.Description != "child" || got.ID <= 0 {
			t.Errorf("got %+v", got)
		}
		if list[0].ID == got.ID || list[0].TLS {
			t.Errorf("ids or tls: %+v", list)
		}
		// A change keeps the id and replaces the rest.
		if err := e.s.SetPIServer(t.Context(), notify.PIServer{Identifier: "remote_pi", URL: "https://pi2.example.com"}); err != nil {
			t.Fatal(err)
		}
		one, err := e.s.PIServer(t.Context(), "remote_pi")
		if err != nil {
			t.Fatal(err)
		}
		if one.ID != got.ID || one.URL != "https://pi2.example.com" || one.TLS || one.Description != "" {
			t.Errorf("after change: %+v (id was %d)", one, got.ID)
		}
		if _, err := e.s.PIServer(t.Context(), "nosuch"); !errors.Is(err, notify.ErrPIServerNotFound) {
			t.Errorf("unknown: %v", err)
		}
		if err := e.s.DeletePIServer(t.Context(), "remote_pi"); err != nil {
			t.Fatal(err)
		}
		err = e.s.DeletePIServer(t.Context(), "remote_pi")
		wantCode(t, err, apierr.ResourceNotFound)
		if _, _, msg, _, _ := apierr.Wire(err); msg != "ERR601: The requested privacyIDEAServer could not be found." {
			t.Errorf("not found text %q", msg)
		}
		if list, _ := e.s.PIServers(t.Context()); len(list) != 1 || list[0].Identifier != "a" {
			t.Errorf("after delete: %+v", list)
		}
	})

	t.Run("AlsoInTransaction", func(t *testing.T) {
		e := newEnv(t)
		boom := errors.New("audit failed")
		err := e.s.SetPIServer(t.Context(), notify.PIServer{Identifier: "x", URL: "https://pi.example.com"},
			func(store.Tx) error { return boom })
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		if list, _ := e.s.PIServers(t.Context()); len(list) != 0 {
			t.Errorf("stored despite the failed hook: %+v", list)
		}
		ran := false
		if err := e.s.SetPIServer(t.Context(), notify.PIServer{Identifier: "x", URL: "https://pi.example.com"},
			func(store.Tx) error { ran = true; return nil }); err != nil || !ran {
			t.Fatalf("err %v, hook ran %v", err, ran)
		}
		if err := e.s.DeletePIServer(t.Context(), "x", func(store.Tx) error { return boom }); !errors.Is(err, boom) {
			t.Fatalf("delete err = %v", err)
		}
		if _, err := e.s.PIServer(t.Context(), "x"); err != nil {
			t.Errorf("deleted despite the failed hook: %v", err)
		}
	})

	t.Run("Validation", func(t *testing.T) {
		e := newEnv(t)
		cases := []struct {
			name string
			d    notify.PIServer
		}{
			{"NoIdentifier", notify.PIServer{Identifier: " ", URL: "https://pi.example.com"}},
			{"SlashInIdentifier", notify.PIServer{Identifier: "a/b", URL: "https://pi.example.com"}},
			{"NoURL", notify.PIServer{Identifier: "p"}},
			{"FTP", notify.PIServer{Identifier: "p", URL: "ftp://pi.example.com"}},
			{"NoHost", notify.PIServer{Identifier: "p", URL: "https:///validate"}},
			{"Relative", notify.PIServer{Identifier: "p", URL: "pi.example.com"}},
			{"Credentials", notify.PIServer{Identifier: "p", URL: "https://u:pw@pi.example.com"}},
			{"Query", notify.PIServer{Identifier: "p", URL: "https://pi.example.com/?a=b"}},
			{"Fragment", notify.PIServer{Identifier: "p", URL: "https://pi.example.com/#x"}},
			{"BadHost", notify.PIServer{Identifier: "p", URL: "https://pi example.com"}},
			{"TooLong", notify.PIServer{Identifier: "p", URL: "https://pi.example.com/" + strings.Repeat("a", 300)}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				wantCode(t, e.s.SetPIServer(t.Context(), tc.d), apierr.Parameter)
			})
		}
		if list, _ := e.s.PIServers(t.Context()); len(list) != 0 {
			t.Errorf("stored: %+v", list)
		}
	})
}

func TestTestPIServer(t *testing.T) {
	const pass = "remote-Pass-1"

	t.Run("AcceptAndReject", func(t *testing.T) {
		e := newEnv(t)
		f := newFakePI(t, false)
		def := notify.PIServer{Identifier: "p", URL: f.srv.URL + "/"}
		ok, err := e.s.TestPIServer(t.Context(), def, "alice", pass)
		if err != nil || !ok {
			t.Fatalf("right password: %v, %v", ok, err)
		}
		ok, err = e.s.TestPIServer(t.Context(), def, "alice", "wrong")
		if err != nil || ok {
			t.Fatalf("wrong password: %v, %v", ok, err)
		}
		hits := f.got()
		if len(hits) != 2 {
			t.Fatalf("hits %+v", hits)
		}
		h := hits[0]
		if h.method != "POST" || h.path != "/validate/check" || h.contentType != "application/x-www-form-urlencoded" ||
			h.form.Get("user") != "alice" || h.form.Get("pass") != pass || len(h.query) != 0 {
			t.Errorf("hit %+v", h)
		}
		if strings.Contains(e.log.String(), pass) {
			t.Error("the password is in the log")
		}
	})

	t.Run("Answers", func(t *testing.T) {
		e := newEnv(t)
		f := newFakePI(t, false)
		def := notify.PIServer{Identifier: "p", URL: f.srv.URL}
		// A non-200 answer is false, as privacyIDEA reads it.
		f.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"result":{"status":true,"value":true}}`)
		})
		if ok, err := e.s.TestPIServer(t.Context(), def, "alice", pass); err != nil || ok {
			t.Errorf("HTTP 500: %v, %v", ok, err)
		}
		// status false (an error envelope) is false.
		f.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"result":{"status":false,"error":{"code":904,"message":"ERR904: no user"}}}`)
		})
		if ok, err := e.s.TestPIServer(t.Context(), def, "alice", pass); err != nil || ok {
			t.Errorf("error envelope: %v, %v", ok, err)
		}
		// A truthy value that is not true is false.
		f.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"result":{"status":true,"value":"yes"}}`)
		})
		if ok, err := e.s.TestPIServer(t.Context(), def, "alice", pass); err != nil || ok {
			t.Errorf("string value: %v, %v", ok, err)
		}
		// Not privacyIDEA: an error that does not echo the answer.
		f.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "<html>internal-remote-text</html>")
		})
		_, err := e.s.TestPIServer(t.Context(), def, "alice", pass)
		wantCode(t, err, apierr.ConfigAdmin)
		if !errors.Is(err, notify.ErrPIFailed) || strings.Contains(err.Error(), "internal-remote-text") {
			t.Errorf("non-JSON: %v", err)
		}
		// A redirect is not followed.
		var followed atomic.Bool
		target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Store(true) }))
		defer target.Close()
		f.setAnswer(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/validate/check", http.StatusTemporaryRedirect)
		})
		_, err = e.s.TestPIServer(t.Context(), def, "alice", pass)
		if !errors.Is(err, notify.ErrPIFailed) || followed.Load() {
			t.Errorf("redirect: %v (followed %v)", err, followed.Load())
		}
		if strings.Contains(e.log.String(), pass) {
			t.Error("the password is in the log")
		}
	})

	t.Run("BadURL", func(t *testing.T) {
		e := newEnv(t)
		_, err := e.s.TestPIServer(t.Context(), notify.PIServer{Identifier: "p", URL: "gopher://x"}, "alice", pass)
		wantCode(t, err, apierr.Parameter)
	})

	t.Run("Unreachable", func(t *testing.T) {
		e := newEnv(t)
		err := within(t, 5*time.Second, func() error {
			_, err := e.s.TestPIServer(t.Context(), notify.PIServer{Identifier: "p", URL: "http://127.0.0.1:" + itoa(closedPort(t))}, "alice", pass)
			return err
		})
		wantCode(t, err, apierr.ConfigAdmin)
		if !errors.Is(err, notify.ErrPIFailed) || !strings.Contains(err.Error(), "could not be reached") {
			t.Errorf("closed port: %v", err)
		}
	})

	t.Run("DialPolicy", func(t *testing.T) {
		// The default policy refuses loopback: the request never leaves.
		e := newEnv(t, func(c *notify.Config) { c.Dial = nil })
		f := newFakePI(t, false)
		_, err := e.s.TestPIServer(t.Context(), notify.PIServer{Identifier: "p", URL: f.srv.URL}, "alice", pass)
		if !errors.Is(err, netguard.ErrRefused) || !errors.Is(err, notify.ErrPIFailed) {
			t.Errorf("refused: %v", err)
		}
		if len(f.got()) != 0 {
			t.Error("the request reached the server")
		}
	})

	t.Run("TLS", func(t *testing.T) {
		e := newEnv(t)
		f := newFakePI(t, true)
		// The test server's certificate is not trusted: tls true fails.
		_, err := e.s.TestPIServer(t.Context(), notify.PIServer{Identifier: "p", URL: f.srv.URL, TLS: true}, "alice", pass)
		if !errors.Is(err, notify.ErrPIFailed) || !strings.Contains(err.Error(), "TLS") {
			t.Errorf("untrusted certificate: %v", err)
		}
		if len(f.got()) != 0 {
			t.Error("the password went over an unverified connection")
		}
		// tls false accepts it.
		ok, err := e.s.TestPIServer(t.Context(), notify.PIServer{Identifier: "p", URL: f.srv.URL, TLS: false}, "alice", pass)
		if err != nil || !ok {
			t.Errorf("tls false: %v, %v", ok, err)
		}
		// With the certificate's CA trusted, tls true works.
		e2 := newEnv(t, func(c *notify.Config) {
			c.RootCAs = f.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		})
		ok, err = e2.s.TestPIServer(t.Context(), notify.PIServer{Identifier: "p", URL: f.srv.URL, TLS: true}, "alice", pass)
		if err != nil || !ok {
			t.Errorf("trusted: %v, %v", ok, err)
		}
	})
}

func TestPIForward(t *testing.T) {
	e := newEnv(t)
	f := newFakePI(t, false)
	if err := e.s.SetPIServer(t.Context(), notify.PIServer{Identifier: "child", URL: f.srv.URL + "/"}); err != nil {
		t.Fatal(err)
	}
	params := url.Values{"user": {"alice"}, "realm": {"r1"}}
	ans, err := e.s.PIForward(t.Context(), "child", notify.PIRequest{Method: "get", Path: "/token/", Params: params,
		Header: http.Header{"Authorization": {"jwt-of-admin"}}})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Status != 200 || ans.URL != f.srv.URL+"/token/" || string(ans.Body) != `{"result":{"status":true,"value":"ok"}}` {
		t.Errorf("answer %+v (%s)", ans, ans.Body)
	}
	if _, err := e.s.PIForward(t.Context(), "child", notify.PIRequest{Method: "DELETE", Path: "/token/S1", Params: params}); err != nil {
		t.Fatal(err)
	}
	hits := f.got()
	if len(hits) != 2 {
		t.Fatalf("hits %+v", hits)
	}
	if h := hits[0]; h.method != "GET" || h.path != "/token/" || h.query.Get("user") != "alice" || h.query.Get("realm") != "r1" || h.auth != "jwt-of-admin" {
		t.Errorf("GET hit %+v", h)
	}
	if h := hits[1]; h.method != "DELETE" || h.path != "/token/S1" || h.contentType != "application/x-www-form-urlencoded" || h.auth != "" || len(h.query) != 0 ||
		h.form.Get("user") != "alice" || h.form.Get("realm") != "r1" {
		t.Errorf("DELETE hit %+v", h)
	}
	// Any HTTP status is an answer.
	f.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"result":{"status":false}}`)
	})
	if ans, err := e.s.PIForward(t.Context(), "child", notify.PIRequest{Method: "POST", Path: "/x"}); err != nil || ans.Status != 404 {
		t.Errorf("404: %+v, %v", ans, err)
	}
	if _, err := e.s.PIForward(t.Context(), "nosuch", notify.PIRequest{Method: "POST", Path: "/x"}); !errors.Is(err, notify.ErrPIServerNotFound) {
		t.Errorf("unknown server: %v", err)
	}
	_, err = e.s.PIForward(t.Context(), "child", notify.PIRequest{Method: "PUT", Path: "/x"})
	wantCode(t, err, apierr.Parameter)
	_, err = e.s.PIForward(t.Context(), "child", notify.PIRequest{Method: "POST", Path: "x"})
	wantCode(t, err, apierr.Parameter)
	if len(f.got()) != 3 {
		t.Errorf("refused requests were sent: %d hits", len(f.got()))
	}
}
