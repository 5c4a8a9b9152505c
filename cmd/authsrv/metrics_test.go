package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/metrics"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store/bolt"
)

// sample is one line of the Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelRe = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseExposition reads the text format: "name{l="v",...} value".
func parseExposition(t *testing.T, text string) []sample {
	t.Helper()
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				t.Fatalf("bad line %q", line)
			}
			s.name = line[:i]
			for _, m := range labelRe.FindAllStringSubmatch(line[i+1:j], -1) {
				s.labels[m[1]] = m[2]
			}
			rest = strings.TrimSpace(line[j+1:])
		} else {
			name, v, ok := strings.Cut(line, " ")
			if !ok {
				t.Fatalf("bad line %q", line)
			}
			s.name, rest = name, v
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			t.Fatalf("bad value in %q: %v", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// sum adds the values of the samples named name whose labels include
// want.
func sum(samples []sample, name string, want map[string]string) (total float64, found bool) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if match {
			total += s.value
			found = true
		}
	}
	return total, found
}

func scrape(t *testing.T, url string) []sample {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return parseExposition(t, string(b))
}

func TestPromSink(t *testing.T) {
	reg := prometheus.NewRegistry()
	sink, err := newPromSink(reg)
	if err != nil {
		t.Fatal(err)
	}
	m := &promMetrics{reg: reg, sink: sink}
	srv := httptest.NewServer(m.handler(zerolog.Nop()))
	defer srv.Close()

	before := scrape(t, srv.URL+"/metrics")
	// Every (endpoint, result) pair is there from the start, at 0.
	for _, e := range metrics.Endpoints() {
		for _, r := range metrics.Results() {
			v, ok := sum(before, "authsrv_validate_requests_total", map[string]string{"endpoint": e.String(), "result": r.String()})
			if !ok || v != 0 {
				t.Errorf("%s/%s: %v %v, want present at 0", e, r, v, ok)
			}
		}
	}

	for range 3 {
		sink.ValidateRequest(metrics.Check, metrics.Accept)
	}
	sink.ValidateRequest(metrics.RadiusCheck, metrics.Challenge)
	sink.ValidateRequest(metrics.NumEndpoints, metrics.Accept) // out of range: ignored
	o := sink.Route("/token/:serial", http.MethodDelete)
	o.Observe(200, 3*time.Millisecond)
	o.Observe(200, 30*time.Millisecond)
	o.Observe(418, time.Millisecond) // not a common code: looked up in the vector
	sink.KDFQueueWait(0)
	sink.KDFQueueWait(20 * time.Millisecond)
	sink.StoreCommit(2 * time.Millisecond)

	after := scrape(t, srv.URL+"/metrics")
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"authsrv_validate_requests_total", map[string]string{"endpoint": "check", "result": "accept"}, 3},
		{"authsrv_validate_requests_total", map[string]string{"endpoint": "radiuscheck", "result": "challenge"}, 1},
		{"authsrv_validate_requests_total", nil, 4},
		{"authsrv_http_requests_total", map[string]string{"route": "/token/:serial", "method": "DELETE", "code": "200"}, 2},
		{"authsrv_http_requests_total", map[string]string{"route": "/token/:serial", "method": "DELETE", "code": "418"}, 1},
		{"authsrv_http_request_duration_seconds_count", map[string]string{"route": "/token/:serial", "method": "DELETE"}, 3},
		{"authsrv_http_request_duration_seconds_bucket", map[string]string{"route": "/token/:serial", "le": "0.005"}, 2},
		{"authsrv_http_request_duration_seconds_bucket", map[string]string{"route": "/token/:serial", "le": "+Inf"}, 3},
		{"authsrv_kdf_queue_wait_seconds_count", nil, 2},
		{"authsrv_kdf_queue_wait_seconds_bucket", map[string]string{"le": "0.0005"}, 1},
		{"authsrv_store_commit_seconds_count", nil, 1},
		{"authsrv_store_commit_seconds_bucket", map[string]string{"le": "0.0025"}, 1},
	} {
		if got, ok := sum(after, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// Only the codes a route answered with are series.
	if _, ok := sum(after, "authsrv_http_requests_total", map[string]string{"code": "500"}); ok {
		t.Error("a code no request had is a series")
	}

	// Only GET /metrics is served.
	for _, p := range []string{"/", "/metrics/x", "/validate/check"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	resp, err := http.Post(srv.URL+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d, want 405", resp.StatusCode)
	}
}

func TestTokenGauge(t *testing.T) {
	now := time.Unix(1000, 0)
	calls, n := 0, 7
	var fail error
	known := true
	g := &tokenGauge{count: func(ctx context.Context) (int, bool, error) {
		calls++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("count without a deadline")
		}
		return n, known, fail
	}, interval: 5 * time.Second, timeout: time.Second, now: func() time.Time { return now }}

	if v := g.value(); v != 7 || calls != 1 {
		t.Fatalf("first scrape: %v after %d reads", v, calls)
	}
	n = 9
	now = now.Add(time.Second)
	if v := g.value(); v != 7 || calls != 1 {
		t.Errorf("within the interval: %v after %d reads, want the cached 7 and no read", v, calls)
	}
	now = now.Add(5 * time.Second)
	if v := g.value(); v != 9 || calls != 2 {
		t.Errorf("after the interval: %v after %d reads", v, calls)
	}
	fail = errors.New("store down")
	now = now.Add(5 * time.Second)
	if v := g.value(); v != 9 || calls != 3 {
		t.Errorf("failed read: %v, want the last value 9", v)
	}
	fail, known, n = nil, false, 0
	now = now.Add(5 * time.Second)
	if v := g.value(); v != 9 {
		t.Errorf("unknown count: %v, want the last value 9", v)
	}
}

var metricsAddrRe = regexp.MustCompile(`"metrics_listen":"([^"]+)"`)

// tcpListeners counts the listening TCP sockets of process pid.
func tcpListeners(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	n := 0
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fields := strings.Fields(line)
			// sl local remote st ... inode (field 9); 0A is LISTEN.
			if len(fields) > 9 && fields[3] == "0A" && mine[fields[9]] {
				n++
			}
		}
	}
	return n
}

