package testsvc

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PostgresServer is a PostgreSQL server started for one test: its own
// cluster in a temporary directory, listening on 127.0.0.1 only, with a
// non-superuser role (User, Password) that owns Database and logs in with
// scram-sha-256. Stop and Start let a test take the database away and give
// it back on the same port.
type PostgresServer struct {
	Host     string
	Port     int
	User     string
	Password string
	Database string

	bin     string // directory of the postgres binaries
	dir     string // temporary directory (data, socket, log)
	cred    *syscall.Credential
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// pgStartTimeout bounds initdb and every start.
const pgStartTimeout = 30 * time.Second

// postgresBinDirs lists Debian's /usr/lib/postgresql/<version>/bin, newest
// first.
func postgresBinDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	return dirs
}

// Postgres starts a fresh PostgreSQL cluster for tb and stops it (by its
// pid) when tb ends. It skips the test when PostgreSQL is not installed
// (fails under CI). PostgreSQL refuses to run as root, so when the test
// runs as root the server runs as the "postgres" system user.
func Postgres(tb testing.TB) *PostgresServer {
	tb.Helper()
	postgres := Require(tb, "postgres", postgresBinDirs()...)
	bin := filepath.Dir(postgres)
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		tb.Fatalf("initdb not found next to %s: %v", postgres, err)
	}

	s := &PostgresServer{
		Host:     "127.0.0.1",
		Port:     FreePort(tb),
		User:     "authsrv_test",
		Password: randomHex(16),
		Database: "authsrv_test",
		bin:      bin,
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			msg := "PostgreSQL cannot run as root and there is no postgres system user: " + err.Error()
			if os.Getenv("CI") != "" {
				tb.Fatal(msg)
			}
			tb.Skip(msg)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}

	// tb.TempDir is below a root-only directory, so make our own under
	// the (world-traversable) temp root and hand it to the server's user.
	dir, err := os.MkdirTemp("", "authsrv-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	s.dir = dir
	s.logPath = filepath.Join(dir, "postgres.log")
	tb.Cleanup(func() {
		s.kill()
		_ = os.RemoveAll(dir)
	})
	if s.cred != nil {
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.Mkdir(s.sockDir(), 0o700); err != nil {
		tb.Fatal(err)
	}
	s.chown(tb, s.sockDir())

	// The superuser only logs in over the socket (trust); its password
	// just satisfies initdb's check for password authentication on TCP.
	pwFile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwFile, []byte(randomHex(16)+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	s.chown(tb, pwFile)
	s.run(tb, nil, filepath.Join(bin, "initdb"),
		"-D", s.dataDir(), "--no-sync", "--no-instructions", "--no-locale", "-E", "UTF8",
		"-U", "postgres", "--pwfile", pwFile,
		"--auth-local=trust", "--auth-host=scram-sha-256")
	_ = os.Remove(pwFile)

	// Single-user mode runs one statement per line, before the server
	// listens anywhere.
	setup := fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s';\nCREATE DATABASE %s OWNER %s;\n",
		s.User, s.Password, s.Database, s.User)
	s.run(tb, strings.NewReader(setup), filepath.Join(bin, "postgres"),
		"--single", "-D", s.dataDir(), "-c", "fsync=off", "postgres")

	s.Start(tb)
	return s
}

func (s *PostgresServer) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *PostgresServer) sockDir() string { return filepath.Join(s.dir, "sock") }

// DSN returns a pgx/libpq URL for the test role (with its password: test
// use only).
func (s *PostgresServer) DSN() string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(s.User, s.Password),
		Host:     s.Host + ":" + strconv.Itoa(s.Port),
		Path:     "/" + s.Database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Start starts the server (again) on its port and waits until it accepts
// connections. It fails tb if the server is already running.
func (s *PostgresServer) Start(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		tb.Fatal("testsvc: postgres is already running")
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = logf.Close() }()

	cmd := exec.Command(filepath.Join(s.bin, "postgres"),
		"-D", s.dataDir(), "-p", strconv.Itoa(s.Port), "-k", s.sockDir(),
		"-c", "listen_addresses="+s.Host,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=100", "-c", "shared_buffers=16MB",
		"-c", "log_min_messages=warning")
	cmd.Dir = s.dir
	cmd.Env = pgEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, so Cleanup can kill the backends with the
	// postmaster; SIGQUIT (immediate shutdown) if this test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("testsvc: start postgres: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done

	deadline := time.Now().Add(pgStartTimeout)
	for !s.ready() {
		select {
		case <-done:
			s.cmd, s.done = nil, nil
			tb.Fatalf("testsvc: postgres exited during start:\n%s", s.logTail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testsvc: postgres not ready after %s:\n%s", pgStartTimeout, s.logTail())
		}
	}
	WaitPort(tb, s.Port, pgStartTimeout)
}

// Stop shuts the server down (fast shutdown: clients are disconnected)
// and waits until it has exited. The data stays for Start.
func (s *PostgresServer) Stop(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(pgStartTimeout):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
		tb.Errorf("testsvc: postgres did not stop within %s; killed", pgStartTimeout)
	}
	s.cmd, s.done = nil, nil
}

// kill ends the server and its backends by pid (immediate shutdown, then
// SIGKILL to its process group).
func (s *PostgresServer) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	pid := s.cmd.Process.Pid
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-s.done
	s.cmd, s.done = nil, nil
}

// ready reports whether postmaster.pid says the server accepts
// connections (its eighth line is "ready").
func (s *PostgresServer) ready() bool {
	b, err := os.ReadFile(filepath.Join(s.dataDir(), "postmaster.pid"))
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for i := 1; sc.Scan(); i++ {
		if i == 8 {
			return strings.TrimSpace(sc.Text()) == "ready"
		}
	}
	return false
}

// run runs a setup program as the server's user and fails tb with its
// output if it fails.
func (s *PostgresServer) run(tb testing.TB, stdin *strings.Reader, prog string, args ...string) {
	tb.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir = s.dir
	cmd.Env = pgEnv()
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("testsvc: %s: %v", filepath.Base(prog), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			tb.Fatalf("testsvc: %s: %v\n%s", filepath.Base(prog), err, out.String())
		}
	case <-time.After(pgStartTimeout):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		tb.Fatalf("testsvc: %s did not finish within %s\n%s", filepath.Base(prog), pgStartTimeout, out.String())
	}
}

func (s *PostgresServer) chown(tb testing.TB, path string) {
	tb.Helper()
	if s.cred == nil {
		return
	}
	if err := os.Chown(path, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
		tb.Fatal(err)
	}
}

func (s *PostgresServer) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// pgEnv is a clean environment: no PG* variables of the caller.
func pgEnv() []string {
	env := []string{"LC_ALL=C", "TZ=UTC"}
	if p := os.Getenv("PATH"); p != "" {
		env = append(env, "PATH="+p)
	}
	return env
}

// randomHex returns n random bytes in hex (crypto/rand.Read never fails).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
