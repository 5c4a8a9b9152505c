package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/testsvc"
)

// node is a serve command running in this process.
type node struct {
	addr string
	out  *syncBuffer
	errs *syncBuffer
	stop func() int // cancels serve and returns its exit code
}

// startNode runs "authsrv serve" with env and args until stop.
func startNode(t *testing.T, env map[string]string, args ...string) *node {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	n := &node{out: &syncBuffer{}, errs: &syncBuffer{}}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "-listen", "127.0.0.1:0"}, args...), strings.NewReader(""), n.out, n.errs,
			func(k string) string { return env[k] })
	}()
	stopped := false
	code := 0
	n.stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			select {
			case code = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("serve did not stop")
			}
		}
		return code
	}
	t.Cleanup(func() { n.stop() })
	waitFor(t, "serving", func() bool {
		select {
		case c := <-done:
			stopped = true
			t.Fatalf("serve exited %d: %s", c, n.errs.String())
		default:
		}
		return servingRe.MatchString(n.out.String())
	})
	n.addr = servingRe.FindStringSubmatch(n.out.String())[2]
	return n
}

// probe returns a health probe's status and body.
func probe(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// shareKeys gives dst the key files of src: what nodes on one database
// share.
func shareKeys(t *testing.T, src, dst string) {
	t.Helper()
	n := 0
	for _, f := range keyFiles {
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
		n++
	}
	if n < 3 {
		t.Fatalf("only %d key files in %s", n, src)
	}
}

// oneLine fails t when an error message spans several lines.
func oneLine(t *testing.T, what, msg string) {
	t.Helper()
	if strings.Count(strings.TrimSpace(msg), "\n") > 0 {
		t.Errorf("%s: the message takes several lines: %q", what, msg)
	}
}

// TestStoreOnPostgres runs the binary's commands against a PostgreSQL
// started for the test: a bbolt data directory is copied into the
// database; two nodes with the same key files serve from it and log the
// same administrator in; a node with other keys is refused; readiness
// reports the database stopped and recovers when it is back; the data is
// copied back into a bbolt file that a server then serves; the commands
// that need a bbolt file refuse the database.
func TestStoreOnPostgres(t *testing.T) {
	pg := testsvc.Postgres(t)
	dsn := pg.DSN()
	quiet := map[string]string{"AUTHSRV_LOG_LEVEL": "disabled"}

	// A bbolt installation with an administrator.
	boltDir := mkdirData(t, shortDir(t))
	if code, _, e := cli(t, quiet, "first-pw\n", "admin", "add", "admin", "-data-dir", boltDir); code != 0 {
		t.Fatalf("admin add: %d %s", code, e)
	}

	// bbolt -> PostgreSQL; a second copy onto the data is refused.
	code, out, e := cli(t, nil, "", "store", "copy", "-from", boltDir, "-to", dsn)
	if code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("store copy to PostgreSQL: %d %q %q", code, out, e)
	}
	if strings.Contains(out+e, pg.Password) {
		t.Error("store copy printed the database password")
	}
	code, _, e = cli(t, nil, "", "store", "copy", "-from", boltDir, "-to", dsn)
	if code != 1 || !strings.Contains(e, "holds data") || !strings.Contains(e, "-force") {
		t.Errorf("store copy onto data: %d %q", code, e)
	}

	// Two nodes with the bbolt installation's keys serve the database.
	dirA, dirB := mkdirData(t, shortDir(t)), mkdirData(t, shortDir(t))
	shareKeys(t, boltDir, dirA)
	shareKeys(t, boltDir, dirB)
	a := startNode(t, map[string]string{"AUTHSRV_STORE": dsn, "AUTHSRV_LOG_LEVEL": "warn"}, "-data-dir", dirA, "-node-name", "a")
	cfg := writeConfig(t, "store: "+dsn+"\nnode-name: b\nlog-level: warn\n")
	b := startNode(t, nil, "-config", cfg, "-data-dir", dirB)
	for name, n := range map[string]*node{"a": a, "b": b} {
		if strings.Contains(n.out.String(), "with the password") {
			t.Errorf("node %s created an administrator: the database has one", name)
		}
		if code, body := login(t, n.addr, "first-pw"); code != 200 {
			t.Errorf("node %s: login with the password set on bbolt: %d %s", name, code, body)
		}
		if code, body := probe(t, n.addr, "/healthz/readyz"); code != 200 || !strings.Contains(body, `"status":"ready"`) {
			t.Errorf("node %s: readyz %d %s", name, code, body)
		}
		if strings.Contains(n.errs.String(), pg.Password) {
			t.Errorf("node %s logged the database password", name)
		}
	}
	if _, err := os.Stat(filepath.Join(dirA, authsrv.DBFile)); err == nil {
		t.Errorf("a node on PostgreSQL made a bbolt file in its data directory")
	}
	// A change on node b is seen by node a (the admin command reaches b
	// through its control socket).
	if code, _, e := cli(t, quiet, "ops-pw\n", "admin", "add", "ops", "-data-dir", dirB, "-store", dsn); code != 0 {
		t.Fatalf("admin add on node b: %d %s", code, e)
	}
	if code, out, e := cli(t, quiet, "", "admin", "list", "-data-dir", dirA, "-store", dsn); code != 0 || !strings.Contains(out, "ops\t") {
		t.Errorf("admin list on node a: %d %q %q", code, out, e)
	}

	// A node without the keys is refused and keeps no made-up keys.
	dirC := mkdirData(t, shortDir(t))
	code, _, e = cli(t, quiet, "", "serve", "-listen", "127.0.0.1:0", "-data-dir", dirC, "-store", dsn)
	if code != 1 || !strings.Contains(e, "enckey does not match") || !strings.Contains(e, "copy the key files") {
		t.Errorf("node without the keys: %d %q", code, e)
	}
	oneLine(t, "node without the keys", e)
	t.Logf("node without the keys: %s", e)
	if left, _ := os.ReadDir(dirC); len(left) != 0 {
		t.Errorf("the refused node left %d files in its data directory", len(left))
	}

	// Readiness follows the database.
	pg.Stop(t)
	waitFor(t, "readyz to report the database", func() bool {
		code, _ := probe(t, a.addr, "/healthz/readyz")
		return code == http.StatusServiceUnavailable
	})
	code, body := probe(t, a.addr, "/healthz/readyz")
	if code != 503 || !strings.Contains(body, `"store":"database unreachable"`) || strings.Contains(body, pg.Password) ||
		strings.Contains(body, strings.TrimPrefix(dsn, "postgres://")) {
		t.Errorf("readyz with the database down: %d %s", code, body)
	}
	if code, _ := probe(t, a.addr, "/healthz/livez"); code != 200 {
		t.Errorf("livez with the database down: %d", code)
	}
	pg.Start(t)
	for name, n := range map[string]*node{"a": a, "b": b} {
		waitFor(t, "readyz of node "+name+" after the database's return", func() bool {
			code, _ := probe(t, n.addr, "/healthz/readyz")
			return code == 200
		})
		if code, _ := login(t, n.addr, "first-pw"); code != 200 {
			t.Errorf("node %s: login after the database's return: %d", name, code)
		}
	}
	if !strings.Contains(a.errs.String(), "does not answer") || strings.Contains(a.errs.String(), pg.Password) {
		t.Errorf("node a's log of the outage (without the password): %s", a.errs.String())
	}

	// The commands that need a bbolt file refuse the database.
	for _, args := range [][]string{
		{"backup", "-out", filepath.Join(t.TempDir(), "b.tar")},
		{"compact"},
		{"restore", "x.tar"},
	} {
		code, _, e := cli(t, quiet, "", append(args, "-data-dir", dirA, "-store", dsn)...)
		if code != 1 || !strings.Contains(e, "not on a PostgreSQL -store") || !strings.Contains(e, "store copy") && args[0] != "compact" {
			t.Errorf("%s on PostgreSQL: %d %q", args[0], code, e)
		}
	}
	if code, _, e := cli(t, quiet, "", "admin", "list", "-data-dir", dirA, "-store", "mysql://u:hidden@h/db"); code != 1 || strings.Contains(e, "hidden") || !strings.Contains(e, "postgres://") {
		t.Errorf("-store of another kind: %d %q", code, e)
	}

	// PostgreSQL -> a new bbolt file, while the nodes still run: a
	// consistent read of the live database.
	backDir := mkdirData(t, shortDir(t))
	shareKeys(t, boltDir, backDir)
	code, out, e = cli(t, nil, "", "store", "copy", "-from", dsn, "-to", filepath.Join(backDir, authsrv.DBFile))
	if code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("store copy to bbolt: %d %q %q", code, out, e)
	}
	a.stop()
	b.stop()
	// With no server running the commands open the database themselves.
	if code, out, e := cli(t, quiet, "", "admin", "list", "-data-dir", dirA, "-store", dsn); code != 0 || !strings.Contains(out, "ops\t") {
		t.Errorf("admin list on the database: %d %q %q", code, out, e)
	}
	if code, out, e := cli(t, quiet, "", "api", "createtoken", "-data-dir", dirB, "-store", dsn); code != 0 || !strings.HasPrefix(out, "eyJ") {
		t.Errorf("api createtoken on the database: %d %q %q", code, out, e)
	}
	back := startNode(t, quiet, "-data-dir", backDir)
	if code, _ := login(t, back.addr, "first-pw"); code != 200 {
		t.Errorf("the bbolt copy does not log the administrator in: %d", code)
	}
	// Never while a server holds a bbolt file.
	code, _, e = cli(t, nil, "", "store", "copy", "-from", backDir, "-to", dsn, "-force")
	if code != 1 || !strings.Contains(e, "in use by another process") || !strings.Contains(e, "stop the server") {
		t.Errorf("store copy from a served bbolt file: %d %q", code, e)
	}
	back.stop()
	// -force replaces the database's data.
	code, out, e = cli(t, nil, "", "store", "copy", "-from", backDir, "-to", dsn, "-force")
	if code != 0 || !strings.Contains(out, "-force") {
		t.Errorf("store copy -force: %d %q %q", code, out, e)
	}
}

