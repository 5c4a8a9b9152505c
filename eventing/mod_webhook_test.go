package eventing

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
)

// ntHook is a webhook receiver that records what it gets and answers with
// status after delay (cut short when the client leaves).
type ntHook struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hits   []ntHookHit
	status int
	delay  time.Duration
}

type ntHookHit struct {
	method, path, contentType string
	body                      []byte
}

func newNtHook(t *testing.T, status int, delay time.Duration) *ntHook {
	t.Helper()
	h := &ntHook{status: status, delay: delay}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.hits = append(h.hits, ntHookHit{r.Method, r.URL.Path, r.Header.Get("Content-Type"), b})
		h.mu.Unlock()
		if h.delay > 0 {
			select {
			case <-time.After(h.delay):
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(h.status)
		_, _ = io.WriteString(w, "secret-answer-body")
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *ntHook) got() []ntHookHit {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.hits)
}

// wait returns the first hit, waiting for it.
func (h *ntHook) wait(t *testing.T) ntHookHit {
	t.Helper()
	ntWaitFor(t, "the webhook", func() bool { return len(h.got()) > 0 })
	return h.got()[0]
}

// ntHookEnv is an env whose webhook client may reach the test servers.
func ntHookEnv(t *testing.T, edit ...func(*Config)) *ntEnv {
	return newNtEnv(t, append([]func(*Config){func(c *Config) { c.HTTP = &http.Client{} }}, edit...)...)
}

func TestWebHookPostJSON(t *testing.T) {
	e := ntHookEnv(t)
	e.token(t, "HOTP0001", "desk")
	h := newNtHook(t, 200, 0)
	opts := map[string]string{"URL": h.srv.URL + "/hook?key=k1", "content_type": "application/json", "replace": "True",
		"data": `{"serial":"{serial}","who":{"{username}":["{token_owner}@{user_realm}",1.50,true,null]},` +
			`"pin":"{pin}","otp":"{googleurl_value}","by":"{logged_in_user}","ch":"{challenge}","keep":"{unknown}"}`}
	if err := e.check(t, "WebHook", "post_webhook", opts); err != nil {
		t.Fatal(err)
	}
	c := ntAdminCall("HOTP0001", map[string]any{"pin": "rnd-pin-4242", "transaction_id": "tx-9",
		"googleurl": map[string]any{"value": "otpauth://hotp/x?secret=SEED"}})
	if err := e.do(t, e.run("WebHook", "post_webhook", opts, c)); err != nil {
		t.Fatal(err)
	}
	hit := h.wait(t)
	if hit.method != "POST" || hit.path != "/hook" || hit.contentType != "application/json" {
		t.Errorf("hit %s %s %s", hit.method, hit.path, hit.contentType)
	}
	var got map[string]any
	if err := json.Unmarshal(hit.body, &got); err != nil {
		t.Fatalf("body %s: %v", hit.body, err)
	}
	want := map[string]any{"serial": "HOTP0001", "who": map[string]any{"alice": []any{"alice@realm1", 1.5, true, nil}},
		"pin": "{pin}", "otp": "{googleurl_value}", "by": "alice", "ch": "tx-9", "keep": "{unknown}"}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("body %s, want %s", gb, wb)
	}
	if strings.Contains(string(hit.body), "rnd-pin") || strings.Contains(string(hit.body), "SEED") {
		t.Errorf("a secret was posted: %s", hit.body)
	}
	if !strings.Contains(string(hit.body), "1.50") {
		t.Errorf("number not kept as written: %s", hit.body)
	}
}

func TestWebHookWithoutReplace(t *testing.T) {
	e := ntHookEnv(t)
	h := newNtHook(t, 200, 0)
	opts := map[string]string{"URL": h.srv.URL, "content_type": "json", "data": `{"serial":"{serial}"}`}
	if err := e.do(t, e.run("WebHook", "post_webhook", opts, ntAdminCall("S1", nil))); err != nil {
		t.Fatal(err)
	}
	if hit := h.wait(t); string(hit.body) != `{"serial":"{serial}"}` || hit.contentType != "application/json" {
		t.Errorf("body %s (%s)", hit.body, hit.contentType)
	}
}

