// Package testsvc starts real services (OpenLDAP slapd, PostgreSQL, ...)
// on loopback in a temporary directory for tests, and stops them when the
// test ends. A missing program skips the test with a clear message, except
// when the CI environment variable is set: there a missing service fails.
//
// Only tests import this package. It imports nothing of authsrv.
package testsvc

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Require returns the path of program (looked up in PATH and in extra
// directories), or skips the test (fails it under CI) when it is missing.
func Require(tb testing.TB, program string, extraDirs ...string) string {
	tb.Helper()
	if p, err := exec.LookPath(program); err == nil {
		return p
	}
	for _, d := range extraDirs {
		p := d + string(os.PathSeparator) + program
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	msg := program + " is not installed (run the README's test command, which installs the Debian packages)"
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitPort waits until 127.0.0.1:port accepts connections.
func WaitPort(tb testing.TB, port int, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nothing listens on %s after %s: %v", addr, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
