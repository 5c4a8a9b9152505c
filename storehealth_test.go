package authsrv_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/store/postgres"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

// pingCounter passes a store through and counts its pings.
type pingCounter struct {
	*postgres.Store
	pings atomic.Int64
}

func (p *pingCounter) Ping(ctx context.Context) error {
	p.pings.Add(1)
	return p.Store.Ping(ctx)
}

func openPG(t *testing.T, pg *testsvc.PostgresServer, schema string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), pg.DSN(), postgres.Options{Schema: schema, QueryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestReadyFollowsPostgres: readiness fails as soon as PostgreSQL stops,
// with ErrStoreUnreachable, pings the database at most once a second
// however many probes come, and recovers by itself when it is back. A
// node with another enckey is refused at start.
func TestReadyFollowsPostgres(t *testing.T) {
	pg := testsvc.Postgres(t)
	st := &pingCounter{Store: openPG(t, pg, "ready")}
	encKey := []byte(strings.Repeat("k", 32))
	jwtKey := []byte(strings.Repeat("j", 32))
	s, err := authsrv.New(authsrv.WithStore(st), authsrv.WithEncKey(encKey), authsrv.WithJWTKey(jwtKey), cheapKDF)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Ready(t.Context()); err != nil {
		t.Fatalf("ready: %v", err)
	}

	// The enckey canary, through WithStore: other keys are refused.
	other, err := authsrv.New(authsrv.WithStore(st), authsrv.WithEncKey([]byte(strings.Repeat("x", 32))), authsrv.WithJWTKey(jwtKey), cheapKDF)
	if !errors.Is(err, authsrv.ErrWrongKey) {
		if other != nil {
			_ = other.Close()
		}
		t.Fatalf("a node with another enckey: %v, want ErrWrongKey", err)
	}

	pg.Stop(t)
	err = s.Ready(t.Context())
	if !errors.Is(err, authsrv.ErrStoreUnreachable) {
		t.Fatalf("ready with PostgreSQL stopped: %v, want ErrStoreUnreachable", err)
	}
	if strings.Contains(err.Error(), pg.Password) {
		t.Errorf("the error shows the password: %v", err)
	}
	// A probe storm: 64 probes at once, again and again for 2.5 s.
	before, start := st.pings.Load(), time.Now()
	probes := 0
	for time.Since(start) < 2500*time.Millisecond {
		probes += 64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				if err := s.Ready(t.Context()); !errors.Is(err, authsrv.ErrStoreUnreachable) {
					t.Errorf("ready during the storm: %v", err)
				}
			})
		}
		wg.Wait()
		time.Sleep(5 * time.Millisecond)
	}
	pings, took := st.pings.Load()-before, time.Since(start)
	if limit := int64(took/time.Second) + 2; pings < 2 || pings > limit {
		t.Errorf("%d probes in %s pinged the database %d times, want 2 to %d (once a second)", probes, took, pings, limit)
	}
	t.Logf("%d probes in %s: %d pings", probes, took.Round(time.Millisecond), pings)

	pg.Start(t)
	deadline := time.Now().Add(15 * time.Second)
	for s.Ready(t.Context()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not ready 15 s after PostgreSQL's return: %v", s.Ready(t.Context()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCopiedStoreServes: a token enrolled on a bbolt data directory
// validates on a server that runs on the PostgreSQL copy of it, with the
// same data directory's keys, and the OTP used there is used on the
// copy back to bbolt too.
func TestCopiedStoreServes(t *testing.T) {
	pg := testsvc.Postgres(t)
	ctx := t.Context()
	dir := t.TempDir()
	users := filepath.Join(t.TempDir(), "users.passwd")
	if err := os.WriteFile(users, []byte("alice:x:1000:1000:Alice,,,:/home/alice:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hotp := func(n uint64) string { return otp.HOTP(hotpKey, n, 6, otp.SHA1) }
	alice := func(pass string) validate.Request {
		return validate.Request{User: "alice", Realm: "realm1", Pass: pass}
	}

	onBolt, err := authsrv.New(authsrv.WithDataDir(dir), cheapKDF)
	if err != nil {
		t.Fatal(err)
	}
	c := caller.Caller{}
	if _, err := onBolt.Ops().SetResolver(ctx, c, "users", map[string]string{"type": "passwdresolver", "fileName": users}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := onBolt.Ops().SetRealm(ctx, c, "realm1", []realm.Entry{{Name: "users"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := onBolt.Ops().InitToken(ctx, c, authsrv.TokenInit{Type: "hotp", Serial: "HOTPCOPY",
		User:   authsrv.Target{User: "alice", Realm: "realm1"},
		Params: token.Params{"otpkey": fmt.Sprintf("%x", hotpKey), "pin": "1234"}}); err != nil {
		t.Fatal(err)
	}
	if res, err := onBolt.Validator().Check(ctx, alice("1234"+hotp(0))); err != nil || !res.Value {
		t.Fatalf("check on bbolt: %v %+v", err, res)
	}
	if err := onBolt.Close(); err != nil {
		t.Fatal(err)
	}

	src, err := bolt.Open(filepath.Join(dir, authsrv.DBFile), bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pgStore := openPG(t, pg, "copied")
	if _, err := store.Copy(ctx, pgStore, src, store.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = src.Close()

	// The data directory gives the keys, PostgreSQL the data.
	onPG, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithStore(pgStore), cheapKDF)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = onPG.Close() })
	if res, err := onPG.Validator().Check(ctx, alice("1234"+hotp(0))); err != nil || res.Value {
		t.Errorf("the OTP used on bbolt is accepted again on the copy: %v %+v", err, res)
	}
	if res, err := onPG.Validator().Check(ctx, alice("1234"+hotp(1))); err != nil || !res.Value {
		t.Fatalf("check on PostgreSQL: %v %+v", err, res)
	}
	if err := onPG.Close(); err != nil {
		t.Fatal(err)
	}

	// And back into a new bbolt file.
	back := filepath.Join(t.TempDir(), authsrv.DBFile)
	dst, err := bolt.Open(back, bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Copy(ctx, dst, pgStore, store.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	onBack, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithStore(dst), cheapKDF)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = onBack.Close(); _ = dst.Close() })
	if res, err := onBack.Validator().Check(ctx, alice("1234"+hotp(1))); err != nil || res.Value {
		t.Errorf("the OTP used on PostgreSQL is accepted again on the copy back: %v %+v", err, res)
	}
	if res, err := onBack.Validator().Check(ctx, alice("1234"+hotp(2))); err != nil || !res.Value {
		t.Errorf("check on the copy back: %v %+v", err, res)
	}
}
