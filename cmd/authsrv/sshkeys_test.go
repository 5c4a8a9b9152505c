package main

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/testsvc"
)

const (
	testSSHPassword = "s3cret-admin-pw"
	testSSHJWT      = "eyJhbGciOiJIUzI1NiJ9.test-jwt.signature"
)

// passwordFile writes pw to a file of mode perm and returns its path.
func passwordFile(t *testing.T, pw string, perm os.FileMode) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(f, []byte(pw), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, perm); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSSHKeysRefusesBadSettings: each bad setting is refused with a
// message before any connection to the server.
func TestSSHKeysRefusesBadSettings(t *testing.T) {
	ln := testsvc.NewCountingListener(t)
	srv := fmt.Sprintf("http://127.0.0.1:%d", ln.Port())
	good := passwordFile(t, testSSHPassword+"\n", 0o600)
	cases := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"no user", nil, []string{"-url", srv, "-admin", "a", "-password-file", good}, 2, "usage: authsrv ssh-keys"},
		{"two users", nil, []string{"-url", srv, "-admin", "a", "-password-file", good, "root", "bob"}, 2, "usage: authsrv ssh-keys"},
		{"no admin", nil, []string{"-url", srv, "-password-file", good, "root"}, 1, "-admin is required"},
		{"no password", nil, []string{"-url", srv, "-admin", "a", "root"}, 1, "no password: give -password-file or set AUTHSRV_SSH_KEYS_PASSWORD"},
		{"password file missing", nil, []string{"-url", srv, "-admin", "a", "-password-file", good + ".none", "root"}, 1, "-password-file: open"},
		{"password file readable by all", nil, []string{"-url", srv, "-admin", "a", "-password-file", passwordFile(t, "pw\n", 0o644), "root"}, 1, "accessible to every user (mode 0644)"},
		{"password file empty", nil, []string{"-url", srv, "-admin", "a", "-password-file", passwordFile(t, "\nsecond\n", 0o600), "root"}, 1, "the first line is empty"},
		{"password file too long", nil, []string{"-url", srv, "-admin", "a", "-password-file", passwordFile(t, strings.Repeat("x", 5000), 0o600), "root"}, 1, "longer than 4096 bytes"},
		{"plain http to another host", nil, []string{"-url", "http://192.0.2.1:8080", "-admin", "a", "-password-file", good, "root"}, 1, "plain http only to a loopback address"},
		{"password in the url", nil, []string{"-url", "http://admin:" + testSSHPassword + "@127.0.0.1:1", "-admin", "a", "-password-file", good, "root"}, 1, "no user or password in the address"},
		{"not http", nil, []string{"-url", "ftp://127.0.0.1", "-admin", "a", "-password-file", good, "root"}, 1, "want http:// or https://"},
		{"query in the url", nil, []string{"-url", srv + "/?x=1", "-admin", "a", "-password-file", good, "root"}, 1, "no query or fragment"},
		{"ca file missing", nil, []string{"-url", srv, "-ca-file", good + ".none", "-admin", "a", "-password-file", good, "root"}, 1, "-ca-file: open"},
		{"ca file not pem", nil, []string{"-url", srv, "-ca-file", good, "-admin", "a", "-password-file", good, "root"}, 1, "no PEM certificate"},
		{"user with a line break", nil, []string{"-url", srv, "-admin", "a", "-password-file", good, "ro\not"}, 1, "control characters"},
		{"empty user", nil, []string{"-url", srv, "-admin", "a", "-password-file", good, ""}, 1, "the unix user is empty"},
		{"bad timeout", nil, []string{"-url", srv, "-admin", "a", "-password-file", good, "-timeout", "0s", "root"}, 1, "-timeout 0s"},
		{"bad url from the environment", map[string]string{"AUTHSRV_URL": "http://192.0.2.1"}, []string{"-admin", "a", "-password-file", good, "root"}, 1, "plain http only to a loopback address"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := cli(t, c.env, "", append([]string{"ssh-keys"}, c.args...)...)
			if code != c.code || !strings.Contains(errs, c.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and %q", code, out, errs, c.code, c.want)
			}
			if strings.Contains(errs, testSSHPassword) {
				t.Errorf("the password is in the message: %q", errs)
			}
		})
	}
	if n := ln.Accepted(); n != 0 {
		t.Errorf("%d connections to the server; want none", n)
	}
}

