package authsrv_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/golang-jwt/jwt/v5"
)

// cheapKDF keeps password hashing fast in tests.
var cheapKDF = authsrv.WithKDFParams(authsrv.KDFParams{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16})

func newServer(t *testing.T, dir string, opts ...authsrv.Option) *authsrv.Server {
	t.Helper()
	s, err := authsrv.New(append([]authsrv.Option{authsrv.WithDataDir(dir), cheapKDF}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestNewValidatesOptions(t *testing.T) {
	cases := []struct {
		name string
		opts []authsrv.Option
		want []string // every one must appear in the joined error
	}{
		{"nothing", nil, []string{"no data directory and no store"}},
		{"store without keys", []authsrv.Option{authsrv.WithStore(storetest.Open(t))},
			[]string{"enckey must be given", "JWT key must be given"}},
		{"bad values together", []authsrv.Option{
			authsrv.WithDataDir(""), authsrv.WithEncKey([]byte("short")), authsrv.WithJWTKey([]byte("x")),
			authsrv.WithNodeName(" "), authsrv.WithKDFBudget(0, time.Second), authsrv.WithOpenTimeout(0),
			authsrv.WithJWTLifetime(0), authsrv.WithClock(nil), authsrv.WithRand(nil), authsrv.WithDialPolicy(nil),
			authsrv.WithStoreResidentLimit(-1),
		}, []string{"store resident limit", "data directory: empty path", "enckey: want 32 bytes", "jwt key", "node name", "kdf budget",
			"open timeout", "jwt lifetime", "clock: nil", "rand: nil", "dial policy: nil"}},
		{"kdf above caps", []authsrv.Option{authsrv.WithDataDir(t.TempDir()),
			authsrv.WithKDFParams(authsrv.KDFParams{Time: 1000, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16})},
			[]string{"kdf"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := authsrv.New(tc.opts...)
			if err == nil {
				_ = s.Close()
				t.Fatal("New succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestDataDirCreatedOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := newServer(t, dir)
	for _, f := range []string{authsrv.EncKeyFile, authsrv.JWTKeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o400 {
			t.Errorf("%s mode %o, want 0400", f, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %o, want 0700", st.Mode().Perm())
	}
	tok, err := s.IssueJWT(jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	again := newServer(t, dir)
	if err := again.ParseJWT(tok, &jwt.RegisteredClaims{}); err != nil {
		t.Errorf("the JWT key changed across starts: a token issued before does not verify: %v", err)
	}
}

func TestWrongEncKeyStopsStart(t *testing.T) {
	dir := t.TempDir()
	s := newServer(t, dir)
	_ = s.Close()
	other := bytes.Repeat([]byte{7}, 32)
	_, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithEncKey(other), cheapKDF)
	if !errors.Is(err, authsrv.ErrWrongKey) {
		t.Fatalf("err = %v, want ErrWrongKey", err)
	}
	// A key file replaced on disk is caught the same way.
	p := filepath.Join(dir, authsrv.EncKeyFile)
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, other, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := authsrv.New(authsrv.WithDataDir(dir), cheapKDF); !errors.Is(err, authsrv.ErrWrongKey) {
		t.Fatalf("err = %v, want ErrWrongKey", err)
	}
}

func TestMissingEncKeyWithDataStopsStart(t *testing.T) {
	dir := t.TempDir()
	_ = newServer(t, dir).Close()
	if err := os.Remove(filepath.Join(dir, authsrv.EncKeyFile)); err != nil {
		t.Fatal(err)
	}
	_, err := authsrv.New(authsrv.WithDataDir(dir), cheapKDF)
	if err == nil || !strings.Contains(err.Error(), "no enckey") {
		t.Fatalf("err = %v, want a missing-enckey error", err)
	}
	if _, err := os.Stat(filepath.Join(dir, authsrv.EncKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Error("a new enckey was created next to existing data")
	}
}

func TestSecondServerOnSameDirFails(t *testing.T) {
	dir := t.TempDir()
	newServer(t, dir)
	start := time.Now()
	_, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithOpenTimeout(200*time.Millisecond), cheapKDF)
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "another") {
		t.Errorf("message %q does not say another process holds the data", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestWithStoreAndKeys(t *testing.T) {
	st := storetest.Open(t)
	key := bytes.Repeat([]byte{1}, 32)
	s, err := authsrv.New(authsrv.WithStore(st), authsrv.WithEncKey(key), authsrv.WithJWTKey(key), cheapKDF,
		authsrv.WithNodeName("n1"), authsrv.WithSuperuserRealms("Admins", " ", "OPS "))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.SuperuserRealms(); strings.Join(got, ",") != "admins,ops" {
		t.Errorf("superuser realms %v", got)
	}
	if s.NodeName() != "n1" || s.DataDir() != "" {
		t.Errorf("node %q dir %q", s.NodeName(), s.DataDir())
	}
	if err := s.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	// The caller's store stays open.
	if err := st.View(t.Context(), func(store.Tx) error { return nil }); err != nil {
		t.Errorf("store closed by Server.Close: %v", err)
	}
	if s.Started() || s.Ready(t.Context()) == nil {
		t.Error("closed server still started/ready")
	}
	// Another key on the same store is refused.
	if _, err := authsrv.New(authsrv.WithStore(st), authsrv.WithEncKey(bytes.Repeat([]byte{2}, 32)),
		authsrv.WithJWTKey(key), cheapKDF); !errors.Is(err, authsrv.ErrWrongKey) {
		t.Fatalf("err = %v", err)
	}
}

func TestRunStopsOnCloseAndContext(t *testing.T) {
	s := newServer(t, t.TempDir())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	go func() { done <- s.Run(t.Context()) }()
	_ = s.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBackupRestore(t *testing.T) {
	ctx := t.Context()
	src := t.TempDir()
	s := newServer(t, src)
	if err := s.Admins().Add(ctx, "admin", "pa55 word"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	m, err := s.Backup(ctx, &buf) // while the server is open
	if err != nil {
		t.Fatal(err)
	}
	if m.DBBytes == 0 || m.Version != authsrv.Version {
		t.Errorf("manifest %+v", m)
	}
	backup := buf.Bytes()
	issued, err := s.IssueJWT(jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("into a new directory", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "new")
		if _, err := authsrv.Restore(bytes.NewReader(backup), dst, authsrv.RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		r := newServer(t, dst)
		ok, err := r.Admins().Check(ctx, "admin", "pa55 word")
		if err != nil || !ok {
			t.Fatalf("restored admin login: ok=%v err=%v", ok, err)
		}
		if err := r.ParseJWT(issued, &jwt.RegisteredClaims{}); err != nil {
			t.Errorf("JWT key not restored: a token issued before does not verify: %v", err)
		}
		if st, _ := os.Stat(filepath.Join(dst, authsrv.EncKeyFile)); st.Mode().Perm() != 0o400 {
			t.Errorf("restored enckey mode %o", st.Mode().Perm())
		}
	})
	t.Run("refuses a running server's directory", func(t *testing.T) {
		_, err := authsrv.Restore(bytes.NewReader(backup), src, authsrv.RestoreOptions{Force: true})
		if !errors.Is(err, authsrv.ErrInUse) {
			t.Fatalf("err = %v, want ErrInUse", err)
		}
	})
	t.Run("refuses existing data without force", func(t *testing.T) {
		dst := t.TempDir()
		_ = newServer(t, dst).Close()
		if _, err := authsrv.Restore(bytes.NewReader(backup), dst, authsrv.RestoreOptions{}); err == nil ||
			!strings.Contains(err.Error(), "already holds data") {
			t.Fatalf("err = %v", err)
		}
		if _, err := authsrv.Restore(bytes.NewReader(backup), dst, authsrv.RestoreOptions{Force: true}); err != nil {
			t.Fatalf("forced: %v", err)
		}
		r := newServer(t, dst)
		if ok, _ := r.Admins().Check(ctx, "admin", "pa55 word"); !ok {
			t.Error("forced restore did not bring the admin back")
		}
	})

	bad := []struct {
		name string
		edit func(name string, hdr *tar.Header, data []byte) (*tar.Header, []byte, bool)
		want string
	}{
		{"path traversal", func(n string, h *tar.Header, d []byte) (*tar.Header, []byte, bool) {
			if n == authsrv.JWTKeyFile {
				h.Name = "../" + n
			}
			return h, d, true
		}, "unexpected member"},
		{"symlink member", func(n string, h *tar.Header, d []byte) (*tar.Header, []byte, bool) {
			if n == authsrv.JWTKeyFile {
				h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, "/etc/passwd", 0
				return h, nil, true
			}
			return h, d, true
		}, "not a regular file"},
		{"missing store", func(n string, h *tar.Header, d []byte) (*tar.Header, []byte, bool) {
			return h, d, n != authsrv.DBFile
		}, "no authsrv.db"},
		{"wrong enckey", func(n string, h *tar.Header, d []byte) (*tar.Header, []byte, bool) {
			if n == authsrv.EncKeyFile {
				d = bytes.Repeat([]byte{9}, 32)
			}
			return h, d, true
		}, "canary"},
		{"oversized key", func(n string, h *tar.Header, d []byte) (*tar.Header, []byte, bool) {
			if n == authsrv.EncKeyFile {
				d = make([]byte, 4096)
				h.Size = 4096
			}
			return h, d, true
		}, "too large"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "d")
			_, err := authsrv.Restore(bytes.NewReader(rewriteTar(t, backup, tc.edit)), dst, authsrv.RestoreOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dst, authsrv.DBFile)); !errors.Is(err, os.ErrNotExist) {
				t.Error("a refused restore left a store behind")
			}
			if ents, _ := os.ReadDir(dst); len(ents) != 0 {
				t.Errorf("a refused restore left files: %v", ents)
			}
		})
	}
}

func rewriteTar(t *testing.T, in []byte, edit func(string, *tar.Header, []byte) (*tar.Header, []byte, bool)) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(in))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		h, d, keep := edit(hdr.Name, hdr, data)
		if !keep {
			continue
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(d))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
