package notify_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
)

func TestProviders(t *testing.T) {
	p := notify.Providers()
	for _, m := range []string{notify.ModuleHTTP, notify.ModuleSMTP, notify.ModuleScript, notify.ModuleSipgate, notify.ModuleSMPP, notify.ModuleFirebase} {
		if _, ok := p[m]; !ok {
			t.Errorf("module %s missing", m)
		}
	}
	if len(p) != 6 {
		t.Errorf("%d modules, want 6", len(p))
	}
	h := p[notify.ModuleHTTP]
	if !h.OptionsAllowed || !h.HeadersAllowed || !h.Parameters["URL"].Required || !h.Parameters["PASSWORD"].Secret ||
		!slices.Equal(h.Parameters["HTTP_METHOD"].Values, []string{"GET", "POST"}) {
		t.Errorf("HTTP provider %+v", h)
	}
	if s := p[notify.ModuleSMTP]; s.OptionsAllowed || s.HeadersAllowed || !s.Parameters["SMTPIDENTIFIER"].Required || s.Parameters["BODY"].Type != "text" {
		t.Errorf("SMTP provider %+v", s)
	}
	raw, err := json.Marshal(p[notify.ModuleScript])
	if err != nil || !bytes.Contains(raw, []byte(`"options_allowed":false`)) || !bytes.Contains(raw, []byte(`"script":{"required":true`)) {
		t.Errorf("script provider JSON %s (%v)", raw, err)
	}
	// Callers get copies.
	h.Parameters["URL"] = notify.ProviderParam{}
	p[notify.ModuleHTTP].Parameters["HTTP_METHOD"].Values[0] = "PUT"
	if q := notify.Providers()[notify.ModuleHTTP]; !q.Parameters["URL"].Required || q.Parameters["HTTP_METHOD"].Values[0] != "GET" {
		t.Error("Providers returned shared state")
	}
}

func httpGateway(name, u string, opts map[string]string) notify.Gateway {
	o := map[string]string{"URL": u, "HTTP_METHOD": "GET"}
	maps.Copy(o, opts)
	return notify.Gateway{Name: name, Module: notify.ModuleHTTP, Options: o}
}

