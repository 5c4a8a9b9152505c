package testsvc

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshdDirs are where Debian's openssh-server installs sshd (it is not in a
// normal user's PATH).
var sshdDirs = []string{"/usr/sbin", "/usr/local/sbin"}

// sshdPrivsepDir is Debian's privilege-separation directory, which sshd
// requires when it runs as root (systemd creates it at boot; containers
// often lack it).
const sshdPrivsepDir = "/run/sshd"

// SSHDConfig configures SSHD.
type SSHDConfig struct {
	// KeysCommand is the AuthorizedKeysCommand: an absolute program path
	// and its arguments ("%u" is the user logging in). sshd runs it only
	// when the program and every directory above it are owned by root (or
	// KeysCommandUser) and not writable by group or others: put it in a
	// SecureDir.
	KeysCommand []string
	// KeysCommandUser is the AuthorizedKeysCommandUser; default
	// SSHDCommandUser.
	KeysCommandUser string
}

// SSHDServer is a running OpenSSH sshd owned by one test. It accepts only
// public keys, and only those its AuthorizedKeysCommand prints (no
// authorized_keys files).
type SSHDServer struct {
	// Port is the TCP port on 127.0.0.1.
	Port int
	// Dir is the temporary directory with the configuration, the host key
	// and sshd.log.
	Dir string
	// CommandUser is the AuthorizedKeysCommandUser.
	CommandUser string

	client string // the ssh client

	proc
}

// SSHD starts OpenSSH's sshd (Debian's openssh-server) on a free port of
// 127.0.0.1 in the foreground (-D, logging to sshd.log with -e), with its
// own host key and configuration in tb.TempDir(): public keys only,
// AuthorizedKeysFile none, the AuthorizedKeysCommand of cfg, no PAM. It
// stops sshd when the test ends. It skips the test when sshd or the ssh
// client is missing or the test does not run as root (fails under CI, see
// RequireSSHD).
func SSHD(tb testing.TB, cfg SSHDConfig) *SSHDServer {
	tb.Helper()
	bin, client := RequireSSHD(tb)
	if len(cfg.KeysCommand) == 0 || !filepath.IsAbs(cfg.KeysCommand[0]) {
		tb.Fatalf("sshd: the AuthorizedKeysCommand %q is not an absolute path", cfg.KeysCommand)
	}
	if cfg.KeysCommandUser == "" {
		cfg.KeysCommandUser = SSHDCommandUser(tb)
	}
	for _, a := range cfg.KeysCommand {
		if a == "" || strings.ContainsAny(a, " \t\r\n\"'\\") {
			tb.Fatalf("sshd: AuthorizedKeysCommand argument %q: empty, or blanks, quotes or backslashes (sshd splits the line)", a)
		}
	}
	if err := os.MkdirAll(sshdPrivsepDir, 0o755); err != nil {
		tb.Fatalf("sshd: the privilege-separation directory %s: %v", sshdPrivsepDir, err)
	}
	dir := tb.TempDir()
	s := &SSHDServer{
		proc:        proc{name: "sshd"},
		Port:        FreePort(tb),
		Dir:         dir,
		CommandUser: cfg.KeysCommandUser,
		client:      client,
	}
	hostKey := filepath.Join(dir, "ssh_host_ed25519_key")
	writeSSHKey(tb, hostKey, "authsrv-test-host")

	var conf strings.Builder
	fmt.Fprintf(&conf, "Port %d\nListenAddress 127.0.0.1\nAddressFamily inet\n", s.Port)
	fmt.Fprintf(&conf, "HostKey %s\nPidFile %s\n", hostKey, filepath.Join(dir, "sshd.pid"))
	conf.WriteString(`LogLevel VERBOSE
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AuthenticationMethods publickey
PermitRootLogin prohibit-password
AuthorizedKeysFile none
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
AllowTcpForwarding no
AllowAgentForwarding no
PermitTTY no
MaxAuthTries 3
LoginGraceTime 30
`)
	fmt.Fprintf(&conf, "AuthorizedKeysCommand %s\nAuthorizedKeysCommandUser %s\n", strings.Join(cfg.KeysCommand, " "), cfg.KeysCommandUser)
	confFile := filepath.Join(dir, "sshd_config")
	// OpenSSH 9.8 and newer penalise addresses whose logins fail (the
	// tests refuse logins on purpose); older ones do not know the option.
	penalties := "PerSourcePenalties no\n"
	for _, extra := range []string{penalties, ""} {
		if err := os.WriteFile(confFile, []byte(conf.String()+extra), 0o600); err != nil {
			tb.Fatal(err)
		}
		out, err := exec.Command(bin, "-t", "-f", confFile).CombinedOutput()
		if err == nil {
			break
		}
		if extra != "" && strings.Contains(string(out), "PerSourcePenalties") {
			continue
		}
		tb.Fatalf("sshd -t refuses the configuration: %v: %s", err, out)
	}
	tb.Cleanup(func() { _ = s.stop() })
	s.start(tb, bin, confFile)
	return s
}

