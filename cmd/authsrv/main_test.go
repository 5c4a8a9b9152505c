package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the tests run this binary's main as a real child process.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("AUTHSRV_TEST_MAIN_ARGS"); ok {
		os.Exit(run(context.Background(), strings.Split(args, "\x1f"), os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// cli runs one command in process.
func cli(t *testing.T, env map[string]string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb syncBuffer
	code = run(t.Context(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "as") // Unix socket paths are limited to ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "data")
}

func TestVersionUsage(t *testing.T) {
	if code, out, _ := cli(t, nil, "", "version"); code != 0 || !strings.HasPrefix(out, "authsrv 0.1.0 (go") {
		t.Errorf("version: %d %q", code, out)
	}
	if code, out, _ := cli(t, nil, "", "help"); code != 0 || !strings.Contains(out, "admin add NAME") {
		t.Errorf("help: %d %q", code, out)
	}
	if code, _, errs := cli(t, nil, "", "frobnicate"); code != 2 || !strings.Contains(errs, "unknown command") {
		t.Errorf("unknown: %d %q", code, errs)
	}
	if code, _, _ := cli(t, nil, "", "admin"); code != 2 {
		t.Errorf("admin without subcommand: %d", code)
	}
	if code, _, _ := cli(t, nil, "", "admin", "add"); code != 2 {
		t.Errorf("admin add without name: %d", code)
	}
	if code, _, _ := cli(t, nil, "", "serve", "-tls-cert", "x"); code != 1 {
		t.Errorf("cert without key: %d", code)
	}
	if code, _, errs := cli(t, map[string]string{"AUTHSRV_OPEN_TIMEOUT": "soon"}, "", "admin", "list", "-data-dir", shortDir(t)); code != 1 || !strings.Contains(errs, "AUTHSRV_OPEN_TIMEOUT") {
		t.Errorf("bad env value: %d %q", code, errs)
	}
}

func TestAdminCommands(t *testing.T) {
	dir := mkdirData(t, shortDir(t))
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "disabled"}
	steps := []struct {
		stdin string
		args  []string
		code  int
		out   string // substring of stdout (or of stderr when code != 0)
	}{
		{"pw-one\n", []string{"admin", "add", "alice"}, 0, "done: alice"},
		{"pw-two\n", []string{"admin", "add", "bob"}, 0, "done: bob"},
		{"x\n", []string{"admin", "add", "alice"}, 1, "already exists"},
		{"", []string{"admin", "add", "carol"}, 1, "no password on standard input"},
		{"", []string{"admin", "list"}, 0, "alice\tcreated"},
		{"pw-three\n", []string{"admin", "passwd", "alice"}, 0, "done: alice"},
		{"", []string{"admin", "delete", "bob"}, 0, ""},
		{"", []string{"admin", "delete", "bob"}, 1, "could not be found"},
	}
	for _, st := range steps {
		code, out, errs := cli(t, env, st.stdin, st.args...)
		where := out
		if st.code != 0 {
			where = errs
		}
		if code != st.code || !strings.Contains(where, st.out) {
			t.Errorf("%v: code %d out %q err %q; want %d and %q", st.args, code, out, errs, st.code, st.out)
		}
	}
	_, out, _ := cli(t, env, "", "admin", "list")
	if strings.Contains(out, "bob") || !strings.Contains(out, "alice") {
		t.Errorf("list after delete: %q", out)
	}
	// A flag wins over the environment.
	other := mkdirData(t, shortDir(t))
	cli(t, env, "pw\n", "admin", "add", "dave", "-data-dir", other)
	if _, err := os.Stat(filepath.Join(other, "authsrv.db")); err != nil {
		t.Errorf("-data-dir did not win over AUTHSRV_DATA_DIR: %v", err)
	}
}

var (
	servingRe  = regexp.MustCompile(`serving on (https?)://(\S+) `)
	passwordRe = regexp.MustCompile(`with the password (\S+)`)
)

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func login(t *testing.T, addr, password string) (int, string) {
	t.Helper()
	resp, err := http.PostForm("http://"+addr+"/auth", url.Values{"username": {"admin"}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// adminToken logs admin in with password and returns the JWT.
func adminToken(t *testing.T, addr, password string) string {
	t.Helper()
	_, body := login(t, addr, password)
	var auth struct {
		Result struct {
			Value struct {
				Token string `json:"token"`
			} `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &auth); err != nil || auth.Result.Value.Token == "" {
		t.Fatalf("login: %s", body)
	}
	return auth.Result.Value.Token
}

// TestServeLifecycle is the new user's path: first start prints the
// password, it logs in, the admin and backup commands work while serving,
// a second server is refused, and the backup restores elsewhere.
func TestServeLifecycle(t *testing.T) {
	dir := shortDir(t)
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "warn"}
	ctx, cancel := context.WithCancel(t.Context())
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, nil, strings.NewReader(""), &out, &errs, func(k string) string { return env[k] })
	}()
	waitFor(t, "serving", func() bool { return servingRe.MatchString(out.String()) })
	addr := servingRe.FindStringSubmatch(out.String())[2]
	pm := passwordRe.FindStringSubmatch(out.String())
	if pm == nil {
		t.Fatalf("no password printed: %q", out.String())
	}
	pw := pm[1]

	resp, err := http.Get("http://" + addr + "/healthz/livez")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if strings.TrimSpace(string(b)) != `{"status":"OK"}` {
		t.Errorf("livez: %s", b)
	}
	if code, body := login(t, addr, pw); code != 200 || !strings.Contains(body, `"token":"eyJ`) {
		t.Errorf("login: %d %s", code, body)
	}
	if code, body := login(t, addr, "wrong"); code != 401 || !strings.Contains(body, `"code":4031`) {
		t.Errorf("wrong password: %d %s", code, body)
	}
	if strings.Contains(errs.String(), pw) {
		t.Error("the admin password reached the log")
	}

	// While serving: admin commands and backup go through the control socket.
	if code, _, e := cli(t, env, "second-pw\n", "admin", "add", "ops"); code != 0 {
		t.Fatalf("admin add while serving: %d %s", code, e)
	}
	if _, o, _ := cli(t, env, "", "admin", "list"); !strings.Contains(o, "admin\t") || !strings.Contains(o, "ops\t") {
		t.Errorf("admin list while serving: %q", o)
	}
	backup := filepath.Join(filepath.Dir(dir), "b.tar")
	if code, _, e := cli(t, env, "", "backup", "-out", backup); code != 0 {
		t.Fatalf("backup while serving: %d %s", code, e)
	}

	start := time.Now()
	code, _, e := cli(t, env, "", "serve", "-open-timeout", "500ms")
	if code != 1 || !strings.Contains(e, "in use by another process") {
		t.Errorf("second server: %d %q", code, e)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the second server took %s to give up", d)
	}
	if code, _, e := cli(t, env, "", "restore", "-force", backup); code != 1 || !strings.Contains(e, "in use by a running server") {
		t.Errorf("restore over the running server: %d %q", code, e)
	}

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, errs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}

	restored := mkdirData(t, shortDir(t))
	renv := map[string]string{"AUTHSRV_DATA_DIR": restored, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled"}
	if code, o, e := cli(t, renv, "", "restore", backup); code != 0 || !strings.Contains(o, "restored") {
		t.Fatalf("restore: %d %q %q", code, o, e)
	}
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	var out2 syncBuffer
	go func() {
		done <- run(ctx2, nil, strings.NewReader(""), &out2, io.Discard, func(k string) string { return renv[k] })
	}()
	waitFor(t, "restored server", func() bool { return servingRe.MatchString(out2.String()) })
	if strings.Contains(out2.String(), "with the password") {
		t.Error("the restored server created a new admin")
	}
	addr2 := servingRe.FindStringSubmatch(out2.String())[2]
	if code, _ := login(t, addr2, pw); code != 200 {
		t.Errorf("the restored server does not log the same admin in: %d", code)
	}
	cancel2()
	<-done
}

// child starts this test binary as the authsrv command.
func child(t *testing.T, env map[string]string, args ...string) (*exec.Cmd, *syncBuffer, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "AUTHSRV_TEST_MAIN_ARGS="+strings.Join(args, "\x1f"))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errs syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out, &errs
}

// TestProcess runs the real binary: SIGTERM lets it stop cleanly, and a
// wrong enckey stops the start with a clear message.
func TestProcess(t *testing.T) {
	dir := shortDir(t)
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "info"}
	cmd, out, errs := child(t, env, "serve", "-listen", "127.0.0.1:0")
	waitFor(t, "serving", func() bool { return servingRe.MatchString(out.String()) })
	addr := servingRe.FindStringSubmatch(out.String())[2]
	pw := passwordRe.FindStringSubmatch(out.String())[1]
	if code, _ := login(t, addr, pw); code != 200 {
		t.Fatalf("login: %d", code)
	}

	// A second process on the same data directory exits with a message.
	second, _, serr := child(t, env, "serve", "-listen", "127.0.0.1:0", "-open-timeout", "500ms")
	start := time.Now()
	err := second.Wait()
	if err == nil || !strings.Contains(serr.String(), "in use by another process") {
		t.Errorf("second process: %v %q", err, serr.String())
	}
	if time.Since(start) > 5*time.Second {
		t.Error("the second process took too long")
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	select {
	case err := <-waitErr:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, errs.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no exit after SIGTERM")
	}
	if !strings.Contains(errs.String(), `"message":"shutting down"`) || !strings.Contains(errs.String(), `"path":"/auth"`) {
		t.Errorf("log: %s", errs.String())
	}
	if strings.Contains(errs.String(), pw) {
		t.Error("password in the log")
	}
	if _, err := os.Stat(filepath.Join(dir, "control.sock")); err == nil {
		t.Error("control socket left behind")
	}

	// A wrong enckey stops the start.
	key := filepath.Join(dir, "enckey")
	_ = os.Chmod(key, 0o600)
	if err := os.WriteFile(key, bytes.Repeat([]byte{1}, 32), 0o400); err != nil {
		t.Fatal(err)
	}
	bad, _, berr := child(t, env, "serve", "-listen", "127.0.0.1:0")
	if err := bad.Wait(); err == nil || !strings.Contains(berr.String(), "enckey does not match") {
		t.Errorf("wrong enckey: %v %q", err, berr.String())
	}
}
