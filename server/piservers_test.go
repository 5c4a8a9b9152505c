package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/authsrv/authsrv/audit"
)

// piRemote is a remote privacyIDEA server on loopback whose /validate/check
// accepts alice with "remote-Pass-7"; it records the forms it got.
func piRemote(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.PostForm.Encode())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		ok := r.URL.Path == "/validate/check" && r.PostForm.Get("user") == "alice" && r.PostForm.Get("pass") == "remote-Pass-7"
		if ok {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","result":{"status":true,"value":true}}`)
			return
		}
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","result":{"status":true,"value":false}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
}

func TestPIServerAPI(t *testing.T) {
	remote, hits := piRemote(t)
	e := newEnv(t)
	tok := e.login(t)
	audits := func() int {
		t.Helper()
		res, err := e.s.Audit().Search(t.Context(), audit.Query{PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		return res.Count
	}

	// Empty list: an empty object.
	if v := wantOK(t, e.admin(t, tok, "GET", "/privacyideaserver/", "")); len(v.(map[string]any)) != 0 {
		t.Errorf("empty list: %v", v)
	}
	before := audits()
	if v := wantOK(t, e.admin(t, tok, "POST", "/privacyideaserver/remote%201", form("url", remote.URL+"/", "description", "child"))); v != true {
		t.Fatalf("POST = %v", v)
	}
	if n := audits() - before; n != 1 {
		t.Errorf("POST wrote %d audit entries, want 1", n)
	}
	wantOK(t, e.admin(t, tok, "POST", "/privacyideaserver/insecure", `{"url":"https://pi.example.com","tls":"0"}`))
	list := wantOK(t, e.admin(t, tok, "GET", "/privacyideaserver/", "")).(map[string]any)
	r1, _ := list["remote_1"].(map[string]any)
	if len(list) != 2 || r1 == nil || r1["url"] != remote.URL || r1["tls"] != true || r1["description"] != "child" {
		t.Errorf("GET /privacyideaserver/: %v", list)
	}
	if id, ok := r1["id"].(float64); !ok || id <= 0 {
		t.Errorf("id %v", r1["id"])
	}
	if at(list, "insecure.tls") != false || at(list, "insecure.description") != "" {
		t.Errorf("tls 0: %v", list["insecure"])
	}
	// A change keeps the id.
	wantOK(t, e.admin(t, tok, "POST", "/privacyideaserver/remote_1", form("url", remote.URL, "tls", "1")))
	if l2 := wantOK(t, e.admin(t, tok, "GET", "/privacyideaserver", "")).(map[string]any); at(l2, "remote_1.id") != r1["id"] || at(l2, "remote_1.description") != "" {
		t.Errorf("after change: %v (before %v)", l2["remote_1"], r1)
	}

	wantError(t, e.admin(t, tok, "POST", "/privacyideaserver/bad", form("description", "no url")), 400, 905, "ERR905: Missing parameter: url")
	if r := e.admin(t, tok, "POST", "/privacyideaserver/bad", form("url", "ftp://pi.example.com")); r.status != 400 || at(r.json, "result.error.code") != float64(905) {
		t.Errorf("ftp url: %d %s", r.status, r.body)
	}

	// The test request uses the inline definition.
	test := func(pass string) any {
		t.Helper()
		return wantOK(t, e.admin(t, tok, "POST", "/privacyideaserver/test_request",
			form("identifier", "x", "url", remote.URL, "tls", "0", "username", "alice", "password", pass)))
	}
	if v := test("remote-Pass-7"); v != true {
		t.Errorf("accepted: %v", v)
	}
	if v := test("wrong"); v != false {
		t.Errorf("rejected: %v", v)
	}
	if h := hits(); len(h) != 2 || h[0] != "POST /validate/check pass=remote-Pass-7&user=alice" {
		t.Errorf("remote got %q", h)
	}
	wantError(t, e.admin(t, tok, "POST", "/privacyideaserver/test_request", form("identifier", "x", "url", remote.URL, "password", "p")),
		400, 905, "ERR905: Missing parameter: username")
	// Nothing answers: an error, not false.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	r := e.admin(t, tok, "POST", "/privacyideaserver/test_request", form("identifier", "x", "url", deadURL, "username", "alice", "password", "p"))
	if r.status != 400 || at(r.json, "result.error.code") != float64(302) {
		t.Errorf("unreachable: %d %s", r.status, r.body)
	}
	if strings.Contains(e.log.String(), "remote-Pass-7") {
		t.Error("the test password is in the log")
	}
	res, err := e.s.Audit().Search(t.Context(), audit.Query{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) == 0 {
		t.Fatal("no audit entries")
	}
	for _, row := range res.Rows {
		if strings.Contains(fmt.Sprint(row), "remote-Pass-7") {
			t.Errorf("the test password is in the audit: %v", row)
		}
	}

	if v := wantOK(t, e.admin(t, tok, "DELETE", "/privacyideaserver/remote_1", "")); v != true {
		t.Errorf("DELETE = %v", v)
	}
	wantError(t, e.admin(t, tok, "DELETE", "/privacyideaserver/remote_1", ""), 404, 601, "ERR601: The requested privacyIDEAServer could not be found.")
	if l3 := wantOK(t, e.admin(t, tok, "GET", "/privacyideaserver/", "")).(map[string]any); len(l3) != 1 || l3["insecure"] == nil {
		t.Errorf("after delete: %v", l3)
	}
}

func TestPIServerRights(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/privacyideaserver/p1", form("url", "https://pi.example.com")))
	// From now on admin may only read them.
	wantOK(t, e.admin(t, tok, "POST", "/policy/readonly", `{"scope":"admin","action":"privacyideaserver_read, policywrite","adminuser":"admin"}`))
	if list := wantOK(t, e.admin(t, tok, "GET", "/privacyideaserver/", "")).(map[string]any); list["p1"] == nil {
		t.Errorf("read: %v", list)
	}
	const denied = "ERR303: Admin actions are defined, but the action privacyideaserver_write is not allowed!"
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/privacyideaserver/p2", form("url", "https://pi.example.com")},
		{"POST", "/privacyideaserver/p2", ""},
		{"DELETE", "/privacyideaserver/p1", ""},
		{"POST", "/privacyideaserver/test_request", form("identifier", "p1", "url", "https://pi.example.com", "username", "u", "password", "p")},
	} {
		if r := e.admin(t, tok, c.method, c.path, c.body); r.status != 403 || at(r.json, "result.error.message") != denied {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
	// Write only: the read is refused.
	wantOK(t, e.admin(t, tok, "POST", "/policy/readonly", `{"scope":"admin","action":"privacyideaserver_write, policywrite","adminuser":"admin"}`))
	if r := e.admin(t, tok, "GET", "/privacyideaserver/", ""); r.status != 403 ||
		at(r.json, "result.error.message") != "ERR303: Admin actions are defined, but the action privacyideaserver_read is not allowed!" {
		t.Errorf("read without the right: %d %s", r.status, r.body)
	}
	wantOK(t, e.admin(t, tok, "DELETE", "/privacyideaserver/p1", ""))
}