// RequireSSHD returns the paths of sshd and of the ssh client, or skips
// the test (fails it under CI) when one is missing or the test does not
// run as root. sshd needs root here: it runs the AuthorizedKeysCommand as
// another user and reads the login account's shadow entry (without it an
// account counts as locked). A test calls it first to skip before costly
// setup.
func RequireSSHD(tb testing.TB) (sshd, client string) {
	tb.Helper()
	sshd = Require(tb, "sshd", sshdDirs...)
	client = Require(tb, "ssh")
	if os.Geteuid() != 0 {
		msg := fmt.Sprintf("sshd tests need root (sshd runs the AuthorizedKeysCommand as another user and reads the account's shadow entry); this test runs as uid %d", os.Geteuid())
		if os.Getenv("CI") != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return sshd, client
}

func (s *SSHDServer) start(tb testing.TB, bin, confFile string) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	logf, err := os.OpenFile(filepath.Join(s.Dir, "sshd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	// -D keeps sshd in the foreground (the pid we start is the listener
	// we stop), -e logs to standard error (sshd.log).
	cmd := exec.Command(bin, "-D", "-e", "-f", confFile)
	s.launch(tb, cmd, logf)
	done := s.done
	addr := "127.0.0.1:" + strconv.Itoa(s.Port)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.Log(), "Server listening on") {
		select {
		case <-done:
			s.cmd, s.done = nil, nil
			tb.Fatalf("sshd exited at start: %s", s.Log())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("sshd does not listen on %s; log: %s", addr, s.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Log returns the end of sshd.log (sshd's messages, the keys command's
// standard error among them).
func (s *SSHDServer) Log() string { return fileTail(filepath.Join(s.Dir, "sshd.log")) }

// Login runs the OpenSSH client in batch mode as user with the private
// key in identity (no agent, no config file, no known hosts) and runs
// command on the server. It returns the client's output and its error:
// nil when the login and the command succeeded.
func (s *SSHDServer) Login(ctx context.Context, user, identity string, command ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := []string{
		"-F", "/dev/null",
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null",
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none",
		"-o", "PasswordAuthentication=no",
		"-o", "KbdInteractiveAuthentication=no",
		"-o", "ConnectTimeout=10",
		"-o", "LogLevel=ERROR",
		"-i", identity,
		"-p", strconv.Itoa(s.Port),
		"-l", user,
		"127.0.0.1", "--",
	}
	cmd := exec.CommandContext(ctx, s.client, append(args, command...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + s.Dir}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// SSHDCommandUser returns the user for sshd's AuthorizedKeysCommandUser:
// nobody when the test runs as root (as on a real host, the command gets
// no rights it does not need), else the test's own user (sshd cannot
// switch users without root).
func SSHDCommandUser(tb testing.TB) string {
	tb.Helper()
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("nobody"); err != nil {
			tb.Fatalf("sshd: no user nobody for the AuthorizedKeysCommand: %v", err)
		}
		return "nobody"
	}
	u, err := user.Current()
	if err != nil {
		tb.Fatal(err)
	}
	return u.Username
}

// ChownToUser gives path to the user name (a file the
// AuthorizedKeysCommand reads, say). Without root it only checks that
// name is the current user, who owns the files it creates.
func ChownToUser(tb testing.TB, path, name string) {
	tb.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		tb.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if os.Geteuid() != 0 {
		if uid != os.Geteuid() {
			tb.Fatalf("chown %s to %s needs root", path, name)
		}
		return
	}
	if err := os.Chown(path, uid, gid); err != nil {
		tb.Fatal(err)
	}
}

// SecureDir returns a new directory (mode 0755, removed when the test
// ends) that sshd accepts for an AuthorizedKeysCommand: it and every
// directory above it are owned by root (or, without root, by the current
// user) and not writable by group or others, and others may enter them.
// The system's temporary directory is world-writable, so the directory
// is made in /run, /var/lib or /opt as root, and in the home or cache
// directory otherwise. It skips the test (fails under CI) when there is
// no such place.
func SecureDir(tb testing.TB) string {
	tb.Helper()
	var candidates []string
	if os.Geteuid() == 0 {
		candidates = []string{"/run", "/var/lib", "/opt"}
	} else {
		if d, err := os.UserCacheDir(); err == nil {
			candidates = append(candidates, d)
		}
		if d, err := os.UserHomeDir(); err == nil {
			candidates = append(candidates, d)
		}
	}
	var why []string
	for _, c := range candidates {
		if err := securePath(c); err != nil {
			why = append(why, err.Error())
			continue
		}
		d, err := os.MkdirTemp(c, "authsrv-test-")
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		tb.Cleanup(func() { _ = os.RemoveAll(d) })
		if err := os.Chmod(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		return d
	}
	msg := "no directory sshd accepts for an AuthorizedKeysCommand: " + strings.Join(why, "; ")
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// securePath checks dir and its parents as sshd checks the
// AuthorizedKeysCommand's directories, and that others may enter them.
func securePath(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return errors.New("no file owner on this system")
		}
		switch {
		case int(st.Uid) != 0 && int(st.Uid) != os.Geteuid():
			return fmt.Errorf("%s is owned by uid %d", p, st.Uid)
		case fi.Mode().Perm()&0o022 != 0:
			return fmt.Errorf("%s is writable by group or others", p)
		case os.Geteuid() == 0 && fi.Mode().Perm()&0o001 == 0:
			return fmt.Errorf("%s cannot be entered by others", p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// NewSSHKey makes an Ed25519 key pair for a client: the private key in
// OpenSSH's format in a file of mode 0600 (as ssh wants it) in
// tb.TempDir(), and the public key as an authorized_keys line ending in
// comment.
func NewSSHKey(tb testing.TB, comment string) (privateKeyFile, authorizedKey string) {
	tb.Helper()
	privateKeyFile = filepath.Join(tb.TempDir(), "id_ed25519")
	return privateKeyFile, writeSSHKey(tb, privateKeyFile, comment)
}

// writeSSHKey writes a new Ed25519 private key to file and returns its
// public key line.
func writeSSHKey(tb testing.TB, file, comment string) string {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
		tb.Fatal(err)
	}
	pk, err := ssh.NewPublicKey(pub)
	if err != nil {
		tb.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pk)))
	if comment != "" {
		line += " " + comment
	}
	return line
}
