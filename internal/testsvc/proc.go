package testsvc

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a service process a test started: the command and a channel
// closed when it has exited. The services embed it.
type proc struct {
	name string // for messages: "slapd", "FreeRADIUS"

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// launch starts cmd with its output going to logf (closed when the
// process exits) and records it as the running process. The caller holds
// p.mu.
func (p *proc) launch(tb testing.TB, cmd *exec.Cmd, logf *os.File) {
	tb.Helper()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		tb.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
}

// stop kills the process it started (by its pid) and waits until it has
// exited, so its ports are closed. SIGKILL: a server that vanishes is what
// the tests simulate.
func (p *proc) stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit", p.name, cmd.Process.Pid)
	}
}

// Running reports whether the service runs.
func (p *proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// fileTail returns the last 2000 bytes of a log file.
func fileTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
