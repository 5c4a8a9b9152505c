package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// serverProc is an authsrv process the catalogue rows start themselves,
// on a loopback port the kernel picks, with a data directory of theirs.
type serverProc struct {
	bin     string
	dataDir string
	extra   []string

	cmd      *exec.Cmd
	pid      int
	addr     string // host:port it serves on
	password string // the first admin's password, printed on the first start only
	stderr   *tailBuffer
	done     chan struct{}
	waitErr  error
}

var (
	servingLineRe  = regexp.MustCompile(`serving on http://(\S+) `)
	passwordLineRe = regexp.MustCompile(`with the password (\S+)`)
)

// serverStartTimeout bounds how long a start may take until "serving on".
const serverStartTimeout = 60 * time.Second

// startServer runs "bin serve" on 127.0.0.1:0 with dataDir and waits for
// its "serving on" line. The first start of a data directory prints the
// first admin's password, which it keeps (never printed by us).
func startServer(ctx context.Context, bin, dataDir string, extra []string) (*serverProc, error) {
	p := &serverProc{bin: bin, dataDir: dataDir, extra: extra}
	return p, p.start(ctx)
}

func (p *serverProc) start(ctx context.Context) error {
	args := append([]string{"serve", "-listen", "127.0.0.1:0", "-data-dir", p.dataDir, "-log-level", "warn"}, p.extra...)
	cmd := exec.Command(p.bin, args...)
	cmd.Env = serverEnv(os.Environ())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	p.stderr = &tailBuffer{max: 8 << 10}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.bin, err)
	}
	p.cmd, p.pid, p.addr = cmd, cmd.Process.Pid, ""
	p.done = make(chan struct{})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads after the start; drop
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	timer := time.NewTimer(serverStartTimeout)
	defer timer.Stop()
	for {
		select {
		case l := <-lines:
			if m := passwordLineRe.FindStringSubmatch(l); m != nil {
				p.password = m[1]
			}
			if m := servingLineRe.FindStringSubmatch(l); m != nil {
				p.addr = m[1]
				return nil
			}
		case <-p.done:
			return fmt.Errorf("authsrv exited during its start (%v): %s", p.waitErr, p.stderr.String())
		case <-timer.C:
			p.kill()
			return fmt.Errorf("authsrv did not serve within %s: %s", serverStartTimeout, p.stderr.String())
		case <-ctx.Done():
			p.kill()
			return ctx.Err()
		}
	}
}

// serverEnv is the environment for the server: ours without AUTHSRV_
// settings, so the command line alone decides.
func serverEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "AUTHSRV_") {
			out = append(out, kv)
		}
	}
	return out
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *serverProc) kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM, waits up to 30 s for a clean exit, then kills.
func (p *serverProc) stop() error {
	if p.cmd == nil {
		return nil
	}
	select {
	case <-p.done:
		return fmt.Errorf("authsrv had exited already (%v): %s", p.waitErr, p.stderr.String())
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(30 * time.Second):
		p.kill()
		return errors.New("authsrv did not stop within 30 s of SIGTERM; killed")
	}
}

// alive reports whether the process is still running.
func (p *serverProc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}

// procSample is what /proc tells about a process at one moment.
type procSample struct {
	RSSKB   int64 `json:"rss_kb"`
	AnonKB  int64 `json:"rss_anon_kb"` // RssAnon: the process's own memory (heap, stacks)
	FileKB  int64 `json:"rss_file_kb"` // RssFile: resident file pages, mostly the store's mmap
	Threads int64 `json:"threads"`
	FDs     int64 `json:"fds"`
	DBBytes int64 `json:"db_bytes,omitempty"`
}

// sampleProc reads VmRSS, RssAnon, RssFile and Threads from
// /proc/<pid>/status, counts
// /proc/<pid>/fd, and stats the data directory's store. The server shows
// no goroutine count; its open descriptors stand in for the connections
// and the goroutines that serve them.
func sampleProc(pid int, dataDir string) (procSample, error) {
	var s procSample
	b, err := os.ReadFile(procStatusPath(pid))
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			s.RSSKB = v
		case "RssAnon":
			s.AnonKB = v
		case "RssFile":
			s.FileKB = v
		case "Threads":
			s.Threads = v
		}
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return s, err
	}
	s.FDs = int64(len(fds))
	if dataDir != "" {
		if fi, err := os.Stat(filepath.Join(dataDir, "authsrv.db")); err == nil {
			s.DBBytes = fi.Size()
		}
	}
	return s, nil
}