// TestStoreConnectFailures checks that a node whose database refuses
// its credentials, or cannot be reached, exits with one clear line
// without the password, within the connect timeout.
func TestStoreConnectFailures(t *testing.T) {
	pg := testsvc.Postgres(t)
	u, _ := url.Parse(pg.DSN())
	u.User = url.UserPassword(pg.User, "Wr0ng-Secret")
	t.Run("wrong password", func(t *testing.T) {
		dir := shortDir(t)
		code, _, e := cli(t, map[string]string{"AUTHSRV_LOG_LEVEL": "disabled"}, "", "serve", "-listen", "127.0.0.1:0",
			"-data-dir", dir, "-store", u.String())
		if code != 1 || !strings.Contains(e, "authentication failed") || strings.Contains(e, "Wr0ng-Secret") {
			t.Errorf("wrong password: %d %q", code, e)
		}
		oneLine(t, "wrong password", e)
		t.Logf("wrong password: %s", e)
	})

	// A port that accepts connections and never answers: the connect
	// timeout ends the wait.
	silent := *u
	silent.Host = testsvc.BlackHole(t)
	closedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := *u
	refused.Host = closedLn.Addr().String()
	_ = closedLn.Close()
	for name, dsn := range map[string]string{"silent": silent.String(), "refused": refused.String()} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			code, _, e := cli(t, map[string]string{"AUTHSRV_LOG_LEVEL": "disabled", "AUTHSRV_STORE": dsn}, "",
				"serve", "-listen", "127.0.0.1:0", "-data-dir", shortDir(t), "-store-connect-timeout", "1s")
			took := time.Since(start)
			if code != 1 || !strings.Contains(e, "unreachable") || strings.Contains(e, "Wr0ng-Secret") {
				t.Errorf("%s: %d %q", name, code, e)
			}
			oneLine(t, name, e)
			t.Logf("%s after %s: %s", name, took.Round(time.Millisecond), e)
			// The bound is the connect timeout (1 s), not the default 5 s.
			if took > 4*time.Second {
				t.Errorf("%s: gave up after %s, want about the 1 s connect timeout", name, took)
			}
		})
	}
}
