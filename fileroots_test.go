package authsrv_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/notify"
)

// TestFileRootsReachNotify: a Server given WithFileRoots confines the
// S/MIME files of its SMTP servers (catalogue B7): its own enckey, a
// symlink to it placed in a root and /etc/shadow are refused with the
// rule; without roots the data directory is still protected; the default
// passwd type follows the same roots.
func TestFileRootsReachNotify(t *testing.T) {
	base := t.TempDir()
	data, root := filepath.Join(base, "data"), filepath.Join(base, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, data, authsrv.WithFileRoots(root))
	enckey := filepath.Join(data, authsrv.EncKeyFile)
	link := filepath.Join(root, "key.pem")
	if err := os.Symlink(enckey, link); err != nil {
		t.Fatal(err)
	}
	smime := func(key string) notify.SMTPServer {
		return notify.SMTPServer{Identifier: "m", Server: "127.0.0.1", SMIME: true, PrivateKey: key, Certificate: filepath.Join(root, "cert.pem")}
	}
	for key, rule := range map[string]string{
		enckey:        "is in the server's data directory",
		link:          "is in the server's data directory",
		"/etc/shadow": "is outside the allowed directories",
	} {
		if err := s.Notify().SetSMTP(t.Context(), smime(key)); err == nil || !strings.Contains(err.Error(), rule) {
			t.Errorf("S/MIME key %s: %v; want %q", key, err, rule)
		}
	}
	if err := s.Notify().SetSMTP(t.Context(), smime(filepath.Join(root, "key.pem.new"))); err != nil {
		t.Errorf("a key beneath the root: %v", err)
	}
	if _, err := s.Resolvers().Save(t.Context(), "users", map[string]string{"type": "passwdresolver", "filename": "/etc/passwd"}); err == nil ||
		!strings.Contains(err.Error(), "outside the allowed directories") {
		t.Errorf("a passwd file outside the roots of the default types: %v", err)
	}

	bare := newServer(t, filepath.Join(base, "bare"))
	key := filepath.Join(base, "bare", authsrv.EncKeyFile)
	if err := bare.Notify().SetSMTP(t.Context(), smime(key)); err == nil || !strings.Contains(err.Error(), "data directory") {
		t.Errorf("without roots, the enckey as S/MIME key: %v", err)
	}

	for _, bad := range []string{"", "relative/dir"} {
		if _, err := authsrv.New(authsrv.WithDataDir(t.TempDir()), authsrv.WithFileRoots(bad)); err == nil || !strings.Contains(err.Error(), "absolute") {
			t.Errorf("WithFileRoots(%q): %v", bad, err)
		}
	}
}
