package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FreeRADIUS with rlm_perl in front of the HTTP API: the path sites run
// today with privacyIDEA's FreeRADIUS plugin. authbench writes its own
// minimal configuration and its own small Perl module
// (testdata/authbench_rlm.pm) that posts each Access-Request to
// /validate/check, and starts Debian's freeradius in the foreground.

//go:embed testdata/authbench_rlm.pm
var rlmPerlModule string

// Debian's locations of FreeRADIUS's binary, modules and dictionaries.
var (
	freeradiusDirs    = []string{"/usr/sbin", "/usr/local/sbin"}
	freeradiusLibDir  = "/usr/lib/freeradius"
	freeradiusDictDir = "/usr/share/freeradius"
)

// findFreeRADIUS returns the FreeRADIUS binary, or an error naming what is
// missing (the binary or rlm_perl).
func findFreeRADIUS() (string, error) {
	bin := ""
	for _, name := range []string{"freeradius", "radiusd"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
		for _, d := range freeradiusDirs {
			p := filepath.Join(d, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				bin = p
				break
			}
		}
		if bin != "" {
			break
		}
	}
	if bin == "" {
		return "", errors.New("FreeRADIUS is not installed (Debian: apt-get install freeradius)")
	}
	for _, p := range []string{freeradiusLibDir + "/rlm_perl.so", freeradiusDictDir + "/dictionary"} {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("FreeRADIUS is installed but %s is missing", p)
		}
	}
	return bin, nil
}

// perlRadiusConfig is what the FreeRADIUS in front of the API gets.
type perlRadiusConfig struct {
	checkURL string // the full URL of /validate/check
	realm    string // sent as realm with every request ("" none)
	secret   []byte // of the client 127.0.0.1
	threads  int    // FreeRADIUS worker threads (each a Perl interpreter)
}

// freeRADIUS is a running FreeRADIUS started by startFreeRADIUS.
type freeRADIUS struct {
	addr string // 127.0.0.1:port, the authentication port
	pid  int
	dir  string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// freeradiusStartTimeout bounds the start until "Ready to process requests".
const freeradiusStartTimeout = 30 * time.Second

// startFreeRADIUS writes a configuration into a new temporary directory
// and starts FreeRADIUS on a free UDP port of 127.0.0.1. stop ends it and
// removes the directory.
func startFreeRADIUS(ctx context.Context, cfg perlRadiusConfig) (*freeRADIUS, error) {
	bin, err := findFreeRADIUS()
	if err != nil {
		return nil, err
	}
	for _, s := range []string{cfg.checkURL, cfg.realm, string(cfg.secret)} {
		if strings.ContainsAny(s, "\"\\\r\n\x00") {
			return nil, errors.New("FreeRADIUS configuration: a value holds a quote, backslash or control character")
		}
	}
	port, err := freeUDPPort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "authbench-freeradius-")
	if err != nil {
		return nil, err
	}
	threads := max(cfg.threads, 1)
	conf := fmt.Sprintf(perlRadiusConf, dir, freeradiusLibDir, cfg.secret, port, cfg.checkURL, cfg.realm, threads)
	for name, data := range map[string]string{"radiusd.conf": conf, "authbench_rlm.pm": rlmPerlModule} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	logName := filepath.Join(dir, "radius.log")
	logf, err := os.OpenFile(logName, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// -f keeps it in the foreground, so the pid is the server's.
	cmd := exec.Command(bin, "-f", "-l", "stdout", "-d", dir, "-D", freeradiusDictDir)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	logf.Close()
	f := &freeRADIUS{addr: "127.0.0.1:" + strconv.Itoa(port), pid: cmd.Process.Pid, dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		f.err = cmd.Wait()
		close(f.done)
	}()
	deadline := time.Now().Add(freeradiusStartTimeout)
	for {
		if b, err := os.ReadFile(logName); err == nil && strings.Contains(string(b), "Ready to process requests") {
			return f, nil
		}
		select {
		case <-f.done:
			tail := f.logTail()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("FreeRADIUS exited during its start (%v): %s", f.err, tail)
		case <-ctx.Done():
			f.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tail := f.logTail()
			f.stop()
			return nil, fmt.Errorf("FreeRADIUS not ready after %s: %s", freeradiusStartTimeout, tail)
		}
	}
}

// logTail is the end of FreeRADIUS's log (it holds no secrets: the
// configuration logs no passwords and the module logs nothing).
func (f *freeRADIUS) logTail() string {
	b, _ := os.ReadFile(filepath.Join(f.dir, "radius.log"))
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return strings.TrimSpace(string(b))
}

// stop ends FreeRADIUS (SIGTERM, then SIGKILL after 10 s) and removes its
// directory.
func (f *freeRADIUS) stop() {
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.done:
	case <-time.After(10 * time.Second):
		_ = f.cmd.Process.Kill()
		<-f.done
	}
	os.RemoveAll(f.dir)
}

// freeUDPPort returns a UDP port of 127.0.0.1 that was free a moment ago.
func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// perlRadiusConf is the whole configuration: %[1]s the directory, %[2]s
// the module directory, %[3]s the client secret, %[4]d the port, %[5]s
// the /validate/check URL, %[6]s the realm, %[7]d the worker threads.
// The client must send a Message-Authenticator and every answer carries
// one (Blast-RADIUS), as the built-in server does. max_requests is high:
// FreeRADIUS counts the answered requests it keeps for cleanup_delay, and
// a low value drops requests under load. No request is logged, no reject
// is delayed.
const perlRadiusConf = `# Generated by authbench.
prefix = /usr
exec_prefix = /usr
sysconfdir = "%[1]s"
localstatedir = "%[1]s"
sbindir = /usr/sbin
logdir = "%[1]s"
raddbdir = "%[1]s"
radacctdir = "%[1]s"
name = freeradius
confdir = "%[1]s"
modconfdir = "%[1]s"
run_dir = "%[1]s"
db_dir = "%[1]s"
libdir = "%[2]s"
pidfile = "%[1]s/radiusd.pid"
max_request_time = 30
cleanup_delay = 5
max_requests = 65536
hostname_lookups = no
log {
	destination = stdout
	colourise = no
	auth = no
	auth_badpass = no
	auth_goodpass = no
}
security {
	allow_core_dumps = no
	max_attributes = 200
	reject_delay = 0
	status_server = no
}
proxy_requests = no
thread pool {
	start_servers = %[7]d
	max_servers = %[7]d
	min_spare_servers = 1
	max_spare_servers = %[7]d
	max_requests_per_server = 0
}
client localhost {
	ipaddr = 127.0.0.1
	secret = "%[3]s"
	require_message_authenticator = yes
	nas_type = other
}
modules {
	perl {
		filename = "%[1]s/authbench_rlm.pm"
		config {
			url = "%[5]s"
			realm = "%[6]s"
		}
	}
}
server default {
	listen {
		type = auth
		ipaddr = 127.0.0.1
		port = %[4]d
	}
	authorize {
		update control {
			&Auth-Type := Perl
		}
	}
	authenticate {
		Auth-Type Perl {
			perl
		}
	}
	post-auth {
		update reply {
			&Message-Authenticator := 0x00
		}
		Post-Auth-Type REJECT {
			update reply {
				&Message-Authenticator := 0x00
			}
		}
	}
}
`