// fakeAuthServer answers /auth for admin/testSSHPassword with testSSHJWT
// and /machine/authitem/ssh with authitem (a status and a body); it
// records the queries it got. It stands in for server answers the real
// server never gives (hostile or broken ones); the real server is in
// TestSSHKeysWithSSHD.
type fakeAuthServer struct {
	*httptest.Server
	queries chan url.Values
}

func newFakeAuthServer(t *testing.T, tlsServer bool, status int, authitem string) *fakeAuthServer {
	t.Helper()
	f := &fakeAuthServer{queries: make(chan url.Values, 10)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /auth", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.PostFormValue("username") != "admin" || r.PostFormValue("password") != testSSHPassword {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"result":{"status":false,"error":{"code":4031,"message":"Authentication failure. Wrong credentials"}}}`))
			return
		}
		_, _ = fmt.Fprintf(w, `{"result":{"status":true,"value":{"token":%q,"role":"admin"}}}`, testSSHJWT)
	})
	mux.HandleFunc("GET /machine/authitem/ssh", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != testSSHJWT {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"result":{"status":false,"error":{"code":4033,"message":"Authentication failure. Missing Authorization header."}}}`))
			return
		}
		f.queries <- r.URL.Query()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(authitem))
	})
	mux.HandleFunc("/moved/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/auth", http.StatusTemporaryRedirect)
	})
	f.Server = httptest.NewUnstartedServer(mux)
	if tlsServer {
		f.StartTLS()
	} else {
		f.Start()
	}
	t.Cleanup(f.Close)
	return f
}

func sshItems(items ...map[string]any) string {
	b, _ := json.Marshal(map[string]any{"result": map[string]any{"status": true, "value": map[string]any{"ssh": items}}})
	return string(b)
}

// TestSSHKeysAnswers: the command prints exactly the valid key lines for
// the asked user, nothing for {}, and fails with a short message (never
// the password or the JWT) on every broken answer.
func TestSSHKeysAnswers(t *testing.T) {
	_, key1 := testsvc.NewSSHKey(t, "alice@laptop")
	_, key2 := testsvc.NewSSHKey(t, "")
	item := func(key, user string) map[string]any {
		return map[string]any{"sshkey": key, "username": "alice", "user": user, "service_id": "webserver", "serial": nil}
	}
	pw := passwordFile(t, testSSHPassword+"\r\n", 0o600)
	cases := []struct {
		name    string
		status  int
		body    string
		path    string // appended to the server address in -url
		env     map[string]string
		code    int
		out     string
		errPart string
	}{
		{name: "nothing attached", status: 200, body: `{"result":{"status":true,"value":{}}}`, code: 0},
		{name: "empty list", status: 200, body: sshItems(), code: 0},
		{name: "keys", status: 200, body: sshItems(item(key1, "root"), item(key2, "root")), code: 0, out: key1 + "\n" + key2 + "\n"},
		{name: "password from the environment", status: 200, body: sshItems(item(key1, "root")), env: map[string]string{SSHKeysPasswordEnv: testSSHPassword}, code: 0, out: key1 + "\n"},
		{name: "bad items skipped", status: 200, body: sshItems(
			item(key1, "root"),
			item(key1, "root"),                                               // duplicate
			item(key2, "bob"),                                                // another unix user
			item(`command="/bin/sh" `+key2, "root"),                          // options
			item(key2+"\nssh-ed25519 AAAA x", "root"),                        // two lines
			item("ssh-ed25519 AAAAnotbase64", "root"),                        // no key
			item(strings.Replace(key2, "ssh-ed25519", "ssh-rsa", 1), "root"), // wrong type name
		), code: 0, out: key1 + "\n", errPart: "item 2 skipped: it is for the unix user \"bob\""},
		{name: "wrong password", status: 200, body: sshItems(), env: map[string]string{}, code: 1, errPart: "login as admin: HTTP 401: Authentication failure"},
		{name: "server error", status: 403, body: `{"result":{"status":false,"error":{"code":303,"message":"ERR303: You are not allowed\u001b[31m"}}}`, code: 1, errPart: "ssh keys of root: HTTP 403: ERR303: You are not allowed[31m"},
		{name: "not json", status: 200, body: `<html>`, code: 1, errPart: "HTTP 200: not a JSON answer"},
		{name: "value not an object", status: 200, body: `{"result":{"status":true,"value":[1]}}`, code: 1, errPart: "unexpected value"},
		{name: "status false", status: 200, body: `{"result":{"status":false,"value":{}}}`, code: 1, errPart: "no error message"},
		{name: "too large", status: 200, body: `{"result":{"status":true,"value":{"x":"` + strings.Repeat("a", maxSSHKeysBody) + `"}}}`, code: 1, errPart: "larger than"},
		{name: "redirect", status: 200, body: sshItems(), path: "/moved", code: 1, errPart: "redirected"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAuthServer(t, false, c.status, c.body)
			args := []string{"ssh-keys", "-url", f.URL + c.path, "-service-id", "webserver", "-hostname", "web1", "-admin", "admin"}
			if c.env == nil {
				args = append(args, "-password-file", pw)
			} else if c.name == "wrong password" {
				args = append(args, "-password-file", passwordFile(t, "wrong", 0o600))
			}
			code, out, errs := cli(t, c.env, "", append(args, "root")...)
			if code != c.code || out != c.out || !strings.Contains(errs, c.errPart) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q and %q", code, out, errs, c.code, c.out, c.errPart)
			}
			if c.code == 0 && c.errPart == "" && errs != "" {
				t.Errorf("stderr %q; want nothing", errs)
			}
			if strings.Contains(errs, testSSHPassword) || strings.Contains(errs, testSSHJWT) || strings.ContainsRune(errs, 0x1b) {
				t.Errorf("stderr shows the password, the JWT or a control character: %q", errs)
			}
			if c.code == 0 {
				q := <-f.queries
				want := url.Values{"hostname": {"web1"}, "service_id": {"webserver"}, "user": {"root"}}
				if q.Encode() != want.Encode() {
					t.Errorf("query %v; want %v", q, want)
				}
			}
		})
	}
}

// TestSSHKeysTimeouts: a server that never answers and one that is gone
// make the command fail within its -timeout.
func TestSSHKeysTimeouts(t *testing.T) {
	pw := passwordFile(t, testSSHPassword, 0o600)
	closed := testsvc.FreePort(t)
	for name, addr := range map[string]string{
		"never answers": testsvc.BlackHole(t),
		"gone":          fmt.Sprintf("127.0.0.1:%d", closed),
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			code, out, errs := cli(t, nil, "", "ssh-keys", "-url", "http://"+addr, "-admin", "admin", "-password-file", pw, "-timeout", "500ms", "root")
			if code != 1 || out != "" || !strings.Contains(errs, "authsrv ssh-keys: login as admin: http://"+addr) {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s with -timeout 500ms", d)
			}
		})
	}
}

// TestSSHKeysTLS: https works with the server's CA in -ca-file and fails
// without it (the system's roots do not know the test CA), before the
// password is sent.
func TestSSHKeysTLS(t *testing.T) {
	_, key := testsvc.NewSSHKey(t, "k")
	f := newFakeAuthServer(t, true, 200, sshItems(map[string]any{"sshkey": key, "user": "root"}))
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	pw := passwordFile(t, testSSHPassword, 0o600)
	args := []string{"ssh-keys", "-url", f.URL, "-admin", "admin", "-password-file", pw}
	if code, out, errs := cli(t, nil, "", append(args, "-ca-file", ca, "root")...); code != 0 || out != key+"\n" {
		t.Errorf("with -ca-file: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := cli(t, nil, "", append(args, "root")...); code != 1 || out != "" || !strings.Contains(errs, "certificate") {
		t.Errorf("without -ca-file: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if len(f.queries) != 1 {
		t.Errorf("%d auth item queries; want 1 (the one with -ca-file)", len(f.queries))
	}
}