func TestWebHookPostForm(t *testing.T) {
	tests := []struct {
		name, ct, data string
		want           url.Values
	}{
		{"Pairs", "application/x-www-form-urlencoded", "serial={serial}&desc={tokendescription}&x=1",
			url.Values{"serial": {"HOTP0001"}, "desc": {"a&b=c"}, "x": {"1"}}},
		{"JSONObject", "urlencoded", `{"serial":"{serial}","n":2,"o":{"k":"v"}}`,
			url.Values{"serial": {"HOTP0001"}, "n": {"2"}, "o": {`{"k":"v"}`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ntHookEnv(t)
			e.token(t, "HOTP0001", "a&b=c")
			h := newNtHook(t, 200, 0)
			opts := map[string]string{"URL": h.srv.URL, "content_type": tt.ct, "replace": "1", "data": tt.data}
			if err := e.check(t, "WebHook", "post_webhook", opts); err != nil {
				t.Fatal(err)
			}
			if err := e.do(t, e.run("WebHook", "post_webhook", opts, ntAdminCall("HOTP0001", nil))); err != nil {
				t.Fatal(err)
			}
			hit := h.wait(t)
			if hit.contentType != "application/x-www-form-urlencoded" {
				t.Errorf("content type %q", hit.contentType)
			}
			got, err := url.ParseQuery(string(hit.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.want {
				if !slices.Equal(got[k], v) {
					t.Errorf("%s = %q, want %q (body %s)", k, got[k], v, hit.body)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("form %v: a tag value added a parameter", got)
			}
		})
	}
}

func TestWebHookCheck(t *testing.T) {
	e := ntHookEnv(t)
	ok := map[string]string{"URL": "https://hooks.example.com/x", "content_type": "application/json", "data": `{"a":1}`}
	with := func(k, v string) map[string]string {
		o := map[string]string{}
		for a, b := range ok {
			o[a] = b
		}
		if v == "<del>" {
			delete(o, k)
		} else {
			o[k] = v
		}
		return o
	}
	tests := []struct {
		name string
		opts map[string]string
		good bool
	}{
		{"OK", ok, true},
		{"HTTP", with("URL", "http://hooks.example.com:8080/x"), true},
		{"FTP", with("URL", "ftp://hooks.example.com/x"), false},
		{"File", with("URL", "file:///etc/passwd"), false},
		{"NoHost", with("URL", "http:///x"), false},
		{"NotAURL", with("URL", "hooks.example.com/x"), false},
		{"NoURL", with("URL", "<del>"), false},
		{"NoContentType", with("content_type", "<del>"), false},
		{"BadContentType", with("content_type", "text/xml"), false},
		{"LegacyJSON", with("content_type", "json"), true},
		{"NoData", with("data", "<del>"), false},
		{"BadJSON", with("data", `{"a":`), false},
		{"TrailingJSON", with("data", `{"a":1} x`), false},
		{"FormPairs", map[string]string{"URL": ok["URL"], "content_type": "urlencoded", "data": "a=1&b=2"}, true},
		{"FormBadObject", map[string]string{"URL": ok["URL"], "content_type": "urlencoded", "data": `{"a":`}, false},
		{"FormBadPairs", map[string]string{"URL": ok["URL"], "content_type": "urlencoded", "data": "a=%zz"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := e.check(t, "WebHook", "post_webhook", tt.opts)
			if tt.good && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tt.good && !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("error %v, want a parameter error", err)
			}
		})
	}
	// A stored definition that was never checked fails when run.
	if err := e.do(t, e.run("WebHook", "post_webhook", with("URL", "ftp://x/"), ntAdminCall("", nil))); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("Do with an ftp URL: %v", err)
	}
}

func TestWebHookDoesNotBlock(t *testing.T) {
	e := ntHookEnv(t)
	h := newNtHook(t, 200, 2*time.Second)
	// Stop the background work before the server closes (cleanups run
	// last in, first out), so that the server's Close does not wait for
	// the slow answer.
	t.Cleanup(e.svc.Close)
	opts := map[string]string{"URL": h.srv.URL, "content_type": "application/json", "data": `{}`}
	start := time.Now()
	if err := e.do(t, e.run("WebHook", "post_webhook", opts, ntAdminCall("", nil))); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Do took %v while the receiver sleeps", d)
	}
	h.wait(t) // the POST did go out
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("the POST arrived after %v", d)
	}
}

