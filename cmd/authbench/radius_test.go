package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/radius"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store/storetest"
)

// radiusEnv is an authsrv in-process: the HTTP API on a loopback port and
// the built-in RADIUS server (the library's Validator behind it) on a UDP
// loopback port, with the NAS 127.0.0.1 a client of realm radbench.
type radiusEnv struct {
	url, radiusAddr string
	adminPW, secret string
}

func startRadiusEnv(t *testing.T) *radiusEnv {
	t.Helper()
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
	e := &radiusEnv{adminPW: "radius-admin-pw", secret: "radius-bench-secret"}
	if err := s.Admins().Add(t.Context(), "admin", e.adminPW); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(s))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	rs, err := radius.New(radius.Config{Checker: s.Validator(), Clients: []radius.Client{{
		Network: netip.MustParsePrefix("127.0.0.1/32"), Secret: []byte(e.secret), Realm: "radbench"}}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rs.Serve(ctx, conn); close(done) }()
	t.Cleanup(func() { cancel(); <-done; _ = conn.Close() })
	e.radiusAddr = conn.LocalAddr().String()
	return e
}

func (e *radiusEnv) getenv(k string) string {
	switch k {
	case envAdminPassword:
		return e.adminPW
	case envRadiusSecret:
		return e.secret
	}
	return ""
}

// TestRadiusLoad: a setup through the HTTP API, then the RADIUS load
// against the built-in server with the state file's users: every request
// is accepted, and the counters saved let a second run succeed too.
func TestRadiusLoad(t *testing.T) {
	e := startRadiusEnv(t)
	state := filepath.Join(t.TempDir(), "state.json")
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"-url", e.url, "-users", "4", "-realm", "radbench", "-setup-only", "-state", state,
		"-passwd-dir", t.TempDir()}, &out, &errOut, e.getenv)
	if code != exitOK {
		t.Fatalf("setup: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	for range 2 {
		out.Reset()
		errOut.Reset()
		code = run(t.Context(), []string{"radius", "-json", "-addr", e.radiusAddr, "-state", state, "-clients", "2",
			"-duration", "300ms"}, &out, &errOut, e.getenv)
		var sum summary
		if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
			t.Fatalf("exit %d, stdout is not one JSON object: %v\n%s%s", code, err, out.String(), errOut.String())
		}
		t.Logf("radius: %d requests, %.1f req/s, p99 %.3f ms", sum.Requests, sum.RequestsPerSec, sum.LatencyMS.P99)
		if code != exitOK || sum.Requests == 0 || sum.Errors.Total != 0 || sum.Successes != sum.Requests || sum.Clients != 2 {
			t.Fatalf("exit %d, summary %+v\n%s", code, sum, errOut.String())
		}
		if !strings.HasPrefix(sum.URL, "radius://127.0.0.1:") {
			t.Errorf("url %q", sum.URL)
		}
		if s := out.String() + errOut.String(); strings.Contains(s, e.secret) || strings.Contains(s, e.adminPW) {
			t.Error("the output shows a secret")
		}
	}

	// A wrong shared secret: no valid answer, every request an error.
	out.Reset()
	wrong := func(k string) string {
		if k == envRadiusSecret {
			return "not-the-secret"
		}
		return ""
	}
	code = run(t.Context(), []string{"radius", "-json", "-addr", e.radiusAddr, "-state", state, "-clients", "1",
		"-duration", "200ms", "-timeout", "100ms"}, &out, io.Discard, wrong)
	var sum summary
	_ = json.Unmarshal(out.Bytes(), &sum)
	if code != exitFailed || sum.Errors.Transport == 0 || sum.Successes != 0 {
		t.Errorf("wrong secret: exit %d, summary %+v", code, sum)
	}
}

// TestRadiusCompare runs -compare briefly: the built-in server,
// FreeRADIUS with the Perl module in front of the same API, and the API
// directly, with the same users; every request of each is accepted.
func TestRadiusCompare(t *testing.T) {
	testsvc.Require(t, "freeradius", freeradiusDirs...)
	if _, err := findFreeRADIUS(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	e := startRadiusEnv(t)
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"radius", "-compare", "-json", "-url", e.url, "-addr", e.radiusAddr,
		"-users", "4", "-clients", "2", "-duration", "300ms", "-warmup", "100ms", "-rounds", "2",
		"-freeradius-threads", "4", "-passwd-dir", t.TempDir()}, &out, &errOut, e.getenv)
	t.Logf("%s%s", out.String(), errOut.String())
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var sum radiusSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("stdout is not one JSON object: %v", err)
	}
	if len(sum.Rows) != 3 {
		t.Fatalf("rows %+v, want builtin, freeradius and http", sum.Rows)
	}
	for i, name := range []string{targetBuiltin, targetFreeRADIUS, targetHTTP} {
		r := sum.Rows[i]
		if r.Target != name || r.Requests == 0 || r.Errors != 0 || r.PerSecond <= 0 || r.LatencyMS.P99 < r.LatencyMS.P50 {
			t.Errorf("row %d: %+v, want %s with requests and no errors", i, r, name)
		}
	}
	if sum.Speedup <= 0 || sum.P99Ratio <= 0 {
		t.Errorf("speedup %v, p99 ratio %v", sum.Speedup, sum.P99Ratio)
	}
	if s := out.String() + errOut.String(); strings.Contains(s, e.secret) || strings.Contains(s, e.adminPW) {
		t.Error("the output shows a secret")
	}
}

func TestParseRadius(t *testing.T) {
	env := func(k string) string {
		switch k {
		case envAdminPassword:
			return "pw"
		case envRadiusSecret:
			return "s"
		}
		return ""
	}
	cases := []struct {
		args []string
		want string // "" = accepted
	}{
		{[]string{"-addr", "127.0.0.1:1812", "-state", "f"}, ""},
		{[]string{"-addr", "127.0.0.1:1812"}, "-state"},
		{[]string{"-state", "f"}, "-addr"},
		{[]string{"-addr", "10.0.0.1:1812", "-state", "f"}, "loopback"},
		{[]string{"-addr", "127.0.0.1", "-state", "f"}, "-addr"},
		{[]string{"-compare", "-url", "http://127.0.0.1:1", "-addr", "127.0.0.1:1812"}, ""},
		{[]string{"-compare"}, "-server PATH"},
		{[]string{"-compare", "-url", "http://127.0.0.1:1"}, "-addr"},
		{[]string{"-compare", "-url", "http://127.0.0.1:1", "-addr", "127.0.0.1:1", "-server", "/bin/sh"}, "exclude"},
		{[]string{"-compare", "-server", "/nonexistent/authsrv"}, "not an executable"},
		{[]string{"-compare", "-url", "http://127.0.0.1:1", "-addr", "127.0.0.1:1", "-clients", "100"}, "-users"},
		{[]string{"-compare", "-url", "http://127.0.0.1:1", "-addr", "127.0.0.1:1", "-rounds", "0"}, "-rounds"},
		{[]string{"-addr", "127.0.0.1:1812", "-state", "f", "-url", "http://127.0.0.1:1"}, "-compare"},
	}
	for _, tc := range cases {
		_, err := parseRadius(tc.args, io.Discard, env)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want one naming %q", tc.args, err, tc.want)
		}
	}
	_, err := parseRadius([]string{"-addr", "127.0.0.1:1812", "-state", "f"}, io.Discard, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), envRadiusSecret) {
		t.Errorf("no secret: %v", err)
	}
}
