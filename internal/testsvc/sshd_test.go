package testsvc_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/testsvc"
)

// TestSSHD: sshd lets in exactly the key its AuthorizedKeysCommand prints
// for the user logging in (the command gets %u), refuses another key and
// another user, and is gone after Stop.
func TestSSHD(t *testing.T) {
	testsvc.RequireSSHD(t)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	goodKey, goodLine := testsvc.NewSSHKey(t, "good")
	otherKey, _ := testsvc.NewSSHKey(t, "other")

	dir := testsvc.SecureDir(t)
	keys := filepath.Join(dir, "keys")
	if err := os.WriteFile(keys, []byte(goodLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The command prints the key only for the user the test logs in as,
	// so a successful login shows that sshd passed %u.
	script := filepath.Join(dir, "keys-command")
	body := "#!/bin/sh\n[ \"$1\" = '" + me.Username + "' ] && exec cat " + keys + "\nexit 0\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	s := testsvc.SSHD(t, testsvc.SSHDConfig{KeysCommand: []string{script, "%u"}})

	out, err := s.Login(t.Context(), me.Username, goodKey, "echo", "in-as-$(id -un)")
	if err != nil || strings.TrimSpace(out) != "in-as-"+me.Username {
		t.Fatalf("login with the printed key: %v %q; log: %s", err, out, s.Log())
	}
	if out, err := s.Login(t.Context(), me.Username, otherKey, "true"); err == nil {
		t.Errorf("a key the command did not print logs in: %q", out)
	}
	if s.CommandUser != me.Username {
		// As root the command runs as nobody: root's key lookup for
		// nobody (whose shell is nologin) prints nothing.
		if out, err := s.Login(t.Context(), s.CommandUser, goodKey, "true"); err == nil {
			t.Errorf("another user logs in with the key: %q", out)
		}
	}
	if !strings.Contains(s.Log(), "Accepted publickey for "+me.Username) {
		t.Errorf("sshd log lacks the accepted login: %s", s.Log())
	}
}

// TestSecureDir: the directory and its parents pass sshd's ownership and
// mode checks.
func TestSecureDir(t *testing.T) {
	d := testsvc.SecureDir(t)
	for p := d; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s: mode %v", p, fi.Mode())
		}
		if p == "/" {
			break
		}
	}
	if strings.HasPrefix(d, os.TempDir()+"/") {
		t.Errorf("SecureDir %s is under the world-writable %s", d, os.TempDir())
	}
}
