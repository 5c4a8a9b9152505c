package main

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/testsvc"
)

// buildAuthsrv builds this command into dir and returns the binary's path.
func buildAuthsrv(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	bin := filepath.Join(dir, "authsrv")
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// serveBinary runs "bin serve" on a loopback port with a new data
// directory until the test ends; it returns the address, the data
// directory and the first administrator's password.
func serveBinary(t *testing.T, bin string) (addr, dataDir, password string) {
	t.Helper()
	dataDir = shortDir(t)
	cmd := exec.Command(bin, "serve", "-listen", "127.0.0.1:0", "-data-dir", dataDir, "-log-level", "warn")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	var out, errs syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	waitFor(t, "authsrv serve", func() bool {
		select {
		case <-exited:
			t.Fatalf("authsrv serve exited: %s", errs.String())
		default:
		}
		return servingRe.MatchString(out.String())
	})
	return servingRe.FindStringSubmatch(out.String())[2], dataDir, passwordRe.FindStringSubmatch(out.String())[1]
}

// mustAPI sends one request and fails the test unless it succeeds.
func mustAPI(t *testing.T, method, addr, path, jwt string, v url.Values) any {
	t.Helper()
	status, m := apiCall(t, method, addr, path, jwt, v)
	result, _ := m["result"].(map[string]any)
	if status != http.StatusOK || result["status"] != true {
		t.Fatalf("%s %s: %d %v", method, path, status, m)
	}
	return result["value"]
}

// TestSSHKeysWithSSHD is the new user's path, end to end with the built
// binary: a passwd realm with alice, her sshkey token attached to the
// service ID webserver for the local unix user, and a real OpenSSH sshd
// whose AuthorizedKeysCommand is "authsrv ssh-keys" (run by sshd as an
// unprivileged user). The key logs in; another key does not; after the
// token is disabled the key no longer logs in, and after it is enabled
// again it does.
func TestSSHKeysWithSSHD(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	testsvc.RequireSSHD(t)
	secure := testsvc.SecureDir(t) // sshd runs the command only from such a directory
	bin := buildAuthsrv(t, secure)
	addr, dataDir, adminPW := serveBinary(t, bin)
	jwt := adminToken(t, addr, adminPW)

	users := filepath.Join(dataDir, "files", "users")
	if err := os.WriteFile(users, []byte(fileUsers), 0o600); err != nil {
		t.Fatal(err)
	}
	mustAPI(t, http.MethodPost, addr, "/resolver/users", jwt, url.Values{"type": {"passwdresolver"}, "fileName": {users}})
	mustAPI(t, http.MethodPost, addr, "/realm/ssh", jwt, url.Values{"resolvers": {"users"}})
	keyFile, keyLine := testsvc.NewSSHKey(t, "alice@laptop")
	otherKeyFile, _ := testsvc.NewSSHKey(t, "mallory")
	mustAPI(t, http.MethodPost, addr, "/token/init", jwt, url.Values{"type": {"sshkey"}, "serial": {"SSHK0001"}, "sshkey": {keyLine}, "user": {"alice"}, "realm": {"ssh"}})
	mustAPI(t, http.MethodPost, addr, "/serviceid/webserver", jwt, url.Values{"description": {"the web servers"}})
	mustAPI(t, http.MethodPost, addr, "/machine/token", jwt, url.Values{"serial": {"SSHK0001"}, "application": {"ssh"}, "service_id": {"webserver"}, "user": {me.Username}})

	// What the command reads, straight from the server.
	v := mustAPI(t, http.MethodGet, addr, "/machine/authitem/ssh?"+url.Values{"hostname": {"web1"}, "service_id": {"webserver"}, "user": {me.Username}}.Encode(), jwt, nil)
	items, _ := v.(map[string]any)["ssh"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["sshkey"] != keyLine || items[0].(map[string]any)["username"] != "alice" {
		t.Fatalf("authitem: %v", v)
	}

	// The password file: readable by the command's user only.
	pwFile := filepath.Join(secure, "ssh-keys.pw")
	if err := os.WriteFile(pwFile, []byte(adminPW+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	commandUser := testsvc.SSHDCommandUser(t)
	testsvc.ChownToUser(t, pwFile, commandUser)
	keysCmd := []string{bin, "ssh-keys", "-url", "http://" + addr, "-service-id", "webserver", "-admin", "admin", "-password-file", pwFile}
	sshKeys := func(unixUser string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(keysCmd[0], append(keysCmd[1:], unixUser)...)
		cmd.Env = []string{} // as sshd runs it: nothing from the environment
		var out, errs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errs
		err := cmd.Run()
		if strings.Contains(errs.String(), adminPW) || strings.Contains(errs.String(), jwt) {
			t.Errorf("ssh-keys shows the password or a JWT: %q", errs.String())
		}
		if err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatal(err)
			}
		}
		return cmd.ProcessState.ExitCode(), out.String(), errs.String()
	}
	if code, out, errs := sshKeys(me.Username); code != 0 || out != keyLine+"\n" || errs != "" {
		t.Fatalf("ssh-keys %s: exit %d, stdout %q, stderr %q", me.Username, code, out, errs)
	}
	if code, out, errs := sshKeys("nobody-else"); code != 0 || out != "" || errs != "" {
		t.Errorf("ssh-keys for another unix user: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	s := testsvc.SSHD(t, testsvc.SSHDConfig{KeysCommand: append(keysCmd, "%u"), KeysCommandUser: commandUser})
	login := func(key string) error {
		t.Helper()
		_, err := s.Login(t.Context(), me.Username, key, "true")
		return err
	}
	if err := login(keyFile); err != nil {
		t.Fatalf("login with alice's key: %v; sshd log: %s", err, s.Log())
	}
	if err := login(otherKeyFile); err == nil {
		t.Errorf("a key that is not attached logs in")
	}

	mustAPI(t, http.MethodPost, addr, "/token/disable", jwt, url.Values{"serial": {"SSHK0001"}})
	if code, out, errs := sshKeys(me.Username); code != 0 || out != "" {
		t.Errorf("ssh-keys after disable: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if err := login(keyFile); err == nil {
		t.Errorf("the disabled token's key still logs in; sshd log: %s", s.Log())
	}

	mustAPI(t, http.MethodPost, addr, "/token/enable", jwt, url.Values{"serial": {"SSHK0001"}})
	if err := login(keyFile); err != nil {
		t.Errorf("login after enable: %v; sshd log: %s", err, s.Log())
	}

	// A wrong password: the command fails, sshd lets no key in, and
	// neither the log nor the message shows a password.
	if err := os.Chmod(pwFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pwFile, []byte("not-the-password\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pwFile, 0o400); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := sshKeys(me.Username); code != 1 || out != "" || !strings.Contains(errs, "authsrv ssh-keys: login as admin: HTTP 401") {
		t.Errorf("wrong password: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if err := login(keyFile); err == nil {
		t.Errorf("logs in although the key command fails")
	}
	log := s.Log()
	if !strings.Contains(log, "login as admin: HTTP 401") {
		t.Errorf("sshd's log lacks the command's message: %s", log)
	}
	if strings.Contains(log, adminPW) || strings.Contains(log, "not-the-password") || strings.Contains(log, jwt) {
		t.Errorf("sshd's log shows a password or the JWT")
	}
}
