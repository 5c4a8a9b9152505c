package server_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/server"
)

func TestControlSocket(t *testing.T) {
	ctx := t.Context()
	dir, err := os.MkdirTemp("", "ctl") // short: Unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithKDFParams(authsrv.KDFParams{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })

	if _, err := server.DialControl(dir); err == nil {
		t.Fatal("DialControl succeeded with nobody listening")
	}
	l, err := server.ListenControl(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: server.Control(s)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	if st, err := os.Stat(filepath.Join(dir, server.ControlSocket)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", st, err)
	}

	cc, err := server.DialControl(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.AddAdmin(ctx, "ops", "first"); err != nil {
		t.Fatal(err)
	}
	if err := cc.AddAdmin(ctx, "ops", "again"); err == nil || !strings.HasPrefix(err.Error(), "ERR302: ") {
		t.Errorf("duplicate add: %v", err)
	}
	if err := cc.AddAdmin(ctx, "bad name", "x"); err == nil || !strings.HasPrefix(err.Error(), "ERR905: ") {
		t.Errorf("bad name: %v", err)
	}
	if err := cc.SetAdminPassword(ctx, "ops", "second"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Admins().Check(ctx, "ops", "second"); !ok {
		t.Error("password change over the socket not applied")
	}
	if err := cc.SetAdminPassword(ctx, "nobody", "x"); err == nil || !strings.HasPrefix(err.Error(), "ERR601: ") {
		t.Errorf("unknown admin: %v", err)
	}
	list, err := cc.Admins(ctx)
	if err != nil || len(list) != 1 || list[0].Username != "ops" || list[0].Created.IsZero() {
		t.Fatalf("Admins = %+v, %v", list, err)
	}

	var buf bytes.Buffer
	if n, err := cc.Backup(ctx, &buf); err != nil || n == 0 {
		t.Fatalf("Backup = %d, %v", n, err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := authsrv.Restore(&buf, dst, authsrv.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := authsrv.New(authsrv.WithDataDir(dst))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	if ok, _ := r.Admins().Check(ctx, "ops", "second"); !ok {
		t.Error("the backup taken over the socket lost the admin")
	}

	if err := cc.SetAdminDisabled(ctx, "ops", true); err != nil {
		t.Fatal(err)
	}
	if list, _ := cc.Admins(ctx); len(list) != 1 || !list[0].Disabled {
		t.Errorf("after disable: %+v", list)
	}
	if ok, _ := s.Admins().Check(ctx, "ops", "second"); ok {
		t.Error("a disabled administrator logs in")
	}
	if err := cc.SetAdminDisabled(ctx, "ops", false); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Admins().Check(ctx, "ops", "second"); !ok {
		t.Error("an enabled administrator cannot log in")
	}
	if err := cc.SetAdminDisabled(ctx, "nobody", true); err == nil || !strings.HasPrefix(err.Error(), "ERR601: ") {
		t.Errorf("disable an unknown admin: %v", err)
	}
	before := s.JWTKeys()
	k, err := cc.RotateJWTKey(ctx, authsrv.JWTRotation{})
	if err != nil || !k.Current || k.KID == before[0].KID {
		t.Fatalf("RotateJWTKey = %+v, %v (before %+v)", k, err, before)
	}
	if ring, err := cc.JWTKeys(ctx); err != nil || len(ring) != 2 || ring[1].KID != k.KID || s.JWTKeys()[1].KID != k.KID {
		t.Errorf("JWTKeys = %+v, %v", ring, err)
	}

	if err := cc.DeleteAdmin(ctx, "ops"); err != nil {
		t.Fatal(err)
	}
	if list, _ := cc.Admins(ctx); len(list) != 0 {
		t.Errorf("after delete: %+v", list)
	}
}
