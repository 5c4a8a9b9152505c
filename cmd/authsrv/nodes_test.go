package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/store/postgres"
)

// pnKey is the HOTP key of the tokens of the node tests.
var pnKey = []byte("12345678901234567890")

func pnOTP(counter uint64) string { return otp.HOTP(pnKey, counter, 6, otp.SHA1) }

// pnBound is how long a configuration change made on one node may take
// to reach the others (store.RevSnapshot's recheck; policies follow at
// once).
const pnBound = time.Second

// pnRequestBound is the longest a request may take while the database
// is away: a connection attempt and a statement, each bounded.
const pnRequestBound = postgres.DefaultConnectTimeout + postgres.DefaultQueryTimeout

// pnNode is one authsrv process serving on a PostgreSQL store.
type pnNode struct {
	name    string
	addr    string
	dataDir string
	cmd     *exec.Cmd
	out     *syncBuffer
	errs    *syncBuffer
	exited  chan struct{}
}

// pnClient bounds every request, so that a hanging node fails the test
// instead of stalling it.
var pnClient = &http.Client{Timeout: pnRequestBound + 5*time.Second}

// pnReply is one answer: the status, the decoded envelope and how long
// it took; err is set when no answer came.
type pnReply struct {
	status int
	body   map[string]any
	took   time.Duration
	err    error
}