func TestGatewayDefinitions(t *testing.T) {
	const pw, apiSecret, bearer, xkey = "gw-pass-8817", "api-secret-5521", "Bearer tok-9931", "x-key-7742"

	t.Run("RoundTripCensored", func(t *testing.T) {
		e := newEnv(t)
		rev := e.revision(t)
		g := httpGateway("gw1", "https://sms.example.com/api", map[string]string{
			"PASSWORD": pw, "api_secret": apiSecret, "text": "{otp}", "HTTP_METHOD": "POST",
		})
		g.Description = "d"
		g.Headers = map[string]string{"Authorization": bearer, "X-Plain": "visible"}
		id, err := e.s.SetGateway(t.Context(), g)
		if err != nil || id != 1 {
			t.Fatalf("SetGateway = %d, %v", id, err)
		}
		if e.revision(t) != rev+1 {
			t.Error("no config revision bump")
		}
		list, err := e.s.Gateways(t.Context(), 0)
		if err != nil || len(list) != 1 {
			t.Fatalf("Gateways = %v, %v", list, err)
		}
		got := list[0]
		wantOpts := map[string]string{"URL": "https://sms.example.com/api", "HTTP_METHOD": "POST", "PASSWORD": notify.Censored,
			"api_secret": notify.Censored, "text": "{otp}"}
		if got.ID != 1 || got.Name != "gw1" || got.Module != notify.ModuleHTTP || got.Description != "d" ||
			!maps.Equal(got.Options, wantOpts) || !slices.Equal(got.SecretOptions, []string{"PASSWORD", "api_secret"}) ||
			!maps.Equal(got.Headers, map[string]string{"Authorization": notify.Censored, "X-Plain": "visible"}) ||
			!slices.Equal(got.SecretHeaders, []string{"Authorization"}) {
			t.Errorf("got %+v", got)
		}
		snap := e.snapshot(t)
		for _, s := range []string{pw, apiSecret, bearer} {
			if bytes.Contains(snap, []byte(s)) {
				t.Errorf("the store holds %q in clear", s)
			}
		}
	})

	t.Run("ExplicitSecretLists", func(t *testing.T) {
		e := newEnv(t)
		g := httpGateway("gw", "https://sms.example.com/", map[string]string{"PASSWORD": pw, "api_secret": "plain-on-purpose", "token_id": "tid"})
		g.Headers = map[string]string{"X-Key": xkey, "Authorization": "Basic plain"}
		g.SecretHeaders = []string{"X-Key"}
		if _, err := e.s.SetGateway(t.Context(), g); err != nil {
			t.Fatal(err)
		}
		got, _ := e.s.Gateways(t.Context(), 0)
		// PASSWORD is a secret parameter of the module whatever the lists say.
		if !slices.Equal(got[0].SecretOptions, []string{"PASSWORD"}) || !slices.Equal(got[0].SecretHeaders, []string{"X-Key"}) ||
			got[0].Options["api_secret"] != "plain-on-purpose" || got[0].Headers["X-Key"] != notify.Censored {
			t.Errorf("got %+v", got[0])
		}
		if bytes.Contains(e.snapshot(t), []byte(xkey)) {
			t.Error("X-Key in clear")
		}
	})

	t.Run("ReplaceAndKeep", func(t *testing.T) {
		e := newEnv(t)
		ctx := t.Context()
		g := httpGateway("gw", "https://sms.example.com/", map[string]string{"PASSWORD": pw, "old": "1"})
		id1, _ := e.s.SetGateway(ctx, g)
		id2, err := e.s.SetGateway(ctx, httpGateway("other", "https://b.example.com/", nil))
		if err != nil || id1 != 1 || id2 != 2 {
			t.Fatalf("ids %d %d (%v)", id1, id2, err)
		}
		g = httpGateway("gw", "https://sms.example.com/v2", map[string]string{"PASSWORD": notify.Censored, "new": "2"})
		id, err := e.s.SetGateway(ctx, g)
		if err != nil || id != 1 {
			t.Fatalf("update = %d, %v", id, err)
		}
		got, _ := e.s.Gateways(ctx, 1)
		if len(got) != 1 || got[0].Options["PASSWORD"] != notify.Censored || got[0].Options["new"] != "2" ||
			got[0].Options["URL"] != "https://sms.example.com/v2" {
			t.Fatalf("got %+v", got)
		}
		if _, ok := got[0].Options["old"]; ok {
			t.Error("absent option not deleted")
		}
		if l, _ := e.s.Gateways(ctx, 99); len(l) != 0 {
			t.Errorf("unknown id gives %v", l)
		}
		// The placeholder for a key with nothing stored is refused.
		g.Options["fresh"] = notify.Censored
		_, err = e.s.SetGateway(ctx, g)
		wantCode(t, err, apierr.Parameter)
	})

	t.Run("Validation", func(t *testing.T) {
		e := newEnv(t)
		cases := []struct {
			name string
			g    notify.Gateway
			code apierr.Code
		}{
			{"NoName", httpGateway("", "https://a/", nil), apierr.Parameter},
			{"UnknownModule", notify.Gateway{Name: "g", Module: "privacyidea.lib.smsprovider.Nope.Nope"}, apierr.Parameter},
			{"NoModule", notify.Gateway{Name: "g"}, apierr.Parameter},
			{"MissingURL", notify.Gateway{Name: "g", Module: notify.ModuleHTTP, Options: map[string]string{"HTTP_METHOD": "GET"}}, apierr.Parameter},
			{"MissingMethod", notify.Gateway{Name: "g", Module: notify.ModuleHTTP, Options: map[string]string{"URL": "https://a/"}}, apierr.Parameter},
			{"BadMethod", httpGateway("g", "https://a/", map[string]string{"HTTP_METHOD": "PUT"}), apierr.Parameter},
			{"BadScheme", httpGateway("g", "file:///etc/passwd", nil), apierr.Parameter},
			{"BadCheckSSL", httpGateway("g", "https://a/", map[string]string{"CHECK_SSL": "maybe"}), apierr.Parameter},
			{"BadRegexp", httpGateway("g", "https://a/", map[string]string{"REGEXP": "/[/x/"}), apierr.Parameter},
			{"RegexpNotSlashed", httpGateway("g", "https://a/", map[string]string{"REGEXP": "^0"}), apierr.Parameter},
			{"BadTimeout", httpGateway("g", "https://a/", map[string]string{"TIMEOUT": "-1"}), apierr.Parameter},
			{"BadProxy", httpGateway("g", "https://a/", map[string]string{"HTTPS_PROXY": "ftp://proxy"}), apierr.Parameter},
			{"HeaderInjection", notify.Gateway{Name: "g", Module: notify.ModuleHTTP, Options: map[string]string{"URL": "https://a/", "HTTP_METHOD": "GET"},
				Headers: map[string]string{"X-A": "v\r\nX-Evil: 1"}}, apierr.Parameter},
			{"BadHeaderName", notify.Gateway{Name: "g", Module: notify.ModuleHTTP, Options: map[string]string{"URL": "https://a/", "HTTP_METHOD": "GET"},
				Headers: map[string]string{"X A": "v"}}, apierr.Parameter},
			{"SMTPWithoutServer", notify.Gateway{Name: "g", Module: notify.ModuleSMTP, Options: map[string]string{"MAILTO": "a@b.c", "SMTPIDENTIFIER": "nope"}}, apierr.Parameter},
			{"SMTPWithoutMailto", notify.Gateway{Name: "g", Module: notify.ModuleSMTP, Options: map[string]string{"SMTPIDENTIFIER": "nope"}}, apierr.Parameter},
			{"ScriptsDisabled", notify.Gateway{Name: "g", Module: notify.ModuleScript, Options: map[string]string{"script": "x.sh", "background": "wait"}}, apierr.ConfigAdmin},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, err := e.s.SetGateway(t.Context(), tc.g)
				wantCode(t, err, tc.code)
			})
		}
		if l, _ := e.s.Gateways(t.Context(), 0); len(l) != 0 {
			t.Errorf("refused gateways stored: %v", l)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		e := newEnv(t)
		ctx := t.Context()
		_, err := e.s.DeleteGateway(ctx, "nope")
		wantCode(t, err, apierr.ResourceNotFound)
		_, _ = e.s.SetGateway(ctx, httpGateway("a", "https://a/", nil))
		g := httpGateway("b", "https://b/", map[string]string{"x": "1"})
		g.Headers = map[string]string{"X-H": "h"}
		id, _ := e.s.SetGateway(ctx, g)

		rev := e.revision(t)
		if n, err := e.s.DeleteGatewayOption(ctx, id, "x"); err != nil || n != id {
			t.Fatalf("DeleteGatewayOption = %d, %v", n, err)
		}
		if n, err := e.s.DeleteGatewayOption(ctx, id, "header.X-H"); err != nil || n != id {
			t.Fatalf("DeleteGatewayOption header = %d, %v", n, err)
		}
		if e.revision(t) != rev+2 {
			t.Error("option deletes did not bump the revision")
		}
		got, _ := e.s.Gateways(ctx, id)
		if _, ok := got[0].Options["x"]; ok || len(got[0].Headers) != 0 {
			t.Errorf("after option deletes: %+v", got[0])
		}
		_, err = e.s.DeleteGatewayOption(ctx, id, "x")
		wantCode(t, err, apierr.ResourceNotFound)
		_, err = e.s.DeleteGatewayOption(ctx, 99, "x")
		wantCode(t, err, apierr.ResourceNotFound)

		if n, err := e.s.DeleteGateway(ctx, "b"); err != nil || n != id {
			t.Fatalf("DeleteGateway = %d, %v", n, err)
		}
		if l, _ := e.s.Gateways(ctx, 0); len(l) != 1 || l[0].Name != "a" {
			t.Errorf("left: %v", l)
		}
	})

	t.Run("UnsupportedModules", func(t *testing.T) {
		e := newEnv(t)
		_, err := e.s.SetGateway(t.Context(), notify.Gateway{Name: "sip", Module: notify.ModuleSipgate, Options: map[string]string{"USERNAME": "u", "PASSWORD": pw}})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := e.s.Gateways(t.Context(), 0)
		if got[0].Options["PASSWORD"] != notify.Censored {
			t.Errorf("got %+v", got[0])
		}
		err = e.s.SendSMS(t.Context(), "sip", "+49170", "code")
		wantSendFailed(t, err, pw)
		if !strings.Contains(err.Error(), "not supported") {
			t.Errorf("err %v", err)
		}
		wantCode(t, e.s.SendSMS(t.Context(), "nope", "+49170", "code"), apierr.ResourceNotFound)
	})
}

