package secret_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/authsrv/authsrv/internal/secret"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, secret.KeySize) }

func TestLoadOrCreateKeyFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes are not enforced on windows")
	}

	t.Run("create then reload", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "enckey")
		want := testKey(7)
		key, created, err := secret.LoadOrCreateKeyFile(path, bytes.NewReader(want))
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if !created || !bytes.Equal(key, want) {
			t.Fatalf("create: created=%v, key from rnd=%v", created, bytes.Equal(key, want))
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o400 {
			t.Errorf("mode = %04o, want 0400", got)
		}
		if fi.Size() != secret.KeySize {
			t.Errorf("size = %d, want %d", fi.Size(), secret.KeySize)
		}

		// A second call must not consume rnd nor change the key.
		key2, created, err := secret.LoadOrCreateKeyFile(path, iotest.ErrReader(errors.New("rnd must not be used")))
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		if created || !bytes.Equal(key2, want) {
			t.Fatalf("reload: created=%v, same key=%v", created, bytes.Equal(key2, want))
		}
	})

	t.Run("default rand", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "enckey")
		key, created, err := secret.LoadOrCreateKeyFile(path, nil)
		if err != nil || !created || len(key) != secret.KeySize {
			t.Fatalf("got len %d, created=%v, err=%v", len(key), created, err)
		}
	})

	t.Run("failing rand leaves no file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "enckey")
		_, _, err := secret.LoadOrCreateKeyFile(path, bytes.NewReader(make([]byte, 5)))
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v, want an error naming %s", err, path)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("key file left behind: %v", err)
		}
	})

	bad := []struct {
		name    string
		content []byte
		mode    os.FileMode
		want    []string // substrings of the error
	}{
		{"too short", make([]byte, 31), 0o400, []string{"31 bytes", "want exactly 32"}},
		{"too long", make([]byte, 33), 0o600, []string{"33 bytes"}},
		{"empty", nil, 0o400, []string{"0 bytes"}},
		{"hex encoded", []byte(strings.Repeat("ab", 32) + "\n"), 0o400, []string{"65 bytes", "hex"}},
		{"world readable", testKey(1), 0o644, []string{"0644", "chmod 0400"}},
		{"group readable", testKey(1), 0o640, []string{"0640", "chmod 0400"}},
		{"world writable", testKey(1), 0o602, []string{"0602", "chmod 0400"}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "enckey")
			if err := os.WriteFile(path, tc.content, tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil { // beat the umask
				t.Fatal(err)
			}
			key, _, err := secret.LoadOrCreateKeyFile(path, nil)
			if err == nil {
				t.Fatalf("no error, key of %d bytes", len(key))
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if bytes.Contains([]byte(err.Error()), tc.content) && len(tc.content) > 0 {
				t.Errorf("error shows the file content")
			}
		})
	}

	t.Run("0600 accepted", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "enckey")
		if err := os.WriteFile(path, testKey(3), 0o600); err != nil {
			t.Fatal(err)
		}
		key, created, err := secret.LoadOrCreateKeyFile(path, nil)
		if err != nil || created || !bytes.Equal(key, testKey(3)) {
			t.Fatalf("created=%v err=%v", created, err)
		}
	})

	t.Run("directory", func(t *testing.T) {
		path := t.TempDir()
		if err := os.Chmod(path, 0o700); err != nil {
			t.Fatal(err)
		}
		_, _, err := secret.LoadOrCreateKeyFile(path, nil)
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("missing directory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nodir", "enckey")
		_, _, err := secret.LoadOrCreateKeyFile(path, bytes.NewReader(testKey(1)))
		if err == nil || !strings.Contains(err.Error(), "cannot be created") || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("path through a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(file, "enckey")
		_, _, err := secret.LoadOrCreateKeyFile(path, nil)
		if err == nil || !strings.Contains(err.Error(), "cannot be opened") || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("unreadable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads files of any mode")
		}
		path := filepath.Join(t.TempDir(), "enckey")
		if err := os.WriteFile(path, testKey(1), 0o000); err != nil {
			t.Fatal(err)
		}
		_, _, err := secret.LoadOrCreateKeyFile(path, nil)
		if err == nil || !strings.Contains(err.Error(), "cannot be opened") || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v", err)
		}
	})
}