func requireProc(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("counts listening sockets through /proc (Linux only)")
	}
}

// stopChild sends SIGTERM and waits for a clean exit.
func stopChild(t *testing.T, cmd *exec.Cmd, errs fmt.Stringer) {
	t.Helper()
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
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no exit after SIGTERM")
	}
}

// TestMetricsListener is the "done when", with the real binary:
// AUTHSRV_METRICS_LISTEN opens a second listener whose /metrics shows
// authsrv_validate_requests_total grow by exactly the number of validate
// calls made, with histogram buckets, the token count and the Go and
// process collectors, and no user, serial, realm or address as a label
// value; SIGTERM closes it with the server.
func TestMetricsListener(t *testing.T) {
	requireProc(t)
	dir := shortDir(t)
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "info", "AUTHSRV_METRICS_LISTEN": "127.0.0.1:0"}
	cmd, out, errs := child(t, env, "serve", "-listen", "127.0.0.1:0")
	waitFor(t, "serving", func() bool { return servingRe.MatchString(out.String()) })
	waitFor(t, "metrics", func() bool { return metricsAddrRe.MatchString(errs.String()) })
	addr := servingRe.FindStringSubmatch(out.String())[2]
	maddr := metricsAddrRe.FindStringSubmatch(errs.String())[1]
	murl := "http://" + maddr + "/metrics"
	pw := passwordRe.FindStringSubmatch(out.String())[1]
	if n := tcpListeners(t, cmd.Process.Pid); n != 2 {
		t.Errorf("%d TCP listeners, want 2 (API and metrics)", n)
	}
	// The API does not serve the metrics.
	if resp, err := http.Get("http://" + addr + "/metrics"); err != nil {
		t.Fatal(err)
	} else {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /metrics on the API: %d", resp.StatusCode)
		}
	}

	// A passwd realm with alice and her HOTP token (PIN "pin").
	const login, realm, serial = "metricsalice", "metricsrealm", "METRICSSERIAL7"
	passwd := filepath.Join(dir, authsrv.FilesDir, "passwd")
	if err := os.WriteFile(passwd, []byte(login+":x:1001:100:Alice,,,:/home/a:/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jwt := adminToken(t, addr, pw)
	mustAPI(t, http.MethodPost, addr, "/resolver/files", jwt, url.Values{"type": {"passwdresolver"}, "fileName": {passwd}})
	mustAPI(t, http.MethodPost, addr, "/realm/"+realm, jwt, url.Values{"resolvers": {"files"}})
	key := []byte("12345678901234567890")
	mustAPI(t, http.MethodPost, addr, "/token/init", jwt, url.Values{"type": {"hotp"}, "serial": {serial},
		"otpkey": {hex.EncodeToString(key)}, "user": {login}, "realm": {realm}, "pin": {"pin"}})

	before := scrape(t, murl)
	beforeTotal, _ := sum(before, "authsrv_validate_requests_total", nil)
	validate := func(path string, v url.Values) int {
		t.Helper()
		resp, err := http.PostForm("http://"+addr+path, v)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	const accepts, rejects = 6, 3
	for i := range accepts {
		path := []string{"/validate/check", "/validate/samlcheck", "/validate/radiuscheck"}[i%3]
		validate(path, url.Values{"user": {login}, "realm": {realm}, "pass": {"pin" + otp.HOTP(key, uint64(i), 6, otp.SHA1)}})
	}
	for range rejects {
		validate("/validate/check", url.Values{"user": {login}, "realm": {realm}, "pass": {"pin000000"}})
	}
	validate("/validate/check", url.Values{"serial": {serial}, "pass": {"pin" + otp.HOTP(key, accepts, 6, otp.SHA1)}})
	const calls = accepts + rejects + 1

	after := scrape(t, murl)
	afterTotal, ok := sum(after, "authsrv_validate_requests_total", nil)
	if !ok || afterTotal-beforeTotal != calls {
		t.Errorf("authsrv_validate_requests_total grew by %v, want %d", afterTotal-beforeTotal, calls)
	}
	for _, c := range []struct {
		endpoint, result string
		want             float64
	}{{"check", "accept", 3}, {"samlcheck", "accept", 2}, {"radiuscheck", "accept", 2}, {"check", "reject", rejects}} {
		b, _ := sum(before, "authsrv_validate_requests_total", map[string]string{"endpoint": c.endpoint, "result": c.result})
		a, _ := sum(after, "authsrv_validate_requests_total", map[string]string{"endpoint": c.endpoint, "result": c.result})
		if a-b != c.want {
			t.Errorf("%s/%s grew by %v, want %v", c.endpoint, c.result, a-b, c.want)
		}
	}
	if got, _ := sum(after, "authsrv_http_requests_total", map[string]string{"route": "/validate/check", "method": "POST", "code": "200"}); got != accepts/3+rejects+1 {
		// 2 accepted checks by user, the rejects and the serial check.
		t.Errorf("POST /validate/check 200 = %v", got)
	}
	for _, name := range []string{"authsrv_http_request_duration_seconds_bucket", "authsrv_store_commit_seconds_bucket",
		"authsrv_kdf_queue_wait_seconds_bucket"} {
		if n, ok := sum(after, name, map[string]string{"le": "+Inf"}); !ok || n == 0 {
			t.Errorf("%s: no observations (%v, %v)", name, n, ok)
		}
	}
	if _, ok := sum(after, "authsrv_http_request_duration_seconds_bucket", map[string]string{"route": "/validate/check", "method": "POST", "le": "0.1"}); !ok {
		t.Error("no duration bucket of POST /validate/check")
	}
	if n, ok := sum(after, "authsrv_tokens", nil); !ok || n != 1 {
		t.Errorf("authsrv_tokens = %v (%v), want 1", n, ok)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := sum(after, name, nil); !ok {
			t.Errorf("no %s", name)
		}
	}
	for _, s := range after {
		for k, v := range s.labels {
			for _, bad := range []string{login, realm, serial, "127.0.0.1", "admin", pw} {
				if v == bad || (k == "route" && strings.Contains(v, bad)) {
					t.Errorf("%s has label %s=%q", s.name, k, v)
				}
			}
		}
	}

	stopChild(t, cmd, errs)
	if c, err := net.DialTimeout("tcp", maddr, time.Second); err == nil {
		_ = c.Close()
		t.Error("the metrics listener is still open after the server stopped")
	}
}

// TestMetricsOffByDefault: without -metrics-listen there is no second
// listener and nothing about metrics in the log.
func TestMetricsOffByDefault(t *testing.T) {
	requireProc(t)
	dir := shortDir(t)
	cmd, out, errs := child(t, map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "info"}, "serve", "-listen", "127.0.0.1:0")
	waitFor(t, "serving", func() bool { return servingRe.MatchString(out.String()) })
	if n := tcpListeners(t, cmd.Process.Pid); n != 1 {
		t.Errorf("%d TCP listeners, want 1 (the API)", n)
	}
	stopChild(t, cmd, errs)
	if strings.Contains(errs.String(), "metrics") {
		t.Errorf("metrics in the log without -metrics-listen: %s", errs.String())
	}
}

func TestMetricsListenBad(t *testing.T) {
	dir := shortDir(t)
	for _, addr := range []string{"not an address", "127.0.0.1:99999"} {
		code, _, errs := cli(t, map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "disabled"}, "", "serve", "-listen", "127.0.0.1:0", "-metrics-listen", addr)
		if code != 1 || !strings.Contains(errs, "-metrics-listen") {
			t.Errorf("-metrics-listen %q: %d %q", addr, code, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, authsrv.DBFile)); err == nil {
		t.Error("the store was opened although the metrics address is bad")
	}
}

// BenchmarkValidateMetrics measures /validate/check (HOTP by serial, no
// PIN, a store without fsync so that the commit does not hide the rest)
// with metrics off and with the Prometheus adapter.
func BenchmarkValidateMetrics(b *testing.B) {
	for _, mode := range []string{"off", "prom"} {
		b.Run("metrics="+mode, func(b *testing.B) {
			opts := []authsrv.Option{authsrv.WithStore(bolt.OpenForTest(b, filepath.Join(b.TempDir(), "b.db"))),
				authsrv.WithEncKey(make([]byte, 32)), authsrv.WithJWTKey(make([]byte, 32))}
			if mode == "prom" {
				sink, err := newPromSink(prometheus.NewRegistry())
				if err != nil {
					b.Fatal(err)
				}
				opts = append(opts, authsrv.WithMetrics(sink))
			}
			s, err := authsrv.New(opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			if err := s.Admins().Add(b.Context(), "admin", "bench-password"); err != nil {
				b.Fatal(err)
			}
			h := server.New(s)
			send := func(path, jwt string, v url.Values) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(v.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if jwt != "" {
					req.Header.Set("Authorization", jwt)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			rec := send("/auth", "", url.Values{"username": {"admin"}, "password": {"bench-password"}})
			jwt := regexp.MustCompile(`"token":"([^"]+)"`).FindStringSubmatch(rec.Body.String())
			if jwt == nil {
				b.Fatalf("auth: %s", rec.Body)
			}
			key := []byte("12345678901234567890")
			if rec := send("/token/init", jwt[1], url.Values{"type": {"hotp"}, "serial": {"B1"}, "otpkey": {hex.EncodeToString(key)}}); rec.Code != 200 {
				b.Fatalf("init: %s", rec.Body)
			}
			var counter uint64
			b.ReportAllocs()
			for b.Loop() {
				rec := send("/validate/check", "", url.Values{"serial": {"B1"}, "pass": {otp.HOTP(key, counter, 6, otp.SHA1)}})
				counter++
				if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"value":true`) {
					b.Fatalf("check: %d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// BenchmarkPromSinkRequest is what the adapter adds to one validate
// request: its decision counted and its route observed.
func BenchmarkPromSinkRequest(b *testing.B) {
	sink, err := newPromSink(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	o := sink.Route("/validate/check", http.MethodPost)
	b.ReportAllocs()
	for b.Loop() {
		sink.ValidateRequest(metrics.Check, metrics.Accept)
		o.Observe(http.StatusOK, 3*time.Millisecond)
	}
}
