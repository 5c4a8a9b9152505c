package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serveFor starts the serve command with env and returns its address and
// an administrator's JWT; the server stops when the test ends.
func serveFor(t *testing.T, env map[string]string) (addr, jwt string) {
	t.Helper()
	addr, pw, _ := serveInProcess(t, env)
	return addr, adminToken(t, addr, pw)
}

// serveInProcess runs "authsrv serve" in this process with env until the
// test ends, and returns its address, the first administrator's password
// and the server's log.
func serveInProcess(t *testing.T, env map[string]string) (addr, password string, logs *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var out syncBuffer
	logs = &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, nil, strings.NewReader(""), &out, logs, func(k string) string { return env[k] })
	}()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "serving", func() bool {
		return servingRe.MatchString(out.String()) || strings.Contains(logs.String(), "authsrv serve:")
	})
	if !servingRe.MatchString(out.String()) {
		t.Fatalf("serve did not start: %s", logs.String())
	}
	return servingRe.FindStringSubmatch(out.String())[2], passwordRe.FindStringSubmatch(out.String())[1], logs
}

// apiCall sends one form request and returns the status and the decoded
// envelope.
func apiCall(t *testing.T, method, addr, path, jwt string, v url.Values) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", jwt)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

const fileUsers = "alice:x:1001:100:Alice,,,,alice@example.org:/home/alice:/bin/sh\n"

// checkPasswdFile saves a passwd resolver on file. With want "" it must be
// saved and its users listed through a realm; otherwise refused with a
// resolver error (ERR907, HTTP 400) whose message contains want.
func checkPasswdFile(t *testing.T, addr, jwt, name, file, want string) {
	t.Helper()
	status, m := apiCall(t, http.MethodPost, addr, "/resolver/"+name, jwt, url.Values{"type": {"passwdresolver"}, "fileName": {file}})
	result, _ := m["result"].(map[string]any)
	if want != "" {
		e, _ := result["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if status != http.StatusBadRequest || e["code"] != float64(907) || !strings.Contains(msg, want) {
			t.Errorf("passwd file %s: %d %v; want ERR907 with %q", file, status, m, want)
		}
		if strings.Contains(msg, "alice") || strings.Contains(msg, "root:") {
			t.Errorf("the refusal shows file content: %q", msg)
		}
		return
	}
	if status != http.StatusOK || result["status"] != true {
		t.Fatalf("passwd file %s: %d %v", file, status, m)
	}
	if status, m := apiCall(t, http.MethodPost, addr, "/realm/realm"+name, jwt, url.Values{"resolvers": {name}}); status != http.StatusOK {
		t.Fatalf("realm: %d %v", status, m)
	}
	status, m = apiCall(t, http.MethodGet, addr, "/user/?realm=realm"+name, jwt, nil)
	result, _ = m["result"].(map[string]any)
	users, _ := result["value"].([]any)
	if status != http.StatusOK || len(users) != 1 || users[0].(map[string]any)["username"] != "alice" {
		t.Errorf("users of %s: %d %v", file, status, m)
	}
}

// TestServeFileRootDefault: by default a passwd file is read only from
// /etc/authsrv and the data directory's files subfolder (created 0700 at
// start); /etc/shadow, the enckey (directly, through a symlink placed in
// files/, through ..) and ../../../etc/passwd are refused with a message
// that names the rule.
func TestServeFileRootDefault(t *testing.T) {
	dir := shortDir(t)
	addr, jwt := serveFor(t, map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled"})
	files := filepath.Join(dir, "files")
	fi, err := os.Stat(files)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("files subfolder: %v %v", fi, err)
	}
	enckey := filepath.Join(dir, "enckey")
	link := filepath.Join(files, "keylink")
	if err := os.Symlink(enckey, link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "users"), []byte(fileUsers), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := "is outside the allowed directories"
	inData := "is in the server's data directory"
	for i, tc := range []struct{ file, want string }{
		{"/etc/shadow", "The file /etc/shadow " + outside},
		{enckey, "The file " + enckey + " " + inData},
		{filepath.Join(dir, "jwtkey"), inData},
		{filepath.Join(dir, "authsrv.db"), inData},
		{link, "The file " + link + " " + inData},
		{files + "/../enckey", inData},
		{files + "/../../../../../../../../etc/passwd", outside},
		{"../../../etc/passwd", "The file name must be an absolute path."},
		{filepath.Join(files, "users"), ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			checkPasswdFile(t, addr, jwt, "r"+string(rune('a'+i)), tc.file, tc.want)
		})
	}
}

// TestServeFileRootGiven: AUTHSRV_FILE_ROOT with two directories replaces
// the defaults: a file under either is read, one under files/ no longer,
// and a symlink to the enckey placed in a root is refused.
func TestServeFileRootGiven(t *testing.T) {
	dir := shortDir(t)
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "users"), []byte(fileUsers), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr, jwt := serveFor(t, map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled",
		"AUTHSRV_FILE_ROOT": a + ":" + b})
	link := filepath.Join(a, "keylink")
	if err := os.Symlink(filepath.Join(dir, "enckey"), link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "files", "users"), []byte(fileUsers), 0o600); err != nil {
		t.Fatal(err)
	}
	checkPasswdFile(t, addr, jwt, "ra", filepath.Join(a, "users"), "")
	checkPasswdFile(t, addr, jwt, "rb", filepath.Join(b, "users"), "")
	checkPasswdFile(t, addr, jwt, "rc", link, "is in the server's data directory")
	checkPasswdFile(t, addr, jwt, "rd", filepath.Join(dir, "files", "users"), "is outside the allowed directories")
	checkPasswdFile(t, addr, jwt, "re", "/etc/passwd", "is outside the allowed directories")
}

// TestServeFileRootBadInput: a -file-root that does not exist, is a file
// or is empty stops the start with a message naming it.
func TestServeFileRootBadInput(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "plain")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(base, "missing")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"missing", nil, []string{"-file-root", missing}, "-file-root " + missing + ": the directory does not exist"},
		{"a file", nil, []string{"-file-root", base, "-file-root", file}, "-file-root " + file + ": not a directory"},
		{"missing in the environment", map[string]string{"AUTHSRV_FILE_ROOT": base + ":" + missing}, nil, "-file-root " + missing + ": the directory does not exist"},
		{"empty element", map[string]string{"AUTHSRV_FILE_ROOT": base + "::" + base}, nil, "AUTHSRV_FILE_ROOT"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortDir(t)
			env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled"}
			for k, v := range tc.env {
				env[k] = v
			}
			code, out, errs := cli(t, env, "", append([]string{"serve"}, tc.args...)...)
			if code != 1 || !strings.Contains(errs, tc.want) || strings.Contains(out, "serving") {
				t.Errorf("code %d, stdout %q, stderr %q; want 1 and %q", code, out, errs, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "authsrv.db")); err == nil {
				t.Error("the server opened its data directory despite the bad root")
			}
		})
	}
}
