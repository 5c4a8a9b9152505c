package secret_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/authsrv/authsrv/internal/secret"
)

// cheap are fast parameters for tests that are not about cost.
var cheap = secret.Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 16, SaltLen: 16}

func newHasher(t testing.TB, cfg secret.HasherConfig) *secret.Hasher {
	t.Helper()
	h, err := secret.NewHasher(cfg)
	if err != nil {
		t.Fatalf("NewHasher: %v", err)
	}
	return h
}

// countKDF makes h count its key derivations.
func countKDF(h *secret.Hasher) *atomic.Int64 {
	var n atomic.Int64
	secret.SetKDFHook(h, func() { n.Add(1) })
	return &n
}

func TestNewHasher(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		h := newHasher(t, secret.HasherConfig{})
		if h.Params() != secret.DefaultParams {
			t.Fatalf("Params() = %+v", h.Params())
		}
	})

	for _, tc := range []struct {
		name string
		cfg  secret.HasherConfig
		want []string
	}{
		{"time zero", secret.HasherConfig{Params: secret.Params{Memory: 64, Threads: 1, KeyLen: 32, SaltLen: 16}},
			[]string{"Params.Time"}},
		{"threads zero", secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 64, KeyLen: 32, SaltLen: 16}},
			[]string{"Params.Threads"}},
		{"memory below 8 per thread", secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 31, Threads: 4, KeyLen: 32, SaltLen: 16}},
			[]string{"Params.Memory"}},
		{"short key", secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 8, SaltLen: 16}},
			[]string{"Params.KeyLen"}},
		{"short salt", secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 16, SaltLen: 8}},
			[]string{"Params.SaltLen"}},
		{"params above caps", secret.HasherConfig{Params: secret.Params{Time: 30, Memory: 512 * 1024, Threads: 32, KeyLen: 256, SaltLen: 16}},
			[]string{"t=30 above 20", "m=524288 KiB above 262144", "p=32 above 16", "hash length 256 above 128"}},
		{"partial caps", secret.HasherConfig{Params: cheap, Caps: secret.Caps{MaxTime: 5}},
			[]string{"every Caps field"}},
		{"budget below one hash", secret.HasherConfig{Params: cheap, BudgetBytes: 63 * 1024},
			[]string{"does not fit one hash"}},
		{"negative budget", secret.HasherConfig{Params: cheap, BudgetBytes: -1}, []string{"BudgetBytes must not be negative"}},
		{"negative wait", secret.HasherConfig{Params: cheap, MaxWait: -time.Second}, []string{"MaxWait"}},
		{"errors joined", secret.HasherConfig{Params: secret.Params{Memory: 64, Threads: 1, KeyLen: 32, SaltLen: 16}, MaxWait: -1},
			[]string{"Params.Time", "MaxWait"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := secret.NewHasher(tc.cfg)
			if err == nil {
				t.Fatalf("no error, params %+v", h.Params())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestHashVerify(t *testing.T) {
	ctx := t.Context()
	h := newHasher(t, secret.HasherConfig{Params: cheap})

	encoded, err := h.Hash(ctx, "1234")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("format", func(t *testing.T) {
		if !strings.HasPrefix(encoded, "$argon2id$v=19$m=64,t=1,p=1$") {
			t.Fatalf("hash %q has not the expected prefix", encoded)
		}
		p, err := secret.ParsePHC(encoded)
		if err != nil {
			t.Fatal(err)
		}
		if p.Params != cheap {
			t.Fatalf("params %+v, want %+v", p.Params, cheap)
		}
	})

	for _, tc := range []struct {
		name     string
		hasher   *secret.Hasher
		password string
		ok       bool
		rehash   bool
	}{
		{"right password", h, "1234", true, false},
		{"wrong password", h, "1235", false, false},
		{"empty password", h, "", false, false},
		{"other params rehash", newHasher(t, secret.HasherConfig{}), "1234", true, true},
		{"other params wrong password", newHasher(t, secret.HasherConfig{}), "x", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, rehash, err := tc.hasher.Verify(ctx, encoded, tc.password)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.ok || rehash != tc.rehash {
				t.Fatalf("ok=%v rehash=%v, want %v %v", ok, rehash, tc.ok, tc.rehash)
			}
		})
	}

	t.Run("salt from Rand", func(t *testing.T) {
		salt := bytes.Repeat([]byte{1}, 16)
		a := newHasher(t, secret.HasherConfig{Params: cheap, Rand: bytes.NewReader(salt)})
		b := newHasher(t, secret.HasherConfig{Params: cheap, Rand: bytes.NewReader(salt)})
		ha, errA := a.Hash(ctx, "pw")
		hb, errB := b.Hash(ctx, "pw")
		if errA != nil || errB != nil || ha != hb {
			t.Fatalf("same salt, different hashes: %v %v", errA, errB)
		}
		if _, err := a.Hash(ctx, "pw"); err == nil {
			t.Fatal("Hash with an exhausted Rand succeeded")
		}
	})

	t.Run("failing Rand", func(t *testing.T) {
		bad := newHasher(t, secret.HasherConfig{Params: cheap, Rand: iotest.ErrReader(errors.New("no entropy"))})
		if _, err := bad.Hash(ctx, "pw"); err == nil || !strings.Contains(err.Error(), "no entropy") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("malformed", func(t *testing.T) {
		ok, rehash, err := h.Verify(ctx, "$argon2id$garbage", "1234")
		if ok || rehash || !errors.Is(err, secret.ErrMalformed) {
			t.Fatalf("ok=%v rehash=%v err=%v", ok, rehash, err)
		}
	})
}

// TestVerifyFixtures checks hashes made by argon2-cffi (testdata/README).
// The two privacyIDEA hashes cost about 1 s per verification; there are
// four such verifications in total.
func TestVerifyFixtures(t *testing.T) {
	fx := loadFixtures(t)
	h := newHasher(t, secret.HasherConfig{}) // DefaultParams, DefaultCaps
	for _, tc := range []struct {
		name      string
		expensive bool
		rehash    bool
		err       error
	}{
		{"privacyidea-64MiB-t9-p4-tag32", true, true, nil},
		{"privacyidea-100MiB-t9-p8-tag16", true, true, nil},
		{"cheap-argon2id-default-params", false, false, nil},
		{"cheap-argon2i", false, true, nil},
		{"cheap-argon2id-v16", false, false, secret.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, found := fx[tc.name]
			if !found {
				t.Fatalf("fixture %s missing", tc.name)
			}
			if tc.expensive && testing.Short() {
				t.Skip("expensive hash skipped in -short mode")
			}
			ok, rehash, err := h.Verify(t.Context(), f.Hash, f.Password)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || ok {
					t.Fatalf("ok=%v err=%v, want %v", ok, err, tc.err)
				}
				return
			}
			if err != nil || !ok || rehash != tc.rehash {
				t.Fatalf("right password: ok=%v rehash=%v err=%v, want ok, rehash=%v", ok, rehash, err, tc.rehash)
			}
			ok, rehash, err = h.Verify(t.Context(), f.Hash, f.Password+"x")
			if err != nil || ok || rehash {
				t.Fatalf("wrong password: ok=%v rehash=%v err=%v", ok, rehash, err)
			}
		})
	}
}

func TestVerifyCaps(t *testing.T) {
	const salt, hash = "$c2FsdHNhbHRzYWx0c2FsdA$", "aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
	for _, tc := range []struct {
		name   string
		budget int64
		in     string
		want   string
	}{
		{"m above cap", 0, "$argon2id$v=19$m=262145,t=2,p=1" + salt + hash, "m=262145"},
		{"t above cap", 0, "$argon2id$v=19$m=65536,t=21,p=1" + salt + hash, "t=21"},
		{"huge t and m", 0, "$argon2id$v=19$m=4294967295,t=4294967295,p=255" + salt + hash, "t=4294967295"},
		{"p above cap", 0, "$argon2i$v=19$m=65536,t=2,p=17" + salt + hash, "p=17"},
		{"tag above cap", 0, "$argon2id$v=19$m=65536,t=2,p=1" + salt + strings.Repeat("A", 172), "hash length 129"},
		{"above budget", 1 << 20, "$argon2id$v=19$m=2048,t=1,p=1" + salt + hash, "whole budget of 1024 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHasher(t, secret.HasherConfig{Params: cheap, BudgetBytes: tc.budget})
			kdf := countKDF(h)
			ok, rehash, err := h.Verify(t.Context(), tc.in, "pw")
			if !errors.Is(err, secret.ErrParamsTooHigh) || ok || rehash {
				t.Fatalf("ok=%v rehash=%v err=%v, want ErrParamsTooHigh", ok, rehash, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if n := kdf.Load(); n != 0 {
				t.Fatalf("%d key derivations ran", n)
			}
		})
	}
}

func TestLimiter(t *testing.T) {
	// The budget fits exactly one cheap hash.
	oneHash := func(t *testing.T, wait time.Duration) (*secret.Hasher, string, *atomic.Int64) {
		t.Helper()
		h := newHasher(t, secret.HasherConfig{Params: cheap, BudgetBytes: int64(cheap.Memory) * 1024, MaxWait: wait})
		encoded, err := h.Hash(t.Context(), "pw")
		if err != nil {
			t.Fatal(err)
		}
		return h, encoded, countKDF(h)
	}
	hold := func(t *testing.T, h *secret.Hasher) (release func()) {
		t.Helper()
		release, err := secret.HoldBudget(t.Context(), h, int64(cheap.Memory))
		if err != nil {
			t.Fatal(err)
		}
		return release
	}

	t.Run("busy after MaxWait", func(t *testing.T) {
		h, encoded, kdf := oneHash(t, time.Nanosecond)
		release := hold(t, h)
		ok, _, err := h.Verify(t.Context(), encoded, "pw")
		if !errors.Is(err, secret.ErrBusy) || ok {
			t.Fatalf("Verify: ok=%v err=%v, want ErrBusy", ok, err)
		}
		if _, err := h.Hash(t.Context(), "pw"); !errors.Is(err, secret.ErrBusy) {
			t.Fatalf("Hash: err=%v, want ErrBusy", err)
		}
		h.Dummy(t.Context(), "pw")
		if n := kdf.Load(); n != 0 {
			t.Fatalf("%d key derivations ran while the budget was full", n)
		}
		release()
		if ok, _, err := h.Verify(t.Context(), encoded, "pw"); !ok || err != nil {
			t.Fatalf("after release: ok=%v err=%v", ok, err)
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		h, encoded, kdf := oneHash(t, time.Hour)
		release := hold(t, h)
		defer release()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, _, err := h.Verify(ctx, encoded, "pw")
		if !errors.Is(err, secret.ErrBusy) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want ErrBusy and context.Canceled", err)
		}
		if n := kdf.Load(); n != 0 {
			t.Fatalf("%d key derivations ran", n)
		}
	})

	t.Run("cancelled while waiting", func(t *testing.T) {
		h, encoded, _ := oneHash(t, time.Hour)
		release := hold(t, h)
		defer release()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, _, err := h.Verify(ctx, encoded, "pw")
			done <- err
		}()
		cancel()
		// With MaxWait an hour, only the cancellation can end the wait.
		if err := <-done; !errors.Is(err, secret.ErrBusy) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want ErrBusy and context.Canceled", err)
		}
	})

	t.Run("context deadline", func(t *testing.T) {
		h, encoded, _ := oneHash(t, time.Hour)
		release := hold(t, h)
		defer release()
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		_, _, err := h.Verify(ctx, encoded, "pw")
		if !errors.Is(err, secret.ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrBusy and context.DeadlineExceeded", err)
		}
	})

	t.Run("queued calls proceed after release", func(t *testing.T) {
		h, encoded, _ := oneHash(t, time.Hour)
		release := hold(t, h)
		const n = 3
		errs := make(chan error, n)
		for range n {
			go func() {
				ok, _, err := h.Verify(t.Context(), encoded, "pw")
				if err == nil && !ok {
					err = errors.New("not ok")
				}
				errs <- err
			}()
		}
		release()
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("CPU lanes bound the derivations at once", func(t *testing.T) {
		const n = 6
		h := newHasher(t, secret.HasherConfig{Params: cheap, BudgetBytes: n * int64(cheap.Memory) * 1024, MaxWait: time.Hour, MaxParallel: 2})
		encoded, err := h.Hash(t.Context(), "pw")
		if err != nil {
			t.Fatal(err)
		}
		// Each derivation stays inside until two have been inside at
		// once (or 10 s pass, on a machine too loaded to start a second
		// goroutine), then a little longer, so that a third would show
		// if the lanes let it in; a sleep alone could miss the overlap
		// when the goroutines start slowly.
		var now, most atomic.Int32
		secret.SetKDFHook(h, func() {
			c := now.Add(1)
			for m := most.Load(); c > m && !most.CompareAndSwap(m, c); m = most.Load() {
			}
			for end := time.Now().Add(10 * time.Second); most.Load() < 2 && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
			now.Add(-1)
		})
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if ok, _, err := h.Verify(t.Context(), encoded, "pw"); err != nil || !ok {
					t.Errorf("Verify = %v, %v", ok, err)
				}
			})
		}
		wg.Wait()
		if m := most.Load(); m != 2 {
			t.Errorf("%d derivations at once, want 2 (MaxParallel)", m)
		}
	})

	t.Run("roomy budget runs in parallel", func(t *testing.T) {
		const n = 4
		h := newHasher(t, secret.HasherConfig{Params: cheap, BudgetBytes: n * int64(cheap.Memory) * 1024, MaxWait: time.Hour, MaxParallel: n})
		encoded, err := h.Hash(t.Context(), "pw")
		if err != nil {
			t.Fatal(err)
		}
		// Each derivation waits inside the budget until all n are inside:
		// this completes only if n run at the same time.
		var inside sync.WaitGroup
		inside.Add(n)
		secret.SetKDFHook(h, func() { inside.Done(); inside.Wait() })
		errs := make(chan error, n)
		for range n {
			go func() {
				ok, _, err := h.Verify(t.Context(), encoded, "pw")
				if err == nil && !ok {
					err = errors.New("not ok")
				}
				errs <- err
			}()
		}
		watchdog := time.After(30 * time.Second)
		for range n {
			select {
			case err := <-errs:
				if err != nil {
					t.Fatal(err)
				}
			case <-watchdog:
				t.Fatalf("%d derivations did not run in parallel", n)
			}
		}
	})
}

func TestDummy(t *testing.T) {
	h := newHasher(t, secret.HasherConfig{Params: cheap})
	kdf := countKDF(h)
	h.Dummy(t.Context(), "anything")
	h.Dummy(t.Context(), "")
	if n := kdf.Load(); n != 2 {
		t.Fatalf("%d derivations, want 2", n)
	}
}
