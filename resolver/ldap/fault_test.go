package ldap_test

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/resolver"
	ldapresolver "github.com/authsrv/authsrv/resolver/ldap"
)

// slack is what a call may take beyond its budget under -race on a busy
// machine.
const slack = 750 * time.Millisecond

// blackHole accepts TCP connections and never answers (reliability F8).
func blackHole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "ldap://" + l.Addr().String()
}

// calls runs every operation of the resolver once and reports each
// error and duration.
func calls(ctx context.Context, r *ldapresolver.Store, uid string) map[string]struct {
	err error
	d   time.Duration
} {
	out := map[string]struct {
		err error
		d   time.Duration
	}{}
	run := func(name string, f func() error) {
		start := time.Now()
		err := f()
		out[name] = struct {
			err error
			d   time.Duration
		}{err, time.Since(start)}
	}
	run("UserID", func() error { _, err := r.UserID(ctx, "alice"); return err })
	run("User", func() error { _, err := r.User(ctx, uid); return err })
	run("Search", func() error { _, err := r.Search(ctx, map[string]string{"username": "a*"}); return err })
	run("CheckPassword", func() error {
		ok, err := r.CheckPassword(ctx, uid, password("alice"))
		if ok {
			return errors.New("password accepted")
		}
		return err
	})
	run("Ping", func() error { return r.Ping(ctx) })
	return out
}

func wantUnavailable(t *testing.T, r *ldapresolver.Store, uid string, budget time.Duration) {
	t.Helper()
	for name, c := range calls(t.Context(), r, uid) {
		if !errors.Is(c.err, resolver.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable", name, c.err)
		}
		if c.d > budget+slack {
			t.Errorf("%s took %s, budget %s", name, c.d, budget)
		}
	}
}

func wantWorking(t *testing.T, r *ldapresolver.Store) {
	t.Helper()
	ctx := t.Context()
	uid, err := r.UserID(ctx, "alice")
	if err != nil {
		t.Fatalf("UserID: %v", err)
	}
	if info, err := r.User(ctx, uid); err != nil || info.String(resolver.KeyUsername) != "alice" {
		t.Errorf("User: %v, %v", info, err)
	}
	if ok, err := r.CheckPassword(ctx, uid, password("alice")); !ok || err != nil {
		t.Errorf("CheckPassword: %v, %v", ok, err)
	}
	if err := r.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// TestServerDown is reliability F7: slapd stops, calls fail fast with
// ErrUnavailable, and the same resolver works again once slapd is back.
func TestServerDown(t *testing.T) {
	t.Parallel()
	s := directory(t)
	r := open(t, config(s, "TIMEOUT", "1"))
	wantWorking(t, r)
	uid, _ := r.UserID(t.Context(), "alice")

	s.Stop(t)
	wantUnavailable(t, r, uid, time.Second)
	if v, desc := r.Test(t.Context()); v != false || desc == "" {
		t.Errorf("Test while down = %v, %q", v, desc)
	}

	s.Start(t)
	wantWorking(t, r)

	// A restart between two calls: the pooled connections are dead and
	// the next call must not fail because of them.
	s.Stop(t)
	s.Start(t)
	wantWorking(t, r)
}

// TestBlackHole is reliability F8: a server that accepts and never
// answers. Every call ends within TIMEOUT (or the context's earlier
// deadline) and no goroutine stays behind. It does not run in parallel,
// so that the goroutine count is this test's.
func TestBlackHole(t *testing.T) {
	addr := blackHole(t)
	const timeout = 500 * time.Millisecond
	before := runtime.NumGoroutine()
	r, err := ldapresolver.New(t.Context(), resolver.Config{
		"LDAPURI": addr, "LDAPBASE": peopleDN, "BINDDN": svcDN, "BINDPW": svcPW,
		"LOGINNAMEATTRIBUTE": "uid", "TIMEOUT": "0.5",
	}, resolver.Env{Dial: loopback})
	if err != nil {
		t.Fatal(err)
	}
	wantUnavailable(t, r, "uid=alice,"+peopleDN, timeout)

	t.Run("ContextDeadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := r.UserID(ctx, "alice")
		if !errors.Is(err, resolver.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("UserID: %v", err)
		}
		if d := time.Since(start); d > 100*time.Millisecond+slack {
			t.Errorf("took %s with a 100ms deadline", d)
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		if err := r.Ping(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Ping: %v", err)
		}
		if d := time.Since(start); d > 100*time.Millisecond+slack {
			t.Errorf("took %s, cancelled after 100ms", d)
		}
	})
	t.Run("Parallel", func(t *testing.T) {
		// More callers than pooled connections: the waiting ones end at
		// the deadline too.
		var wg sync.WaitGroup
		start := time.Now()
		for range 20 {
			wg.Go(func() { _, _ = r.UserID(t.Context(), "alice") })
		}
		wg.Wait()
		if d := time.Since(start); d > timeout+slack {
			t.Errorf("20 parallel calls took %s", d)
		}
	})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before+1 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFailover: with the first server dead (refusing, or a black hole),
// the next one answers within TIMEOUT, and later calls go there first.
func TestFailover(t *testing.T) {
	t.Parallel()
	s := directory(t)
	dead := "ldap://127.0.0.1:" + strconv.Itoa(testsvc.FreePort(t))
	for _, tc := range []struct{ name, first, strategy string }{
		{"Refused", dead, ""},
		{"RefusedFirst", dead, "FIRST"},
		{"BlackHoleFirst", blackHole(t), "FIRST"},
		{"BlackHoleRandom", blackHole(t), "RANDOM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := open(t, config(s, "LDAPURI", tc.first+" , "+s.URL, "TIMEOUT", "4", "SERVERPOOL_STRATEGY", tc.strategy))
			start := time.Now()
			wantWorking(t, r)
			if d := time.Since(start); d > 4*time.Second+slack {
				t.Errorf("first calls took %s", d)
			}
			// The dead server is now skipped: a password check (a new
			// connection each time) is fast. RANDOM may not have tried it
			// yet, so there each check only has to end in time.
			uid, _ := r.UserID(t.Context(), "alice")
			// (A try of the black hole would take half of TIMEOUT.)
			limit := time.Second
			if tc.strategy == "RANDOM" {
				limit = 4*time.Second + slack
			}
			for range 3 {
				start = time.Now()
				if ok, err := r.CheckPassword(t.Context(), uid, password("alice")); !ok || err != nil {
					t.Errorf("CheckPassword: %v, %v", ok, err)
				}
				if d := time.Since(start); d > limit {
					t.Errorf("CheckPassword after failover took %s", d)
				}
			}
		})
	}
	t.Run("AllDead", func(t *testing.T) {
		r := open(t, config(s, "LDAPURI", dead+","+dead, "TIMEOUT", "1"))
		wantUnavailable(t, r, "uid=alice,"+peopleDN, time.Second)
	})
}