func TestWebHookFailuresAreLogged(t *testing.T) {
	t.Run("Non2xx", func(t *testing.T) {
		e := ntHookEnv(t)
		h := newNtHook(t, 500, 0)
		u, _ := url.Parse(h.srv.URL)
		opts := map[string]string{"URL": h.srv.URL + "/p?token=qsecret", "content_type": "json", "data": `{"d":"body-secret"}`}
		if err := e.do(t, e.run("WebHook", "post_webhook", opts, ntAdminCall("", nil))); err != nil {
			t.Fatal(err)
		}
		ntWaitFor(t, "the log line", func() bool { return strings.Contains(e.log.String(), "HTTP 500") })
		log := e.log.String()
		if !strings.Contains(log, u.Host) || !strings.Contains(log, `"level":"warn"`) {
			t.Errorf("log %s", log)
		}
		for _, leak := range []string{"qsecret", "body-secret", "secret-answer-body"} {
			if strings.Contains(log, leak) {
				t.Errorf("log leaks %q: %s", leak, log)
			}
		}
	})

	t.Run("ClosedPort", func(t *testing.T) {
		e := ntHookEnv(t)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		opts := map[string]string{"URL": "http://" + addr + "/p?token=qsecret", "content_type": "json", "data": `{}`}
		if err := e.do(t, e.run("WebHook", "post_webhook", opts, ntAdminCall("", nil))); err != nil {
			t.Fatalf("a network error must not fail the handler: %v", err)
		}
		ntWaitFor(t, "the log line", func() bool { return strings.Contains(e.log.String(), "webhook failed") })
		if log := e.log.String(); strings.Contains(log, "qsecret") || !strings.Contains(log, addr) {
			t.Errorf("log %s", log)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		e := ntHookEnv(t, func(c *Config) { c.WebHookTimeout = 100 * time.Millisecond })
		h := newNtHook(t, 200, 2*time.Second)
		t.Cleanup(e.svc.Close)
		opts := map[string]string{"URL": h.srv.URL, "content_type": "json", "data": `{}`}
		if err := e.do(t, e.run("WebHook", "post_webhook", opts, ntAdminCall("", nil))); err != nil {
			t.Fatal(err)
		}
		ntWaitFor(t, "the log line", func() bool { return strings.Contains(e.log.String(), "webhook failed") })
		if log := e.log.String(); !strings.Contains(log, "deadline exceeded") {
			t.Errorf("log %s", log)
		}
	})

	t.Run("DefaultClientRefusesLoopback", func(t *testing.T) {
		e := newNtEnv(t) // no HTTP client: the default refuses loopback
		h := newNtHook(t, 200, 0)
		opts := map[string]string{"URL": h.srv.URL, "content_type": "json", "data": `{}`}
		if err := e.do(t, e.run("WebHook", "post_webhook", opts, ntAdminCall("", nil))); err != nil {
			t.Fatal(err)
		}
		ntWaitFor(t, "the log line", func() bool { return strings.Contains(e.log.String(), "webhook failed") })
		if len(h.got()) != 0 {
			t.Error("the default client reached a loopback address")
		}
	})

	t.Run("NoRedirect", func(t *testing.T) {
		e := ntHookEnv(t)
		target := newNtHook(t, 200, 0)
		redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.srv.URL, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(redir.Close)
		opts := map[string]string{"URL": redir.URL, "content_type": "json", "data": `{}`}
		if err := e.do(t, e.run("WebHook", "post_webhook", opts, ntAdminCall("", nil))); err != nil {
			t.Fatal(err)
		}
		ntWaitFor(t, "the log line", func() bool { return strings.Contains(e.log.String(), "HTTP 307") })
		if len(target.got()) != 0 {
			t.Error("the redirect was followed")
		}
	})
}

// TestWebHookThroughRun runs a stored definition through Service.Run: a
// failing receiver neither fails nor delays the operation.
func TestWebHookThroughRun(t *testing.T) {
	e := ntHookEnv(t)
	h := newNtHook(t, 503, 0)
	_, err := e.svc.Set(t.Context(), Definition{Name: "hook", Active: true, Position: Post, HandlerModule: "WebHook",
		Action: "post_webhook", Events: []string{"token_init"},
		Options: map[string]string{"URL": h.srv.URL, "content_type": "application/json", "replace": "true", "data": `{"s":"{serial}"}`}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Set(t.Context(), Definition{Name: "bad", Active: true, HandlerModule: "WebHook", Action: "post_webhook",
		Events: []string{"token_init"}, Options: map[string]string{"URL": "ftp://x/", "content_type": "json", "data": "{}"}}, false); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("Set with an ftp URL: %v", err)
	}
	if err := e.svc.Run(t.Context(), Post, ntAdminCall("S-42", nil)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if hit := h.wait(t); string(hit.body) != `{"s":"S-42"}` {
		t.Errorf("body %s", hit.body)
	}
}