// gatewayHit is one request the fake HTTP gateway received.
type gatewayHit struct {
	Method      string
	Path        string
	Query       url.Values
	Form        url.Values
	ContentType string
	Body        []byte
	Header      http.Header
	User, Pass  string
	HasAuth     bool
}

// fakeGateway is an httptest SMS gateway: it records requests and answers
// with status and body, after delay (cut short when the client leaves).
type fakeGateway struct {
	srv    *httptest.Server
	mu     sync.Mutex
	hits   []gatewayHit
	status int
	body   string
	delay  time.Duration
}

func newFakeGateway(t *testing.T) *fakeGateway {
	t.Helper()
	f := &fakeGateway{status: 200, body: "OK"}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGateway) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/loop" {
		http.Redirect(w, r, "/loop", http.StatusFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	h := gatewayHit{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), ContentType: r.Header.Get("Content-Type"), Body: body, Header: r.Header.Clone()}
	if strings.HasPrefix(h.ContentType, "application/x-www-form-urlencoded") {
		h.Form, _ = url.ParseQuery(string(body))
	}
	h.User, h.Pass, h.HasAuth = r.BasicAuth()
	f.mu.Lock()
	f.hits = append(f.hits, h)
	status, answer, delay := f.status, f.body, f.delay
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

func (f *fakeGateway) set(status int, body string, delay time.Duration) {
	f.mu.Lock()
	f.status, f.body, f.delay = status, body, delay
	f.mu.Unlock()
}

