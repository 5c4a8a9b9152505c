package secret_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/secret"
)

// waits records what a Hasher's OnWait reports.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) add(d time.Duration) {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

func TestOnWait(t *testing.T) {
	newH := func(t *testing.T, maxWait time.Duration) (*secret.Hasher, *waits) {
		t.Helper()
		w := &waits{}
		h := newHasher(t, secret.HasherConfig{Params: cheap, BudgetBytes: int64(cheap.Memory) * 1024, MaxWait: maxWait, OnWait: w.add})
		return h, w
	}

	t.Run("no wait reports zero", func(t *testing.T) {
		h, w := newH(t, time.Second)
		if _, err := h.Hash(t.Context(), "pw"); err != nil {
			t.Fatal(err)
		}
		h.Dummy(t.Context(), "pw")
		if got := w.all(); len(got) != 2 || got[0] != 0 || got[1] != 0 {
			t.Fatalf("waits = %v, want two zero waits", got)
		}
	})

	t.Run("queued derivation reports its wait", func(t *testing.T) {
		h, w := newH(t, time.Minute)
		release, err := secret.HoldBudget(t.Context(), h, int64(cheap.Memory))
		if err != nil {
			t.Fatal(err)
		}
		const held = 50 * time.Millisecond
		done := make(chan error, 1)
		go func() {
			_, err := h.Hash(t.Context(), "pw")
			done <- err
		}()
		time.Sleep(held)
		release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := w.all()
		if len(got) != 1 || got[0] < held {
			t.Fatalf("waits = %v, want one wait of at least %v", got, held)
		}
	})

	t.Run("a wait that ends busy is reported", func(t *testing.T) {
		h, w := newH(t, 20*time.Millisecond)
		release, err := secret.HoldBudget(t.Context(), h, int64(cheap.Memory))
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if _, err := h.Hash(t.Context(), "pw"); !errors.Is(err, secret.ErrBusy) {
			t.Fatalf("err = %v, want ErrBusy", err)
		}
		got := w.all()
		if len(got) != 1 || got[0] < 20*time.Millisecond {
			t.Fatalf("waits = %v, want one wait of at least 20ms", got)
		}
	})
}