// call sends one form request to n (with jwt when not empty).
func (n *pnNode) call(method, path, jwt string, v url.Values) pnReply {
	start := time.Now()
	req, err := http.NewRequest(method, "http://"+n.addr+path, strings.NewReader(v.Encode()))
	if err != nil {
		return pnReply{err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if jwt != "" {
		req.Header.Set("Authorization", jwt)
	}
	resp, err := pnClient.Do(req)
	if err != nil {
		return pnReply{err: err, took: time.Since(start)}
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	r := pnReply{status: resp.StatusCode, took: time.Since(start), err: err}
	if err == nil {
		if jerr := json.Unmarshal(b, &r.body); jerr != nil {
			r.err = fmt.Errorf("%d %q: %w", resp.StatusCode, b, jerr)
		}
	}
	return r
}

// ok reports whether the request succeeded (HTTP 200, status true).
func (r pnReply) ok() bool {
	return r.err == nil && r.status == http.StatusOK && pnAt(r.body, "result.status") == true
}

// accepted reports whether a /validate/check answered value true.
func (r pnReply) accepted() bool { return r.ok() && pnAt(r.body, "result.value") == true }

func (r pnReply) String() string {
	if r.err != nil {
		return fmt.Sprintf("error after %v: %v", r.took, r.err)
	}
	b, _ := json.Marshal(r.body)
	return fmt.Sprintf("%d %s", r.status, b)
}

// pnAt walks a dotted path through decoded JSON objects.
func pnAt(v any, path string) any {
	for p := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// mustOK fails t unless the request succeeded.
func (n *pnNode) mustOK(t *testing.T, method, path, jwt string, v url.Values) pnReply {
	t.Helper()
	r := n.call(method, path, jwt, v)
	if !r.ok() {
		t.Fatalf("%s: %s %s: %s", n.name, method, path, r)
	}
	return r
}

// startPNNode starts "authsrv serve" on the PostgreSQL store dsn with the
// data directory dataDir; it returns once the node serves. The node is
// killed (by its pid) when the test ends, if it still runs.
func startPNNode(t *testing.T, name, dsn, password, dataDir, fileRoot string) *pnNode {
	t.Helper()
	cmd, out, errs := child(t, map[string]string{"PGPASSWORD": password},
		"serve", "-store", dsn, "-data-dir", dataDir, "-listen", "127.0.0.1:0", "-node-name", name,
		"-log-level", "warn", "-allow-dial", "127.0.0.0/8", "-file-root", fileRoot, "-stats-interval", "0")
	n := &pnNode{name: name, dataDir: dataDir, cmd: cmd, out: out, errs: errs, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !servingRe.MatchString(out.String()) {
		select {
		case <-n.exited:
			t.Fatalf("%s exited during start: %s", name, errs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not serve: %s", name, errs.String())
		}
	}
	n.addr = servingRe.FindStringSubmatch(out.String())[2]
	return n
}

// pnCopyKeys gives dst the key files of src: the nodes of one database
// share them.
func pnCopyKeys(t *testing.T, src, dst string) {
	t.Helper()
	for _, f := range []string{authsrv.EncKeyFile, authsrv.JWTKeyFile, authsrv.JWTKeysFile, authsrv.AuditKeyFile} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o400); err != nil {
			t.Fatal(err)
		}
	}
}

var pnSixDigits = regexp.MustCompile(`\b\d{6}\b`)

// TestNodesProcesses is issue 23's "Done when": one PostgreSQL and three
// authsrv processes on loopback.
func TestNodesProcesses(t *testing.T) {
	pg := testsvc.Postgres(t)
	dsn := (&url.URL{Scheme: "postgres", User: url.User(pg.User), Host: fmt.Sprintf("%s:%d", pg.Host, pg.Port),
		Path: "/" + pg.Database, RawQuery: "sslmode=disable"}).String()
	files := t.TempDir()
	users := filepath.Join(files, "users.passwd")
	var pw strings.Builder
	for i, l := range []string{"alice", "bob", "carol", "dave", "erin", "frank", "gina"} {
		fmt.Fprintf(&pw, "%s:x:%d:%d:%s,,,,%s@example.org:/home/%s:/bin/sh\n", l, 1000+i, 1000+i, l, l, l)
	}
	if err := os.WriteFile(users, []byte(pw.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	// Node 1 makes the keys and the first administrator; the others get
	// its key files.
	var nodes [3]*pnNode
	dirs := [3]string{}
	for i := range dirs {
		dirs[i] = mkdirData(t, shortDir(t))
	}
	nodes[0] = startPNNode(t, "node1", dsn, pg.Password, dirs[0], files)
	m := passwordRe.FindStringSubmatch(nodes[0].out.String())
	if m == nil {
		t.Fatalf("node1 printed no administrator password: %s", nodes[0].out.String())
	}
	adminPW := m[1]
	var wg sync.WaitGroup
	for i := 1; i < 3; i++ {
		pnCopyKeys(t, dirs[0], dirs[i])
		wg.Go(func() { nodes[i] = startPNNode(t, fmt.Sprintf("node%d", i+1), dsn, pg.Password, dirs[i], files) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, n := range nodes[1:] {
		if strings.Contains(n.out.String(), "with the password") {
			t.Errorf("%s made another administrator", n.name)
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// The first lines of each node's log, without the refused
		// connections of the database's restart.
		for _, n := range nodes {
			var lines []string
			for l := range strings.SplitSeq(n.errs.String(), "\n") {
				if l != "" && len(lines) < 20 && !strings.Contains(l, "connection refused") && !strings.Contains(l, "57P0") {
					lines = append(lines, l)
				}
			}
			t.Logf("%s's log:\n%s", n.name, strings.Join(lines, "\n"))
		}
	})
	jwt := make([]string, 3)
	for i, n := range nodes {
		jwt[i] = adminToken(t, n.addr, adminPW)
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	n1.mustOK(t, "POST", "/resolver/users", jwt[0], url.Values{"type": {"passwdresolver"}, "fileName": {users}})
	n1.mustOK(t, "POST", "/realm/realm1", jwt[0], url.Values{"resolvers": {"users"}})
	enroll := func(n *pnNode, jwt, serial, login, pin string) {
		t.Helper()
		n.mustOK(t, "POST", "/token/init", jwt, url.Values{"type": {"hotp"}, "serial": {serial}, "otpkey": {fmt.Sprintf("%x", pnKey)},
			"user": {login}, "realm": {"realm1"}, "pin": {pin}})
	}
	check := func(n *pnNode, login, pass string, more ...string) pnReply {
		v := url.Values{"user": {login}, "realm": {"realm1"}, "pass": {pass}}
		for i := 0; i+1 < len(more); i += 2 {
			v.Set(more[i], more[i+1])
		}
		return n.call("POST", "/validate/check", "", v)
	}

	t.Run("enrolled on node 1 validates on node 3", func(t *testing.T) {
		enroll(n1, jwt[0], "E1", "alice", "1234")
		if r := check(n3, "alice", "1234"+pnOTP(0)); !r.accepted() {
			t.Fatalf("node3: %s", r)
		}
		if r := check(n2, "alice", "1234"+pnOTP(0)); r.accepted() {
			t.Fatal("node2 accepted the OTP node3 used")
		}
	})

	t.Run("64 requests with one OTP over three nodes accept once", func(t *testing.T) {
		enroll(n1, jwt[0], "P64", "bob", "")
		pass := pnOTP(0)
		var accepted, failed atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 64 {
			wg.Go(func() {
				<-start
				r := check(nodes[i%3], "bob", pass)
				switch {
				case r.accepted():
					accepted.Add(1)
				case !r.ok():
					failed.Add(1)
					t.Errorf("request %d on %s: %s", i, nodes[i%3].name, r)
				}
			})
		}
		began := time.Now()
		close(start)
		wg.Wait()
		t.Logf("64 requests with one OTP answered in %v", time.Since(began))
		if accepted.Load() != 1 || failed.Load() != 0 {
			t.Fatalf("%d ACCEPT and %d failures for one OTP", accepted.Load(), failed.Load())
		}
	})

	t.Run("policy set on node 2 applies on node 1", func(t *testing.T) {
		if r := check(n1, "carol", "whatever"); r.accepted() {
			t.Fatal("carol without a token accepted")
		}
		n2.mustOK(t, "POST", "/policy/pass", jwt[1], url.Values{"scope": {"authentication"}, "action": {"passOnNoToken"}, "active": {"true"}})
		start := time.Now()
		for !check(n1, "carol", "whatever").accepted() {
			if time.Since(start) > pnBound+pnBound/2+250*time.Millisecond {
				t.Fatalf("node1 does not apply node2's policy after %v", time.Since(start))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("node2's policy applied on node1 after %v (bound %v)", time.Since(start), pnBound)
		n2.mustOK(t, "DELETE", "/policy/pass", jwt[1], nil)
	})

	t.Run("e-mail challenge of node 1 answered on node 2", func(t *testing.T) {
		sink := testsvc.NewSMTPSink(t)
		n1.mustOK(t, "POST", "/smtpserver/mail", jwt[0], url.Values{"server": {"127.0.0.1"}, "port": {fmt.Sprint(sink.Port)},
			"sender": {"authsrv@example.org"}, "timeout": {"5"}})
		n1.mustOK(t, "POST", "/token/init", jwt[0], url.Values{"type": {"email"}, "serial": {"EM1"}, "email": {"dave@example.org"},
			"email.identifier": {"mail"}, "user": {"dave"}, "realm": {"realm1"}, "pin": {"mailpin"}})
		r := check(n1, "dave", "mailpin")
		txid, _ := pnAt(r.body, "detail.transaction_id").(string)
		if !r.ok() || txid == "" {
			t.Fatalf("no challenge: %s", r)
		}
		msgs := sink.Messages()
		if len(msgs) != 1 {
			t.Fatalf("%d mails", len(msgs))
		}
		code := pnSixDigits.FindString(msgs[0].Data)
		if code == "" {
			t.Fatal("no OTP in the mail")
		}
		if r := check(n2, "dave", code, "transaction_id", txid); !r.accepted() {
			t.Fatalf("node2's answer: %s", r)
		}
		if r := check(n3, "dave", code, "transaction_id", txid); r.accepted() {
			t.Fatal("node3 accepted the answer node2 used")
		}
	})

	t.Run("PostgreSQL restarted during load", func(t *testing.T) {
		for i, l := range []string{"erin", "frank", "gina"} {
			enroll(n1, jwt[0], fmt.Sprintf("L%d", i), l, "")
		}
		var stop atomic.Bool
		var mu sync.Mutex
		var downMax time.Duration
		var downN, downFailed int
		var down atomic.Bool
		var wg sync.WaitGroup
		counters := make([]uint64, 3)
		for i, l := range []string{"erin", "frank", "gina"} {
			wg.Go(func() {
				for !stop.Load() {
					// A value is used until a check answers: a failed
					// request committed nothing (a commit whose outcome
					// was lost may have used the value, and then the
					// rejection moves on).
					r := check(nodes[i], l, pnOTP(counters[i]))
					if r.ok() {
						counters[i]++
					}
					if down.Load() {
						mu.Lock()
						downN++
						downMax = max(downMax, r.took)
						if !r.ok() {
							downFailed++
						}
						mu.Unlock()
					}
					if r.err != nil {
						t.Errorf("%s: no answer: %s", nodes[i].name, r)
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		time.Sleep(300 * time.Millisecond)
		down.Store(true)
		pg.Stop(t)
		time.Sleep(1500 * time.Millisecond)
		if r := n3.call("GET", "/healthz/readyz", "", nil); r.err != nil || r.status != http.StatusServiceUnavailable {
			t.Errorf("readiness of node3 while the database is down: %s", r)
		}
		down.Store(false)
		pg.Start(t)
		// Each node answers again by itself: its next checks pass.
		recovered := time.Now()
		for _, n := range nodes {
			for {
				r := n.call("GET", "/healthz/readyz", "", nil)
				if r.err == nil && r.status == http.StatusOK {
					break
				}
				if time.Since(recovered) > 15*time.Second {
					t.Fatalf("%s not ready 15 s after the database came back: %s", n.name, r)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		took := time.Since(recovered)
		time.Sleep(300 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		for i, n := range nodes {
			if r := check(n, []string{"erin", "frank", "gina"}[i], pnOTP(counters[i])); !r.accepted() {
				t.Errorf("%s after the restart: %s", n.name, r)
			}
		}
		t.Logf("database down: %d requests, %d failed, slowest %v; all nodes ready %v after the start", downN, downFailed, downMax, took)
		if downN == 0 || downFailed == 0 {
			t.Errorf("the load saw no outage: %d requests, %d failed", downN, downFailed)
		}
		if downMax > pnRequestBound {
			t.Errorf("a request took %v while the database was down (bound %v)", downMax, pnRequestBound)
		}
	})

	t.Run("node killed mid-load loses no acknowledged write", func(t *testing.T) {
		var acked sync.Map
		var n atomic.Int32
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					serial := fmt.Sprintf("K%d-%04d", g, i)
					r := n3.call("POST", "/token/init", jwt[2], url.Values{"type": {"hotp"}, "serial": {serial},
						"otpkey": {fmt.Sprintf("%x", pnKey)}})
					if !r.ok() {
						return // the node is gone
					}
					acked.Store(serial, true)
					n.Add(1)
				}
			})
		}
		for n.Load() < 40 {
			time.Sleep(5 * time.Millisecond)
		}
		if err := n3.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-n3.exited
		wg.Wait()
		count := 0
		for k := range acked.Range {
			count++
			r := n1.call("GET", "/token/?serial="+k.(string), jwt[0], nil)
			if c := pnAt(r.body, "result.value.count"); !r.ok() || c != float64(1) {
				t.Errorf("token %s, acknowledged by node3 before SIGKILL: %s", k, r)
			}
		}
		t.Logf("%d enrollments acknowledged before the SIGKILL, all present on node1", count)
	})

	// The one audit chain the three nodes wrote (and node3 left when it
	// was killed) verifies.
	code, out, errs := cli(t, nil, "", "audit", "verify", "-store", pg.DSN(), "-data-dir", dirs[0])
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), ": OK") {
		t.Errorf("audit verify: %d %q %q", code, out, errs)
	}
	t.Logf("audit verify: %s", strings.TrimSpace(out))
}
