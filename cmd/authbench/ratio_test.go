package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store/storetest"
)

// TestBareHandler: the bare handler answers an accepted check the driver
// counts as a success, with about 300 bytes, and refuses a form without
// a pass.
func TestBareHandler(t *testing.T) {
	srv := httptest.NewServer(bareHandler())
	t.Cleanup(srv.Close)
	form := encodeForm(url.Values{"user": {"ratiouser0001"}, "realm": {"ratio"}, "pass": {"123456"}})
	resp, err := http.Post(srv.URL+"/validate/check", "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if o, msg := classify(resp.StatusCode, body, true); o != outOK {
		t.Fatalf("the driver does not count the answer as a success (%s): %s", msg, body)
	}
	if n := len(body); n < 250 || n > 350 {
		t.Errorf("answer of %d bytes, want about 300: %s", n, body)
	}
	resp, err = http.Post(srv.URL+"/validate/check", "application/x-www-form-urlencoded", strings.NewReader("user=x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a check without pass: HTTP %d, want 400", resp.StatusCode)
	}
}

// TestBareCommand: "authbench bare" prints where it serves, answers
// there, and stops cleanly when its context ends.
func TestBareCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runBare(ctx, []string{"-listen", "127.0.0.1:0"}, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no serving line: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := servingLineRe.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("serving line %q does not match what startBare looks for", line)
	}
	resp, err := http.Get("http://" + m[1] + "/healthz/livez")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("livez: HTTP %d", resp.StatusCode)
	}
	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("exit %d: %s", c, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("bare did not stop after its context ended")
	}

	if c := runBare(t.Context(), []string{"-listen", "10.1.2.3:0"}, io.Discard, io.Discard); c != exitUsage {
		t.Errorf("a non-loopback -listen: exit %d, want %d", c, exitUsage)
	}
}

func TestParseRatio(t *testing.T) {
	env := func(k string) string {
		if k == envAdminPassword {
			return "pw"
		}
		return ""
	}
	cases := []struct {
		args []string
		want string // "" = accepted
	}{
		{[]string{"-url", "http://127.0.0.1:1"}, ""},
		{[]string{}, "-server PATH"},
		{[]string{"-url", "http://127.0.0.1:1", "-server", "/bin/sh"}, "exclude"},
		{[]string{"-url", "http://10.0.0.1:1"}, "loopback"},
		{[]string{"-url", "http://127.0.0.1:1", "-bare-url", "http://192.168.0.1:1"}, "loopback"},
		{[]string{"-url", "http://127.0.0.1:1", "-clients", "8,x"}, "-clients"},
		{[]string{"-url", "http://127.0.0.1:1", "-clients", "128"}, "-users 64"},
		{[]string{"-url", "http://127.0.0.1:1", "-rounds", "0"}, "-rounds"},
		{[]string{"-server", "/nonexistent/authsrv"}, "not an executable"},
	}
	for _, tc := range cases {
		_, err := parseRatio(tc.args, io.Discard, env)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one naming %q", tc.args, err, tc.want)
		}
	}
	if _, err := parseRatio([]string{"-url", "http://127.0.0.1:1"}, io.Discard, func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), envAdminPassword) {
		t.Errorf("-url without a password: %v", err)
	}
}

// TestRatioAgainstServer runs the ratio mode briefly against the real
// server in-process and the bare handler: both figures and the ratio
// come out, every request succeeds. It asserts that the tool works, not
// any speed.
func TestRatioAgainstServer(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a}, 32)
	s, err := authsrv.New(
		authsrv.WithStore(storetest.Open(t)),
		authsrv.WithEncKey(key),
		authsrv.WithJWTKey(key),
		authsrv.WithKDFParams(authsrv.KDFParams{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const adminPW = "ratio-admin-pw"
	if err := s.Admins().Add(t.Context(), "admin", adminPW); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(s))
	t.Cleanup(srv.Close)
	bare := httptest.NewServer(bareHandler())
	t.Cleanup(bare.Close)
	env := func(k string) string {
		if k == envAdminPassword {
			return adminPW
		}
		return ""
	}
	args := []string{"-url", srv.URL, "-bare-url", bare.URL, "-clients", "1,3", "-users", "3", "-duration", "600ms",
		"-warmup", "100ms", "-rounds", "2", "-passwd-dir", t.TempDir()}

	var out, errOut bytes.Buffer
	code := runRatio(t.Context(), append([]string{"-json"}, args...), &out, &errOut, env)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	var sum ratioSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	if len(sum.Rows) != 2 || sum.Rows[0].Clients != 1 || sum.Rows[1].Clients != 3 {
		t.Fatalf("rows %+v, want one per client count", sum.Rows)
	}
	for _, r := range sum.Rows {
		for name, tg := range map[string]ratioTarget{"bare": r.Bare, "authsrv": r.Authsrv} {
			if tg.Requests == 0 || tg.Errors != 0 || tg.PerSecond <= 0 || tg.LatencyMS.P50 <= 0 || tg.LatencyMS.P99 < tg.LatencyMS.P50 {
				t.Errorf("%d clients, %s: %+v", r.Clients, name, tg)
			}
		}
		if r.Ratio <= 0 {
			t.Errorf("%d clients: ratio %v", r.Clients, r.Ratio)
		}
	}
	if strings.Contains(out.String()+errOut.String(), adminPW) {
		t.Error("the output shows the admin password")
	}

	// The text form names both targets and the ratio at each count (the
	// same server again: the setup re-enrols the tokens).
	out.Reset()
	errOut.Reset()
	args[len(args)-1] = t.TempDir()
	if code := runRatio(t.Context(), args, &out, &errOut, env); code != exitOK {
		t.Fatalf("text: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"1        bare", "1        authsrv", "1        ratio", "3        bare", "3        authsrv", "3        ratio"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseStatTicks(t *testing.T) {
	line := "4242 (auth srv) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 9 0 100 1000 10 18446744073709551615"
	if n, err := parseStatTicks(line); err != nil || n != 1234+567 {
		t.Errorf("parseStatTicks = %d, %v; want 1801", n, err)
	}
	for _, bad := range []string{"", "4242 (x) S 1", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 x y"} {
		if _, err := parseStatTicks(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	m := &cpuMeter{pid: os.Getpid()}
	m.start()
	m.stop()
	if m.bad || m.perRequest(1) < 0 {
		t.Errorf("reading this process's CPU time: %+v", m)
	}
}