func (f *fakeGateway) last(t *testing.T) gatewayHit {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.hits) == 0 {
		t.Fatal("the gateway received nothing")
	}
	return f.hits[len(f.hits)-1]
}

func (f *fakeGateway) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hits)
}

func TestSMSHTTP(t *testing.T) {
	const text = `Code 123456 & more=1 "quoted" {phone} \n`
	const phone = "+49 170 1234567"

	setup := func(t *testing.T, opts map[string]string, headers map[string]string) (*env, *fakeGateway) {
		t.Helper()
		e := newEnv(t)
		f := newFakeGateway(t)
		g := httpGateway("gw", f.srv.URL+"/send?fixed=1", opts)
		g.Headers = headers
		if _, err := e.s.SetGateway(t.Context(), g); err != nil {
			t.Fatal(err)
		}
		return e, f
	}

	t.Run("GET", func(t *testing.T) {
		e, f := setup(t, map[string]string{"to": "{phone}", "msg": "{otp}", "from": "authsrv"}, map[string]string{"X-Api-Key": "k1"})
		if err := e.s.SendSMS(t.Context(), "gw", phone, text); err != nil {
			t.Fatal(err)
		}
		h := f.last(t)
		if h.Method != "GET" || h.Path != "/send" || h.Query.Get("fixed") != "1" || h.Query.Get("to") != phone ||
			h.Query.Get("msg") != text || h.Query.Get("from") != "authsrv" || h.Header.Get("X-Api-Key") != "k1" || h.HasAuth {
			t.Errorf("hit %+v", h)
		}
		if strings.Contains(e.log.String(), "123456") {
			t.Error("the message text is in the log")
		}
	})

	t.Run("POSTForm", func(t *testing.T) {
		e, f := setup(t, map[string]string{"HTTP_METHOD": "POST", "to": "{phone}", "msg": "{otp}"}, nil)
		if err := e.s.SendSMS(t.Context(), "gw", phone, text); err != nil {
			t.Fatal(err)
		}
		h := f.last(t)
		if h.Method != "POST" || h.Form.Get("to") != phone || h.Form.Get("msg") != text || h.Query.Get("msg") != "" {
			t.Errorf("hit %+v body %s", h, h.Body)
		}
	})

	t.Run("POSTJSON", func(t *testing.T) {
		e, f := setup(t, map[string]string{
			"HTTP_METHOD": "POST", "SEND_DATA_AS_JSON": "yes", "to": "{phone}", "msg": "{otp}",
			"meta": `{"lang":"de","text":"{otp}","list":["{phone}",1]}`, "count": "3",
		}, map[string]string{"X-Api-Key": "k2"})
		if err := e.s.SendSMS(t.Context(), "gw", phone, text); err != nil {
			t.Fatal(err)
		}
		h := f.last(t)
		var got map[string]any
		if err := json.Unmarshal(h.Body, &got); err != nil || h.ContentType != "application/json" {
			t.Fatalf("body %s (%v), content type %q", h.Body, err, h.ContentType)
		}
		meta, _ := got["meta"].(map[string]any)
		list, _ := meta["list"].([]any)
		if got["to"] != phone || got["msg"] != text || got["count"] != float64(3) || meta["lang"] != "de" || meta["text"] != text ||
			len(list) != 2 || list[0] != phone || h.Header.Get("X-Api-Key") != "k2" {
			t.Errorf("JSON %s", h.Body)
		}
	})

	t.Run("BasicAuthAndKeptPassword", func(t *testing.T) {
		e, f := setup(t, map[string]string{"USERNAME": "gwuser", "PASSWORD": "gw-pw-4410"}, nil)
		if err := e.s.SendSMS(t.Context(), "gw", phone, text); err != nil {
			t.Fatal(err)
		}
		if h := f.last(t); h.User != "gwuser" || h.Pass != "gw-pw-4410" {
			t.Errorf("basic auth %q %q", h.User, h.Pass)
		}
		g := httpGateway("gw", f.srv.URL+"/send", map[string]string{"USERNAME": "gwuser", "PASSWORD": notify.Censored})
		if _, err := e.s.SetGateway(t.Context(), g); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SendSMS(t.Context(), "gw", phone, text); err != nil {
			t.Fatal(err)
		}
		if h := f.last(t); h.Pass != "gw-pw-4410" {
			t.Errorf("kept password %q", h.Pass)
		}
		if strings.Contains(e.log.String(), "gw-pw-4410") || bytes.Contains(e.snapshot(t), []byte("gw-pw-4410")) {
			t.Error("password in the log or in clear in the store")
		}
	})

	t.Run("URLUserinfo", func(t *testing.T) {
		e := newEnv(t)
		f := newFakeGateway(t)
		u, _ := url.Parse(f.srv.URL + "/send")
		u.User = url.UserPassword("urluser", "urlpw")
		if _, err := e.s.SetGateway(t.Context(), httpGateway("gw", u.String(), nil)); err != nil {
			t.Fatal(err)
		}
		if err := e.s.SendSMS(t.Context(), "gw", phone, text); err != nil {
			t.Fatal(err)
		}
		if h := f.last(t); h.User != "urluser" || h.Pass != "urlpw" {
			t.Errorf("basic auth %q %q", h.User, h.Pass)
		}
	})

	t.Run("Regexp", func(t *testing.T) {
		for _, tc := range []struct{ rx, in, want string }{
			{"/^0/0049/", "0170123", "0049170123"},
			{"/[+ ]//", "+49 170 123", "49170123"},
			{`/^\+(\d+) (.*)$/00\1-\2/`, "+49 170", "0049-170"},
			{"/^/$/", "1", "$1"},
		} {
			t.Run(tc.rx, func(t *testing.T) {
				e, f := setup(t, map[string]string{"REGEXP": tc.rx, "to": "{phone}"}, nil)
				if err := e.s.SendSMS(t.Context(), "gw", tc.in, "x"); err != nil {
					t.Fatal(err)
				}
				if got := f.last(t).Query.Get("to"); got != tc.want {
					t.Errorf("phone %q, want %q", got, tc.want)
				}
			})
		}
	})

	t.Run("Answers", func(t *testing.T) {
		const remote = "internal-detail-XYZ-gateway-answer"
		cases := []struct {
			name    string
			opts    map[string]string
			status  int
			body    string
			wantErr string
		}{
			{"200", nil, 200, remote, ""},
			{"201", nil, 201, remote, ""},
			{"202", nil, 202, remote, ""},
			{"500", nil, 500, remote, "HTTP status 500"},
			{"204", nil, 204, "", "HTTP status 204"},
			{"404", nil, 404, remote, "HTTP status 404"},
			{"SuccessPresent", map[string]string{"RETURN_SUCCESS": "SENT"}, 200, "status=SENT id=1", ""},
			{"SuccessMissing", map[string]string{"RETURN_SUCCESS": "SENT"}, 200, remote, "does not report success"},
			{"FailPresent", map[string]string{"RETURN_FAIL": "ERROR"}, 200, "ERROR " + remote, "reports a failure"},
			{"FailAbsent", map[string]string{"RETURN_FAIL": "ERROR"}, 200, "fine", ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e, f := setup(t, tc.opts, nil)
				f.set(tc.status, tc.body, 0)
				err := e.s.SendSMS(t.Context(), "gw", phone, "secret-otp-778899")
				if tc.wantErr == "" {
					if err != nil {
						t.Fatal(err)
					}
					return
				}
				wantSendFailed(t, err, remote, "secret-otp-778899", f.srv.URL)
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err %v, want %q", err, tc.wantErr)
				}
				if f.count() != 1 {
					t.Errorf("%d requests, want exactly 1 (no retry)", f.count())
				}
			})
		}
	})

	t.Run("SlowGatewayCutAtTimeout", func(t *testing.T) {
		e, f := setup(t, map[string]string{"TIMEOUT": "1", "msg": "{otp}"}, nil)
		f.set(200, "OK", 30*time.Second)
		err := within(t, 2500*time.Millisecond, func() error { return e.s.SendSMS(t.Context(), "gw", phone, "otp-5566") })
		wantSendFailed(t, err, "otp-5566", f.srv.URL)
		if !strings.Contains(err.Error(), "did not answer in time") || f.count() != 1 {
			t.Errorf("err %v, %d requests", err, f.count())
		}
	})

	t.Run("DefaultTimeout3s", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits 3 s")
		}
		e, f := setup(t, nil, nil)
		f.set(200, "OK", 30*time.Second)
		start := time.Now()
		err := e.s.SendSMS(t.Context(), "gw", phone, "x")
		if d := time.Since(start); d < 2900*time.Millisecond || d > 4500*time.Millisecond {
			t.Errorf("took %v, want about 3 s", d)
		}
		wantSendFailed(t, err)
	})

	t.Run("RedirectLoop", func(t *testing.T) {
		e := newEnv(t)
		f := newFakeGateway(t)
		_, _ = e.s.SetGateway(t.Context(), httpGateway("gw", f.srv.URL+"/loop", nil))
		err := e.s.SendSMS(t.Context(), "gw", phone, "x")
		wantSendFailed(t, err)
		if !strings.Contains(err.Error(), "redirected too often") {
			t.Errorf("err %v", err)
		}
	})

	t.Run("ClosedPort", func(t *testing.T) {
		e := newEnv(t)
		_, _ = e.s.SetGateway(t.Context(), httpGateway("gw", "http://127.0.0.1:"+itoa(closedPort(t))+"/send", map[string]string{"msg": "{otp}"}))
		err := within(t, 2*time.Second, func() error { return e.s.SendSMS(t.Context(), "gw", phone, "otp-1212") })
		wantSendFailed(t, err, "otp-1212", "127.0.0.1")
		if !strings.Contains(err.Error(), "could not be reached") {
			t.Errorf("err %v", err)
		}
	})

	t.Run("BadPhone", func(t *testing.T) {
		e, f := setup(t, nil, nil)
		wantCode(t, e.s.SendSMS(t.Context(), "gw", "+49\r\n170", "x"), apierr.Parameter)
		wantCode(t, e.s.SendSMS(t.Context(), "gw", "", "x"), apierr.Parameter)
		if f.count() != 0 {
			t.Error("sent anyway")
		}
	})
}

func TestSMSSMTP(t *testing.T) {
	e := newEnv(t)
	k := newSink(t, nil, false, false, nil)
	if err := e.s.SetSMTP(t.Context(), smtpDef(k, "m")); err != nil {
		t.Fatal(err)
	}
	_, err := e.s.SetGateway(t.Context(), notify.Gateway{Name: "mailgw", Module: notify.ModuleSMTP, Options: map[string]string{
		"MAILTO": "{phone}@sms.example.com", "SMTPIDENTIFIER": "m", "SUBJECT": "SMS for {phone}", "BODY": "Text: {otp}", "REGEXP": "/[+ ]//",
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.s.SetGateway(t.Context(), notify.Gateway{Name: "defaults", Module: notify.ModuleSMTP, Options: map[string]string{
		"MAILTO": "sms@example.com", "SMTPIDENTIFIER": "m",
	}})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("Tags", func(t *testing.T) {
		if err := e.s.SendSMS(t.Context(), "mailgw", "+49 170 1", "Code 4711"); err != nil {
			t.Fatal(err)
		}
		msgs := k.messages()
		m := msgs[len(msgs)-1]
		p := parseMsg(t, m.Data)
		if !slices.Equal(m.To, []string{"491701@sms.example.com"}) || p.Header.Get("Subject") != "SMS for 491701" ||
			strings.TrimSpace(p.Body) != "Text: Code 4711" {
			t.Errorf("to %v subject %q body %q", m.To, p.Header.Get("Subject"), p.Body)
		}
	})

	t.Run("Defaults", func(t *testing.T) {
		if err := e.s.SendSMS(t.Context(), "defaults", "+49170", "Code 99"); err != nil {
			t.Fatal(err)
		}
		msgs := k.messages()
		p := parseMsg(t, msgs[len(msgs)-1].Data)
		if p.Header.Get("Subject") != "+49170" || strings.TrimSpace(p.Body) != "Code 99" {
			t.Errorf("subject %q body %q", p.Header.Get("Subject"), p.Body)
		}
	})

	t.Run("Injection", func(t *testing.T) {
		n := len(k.messages())
		// A phone with a line break is refused before any provider; one
		// that makes MAILTO invalid is refused by the address check.
		wantCode(t, e.s.SendSMS(t.Context(), "mailgw", "1\r\nBcc: x@evil", "x"), apierr.Parameter)
		wantCode(t, e.s.SendSMS(t.Context(), "mailgw", "a>,<x@evil", "x"), apierr.Parameter)
		if len(k.messages()) != n {
			t.Error("sent anyway")
		}
	})
}

// The default dial policy (nil) refuses the loopback SMTP server, HTTP
// gateway and RADIUS server before connecting: none of them sees a
// connection, and the error names the address and the rule.
func TestDialPolicy(t *testing.T) {
	e := newEnv(t, func(c *notify.Config) { c.Dial = nil })
	k := newSink(t, nil, false, false, nil)
	f := newFakeGateway(t)
	r := newFakeRadius(t, "radius-secret", false)
	_ = e.s.SetSMTP(t.Context(), smtpDef(k, "m"))
	_, _ = e.s.SetGateway(t.Context(), httpGateway("gw", f.srv.URL+"/send", nil))
	_ = e.s.SetRadius(t.Context(), notify.RadiusServer{Identifier: "rad", Server: "127.0.0.1", Port: r.port(), Secret: "radius-secret", Timeout: 1, Retries: 1})
	wantRefused := func(t *testing.T, err error) {
		t.Helper()
		wantCode(t, err, apierr.ConfigAdmin)
		if err == nil || !strings.Contains(err.Error(), "connection to 127.0.0.1:") ||
			!strings.Contains(err.Error(), "the address is in a range the server does not dial (loopback); allow it with -allow-dial") {
			t.Errorf("err = %v", err)
		}
		if !errors.Is(err, netguard.ErrRefused) {
			t.Error("not ErrRefused")
		}
	}

	t.Run("SMTP", func(t *testing.T) {
		err := e.s.SendMail(t.Context(), "m", notify.Mail{To: []string{"a@b.c"}, Subject: "s", Body: "b"})
		wantSendFailed(t, err)
		wantRefused(t, err)
		if len(k.messages()) != 0 {
			t.Error("mail sent")
		}
	})
	t.Run("HTTP", func(t *testing.T) {
		err := e.s.SendSMS(t.Context(), "gw", "1", "x")
		wantSendFailed(t, err)
		wantRefused(t, err)
		if f.count() != 0 {
			t.Error("request sent")
		}
	})
	t.Run("RADIUS", func(t *testing.T) {
		_, err := e.s.TestRadius(t.Context(), "rad", "alice", "right")
		wantRefused(t, err)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.requests != 0 {
			t.Errorf("the RADIUS server got %d requests", r.requests)
		}
	})
}

// Through a proxy (the gateway's PROXY option, on an allowed address) a
// gateway URL on a refused address is refused before the request goes to
// the proxy.
func TestDialPolicyProxy(t *testing.T) {
	var hits atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("OK"))
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = proxy.Serve(ln) }()
	t.Cleanup(func() { _ = proxy.Close() })
	e := newEnv(t, func(c *notify.Config) { c.Dial = netguard.MustParse("127.0.0.2/32") })
	for i, target := range []string{"http://127.0.0.1:9/send", "http://0x7f000001/send", "http://169.254.169.254/"} {
		name := "gw" + itoa(i)
		_, _ = e.s.SetGateway(t.Context(), httpGateway(name, target, map[string]string{"PROXY": "http://" + ln.Addr().String()}))
		err := e.s.SendSMS(t.Context(), name, "1", "x")
		wantSendFailed(t, err)
		if !errors.Is(err, netguard.ErrRefused) || !strings.Contains(err.Error(), "the gateway could not be reached: connection to ") {
			t.Errorf("%s: %v", target, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the proxy got %d requests", n)
	}
}
