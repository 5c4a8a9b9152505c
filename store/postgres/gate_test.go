package postgres

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGate checks the gate's rules: shared holders run together; an
// exclusive claim waits for them and keeps new ones out until it is
// released; every wait ends with its context.
func TestGate(t *testing.T) {
	var g gate
	ctx := t.Context()
	if err := g.rlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.rlock(ctx); err != nil {
		t.Fatal("a second shared holder waited")
	}
	locked := make(chan error, 1)
	go func() { locked <- g.lock(ctx) }()
	// The claim keeps new shared holders out even before it holds.
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.writer })
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := g.rlock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("rlock while claimed = %v, want the context's error", err)
	}
	g.runlock()
	select {
	case <-locked:
		t.Fatal("lock held while a shared holder remained")
	case <-time.After(20 * time.Millisecond):
	}
	g.runlock()
	if err := <-locked; err != nil {
		t.Fatalf("lock = %v", err)
	}
	short2, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	if err := g.lock(short2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock = %v, want the context's error", err)
	}
	entered := make(chan error, 1)
	go func() { entered <- g.rlock(ctx) }()
	select {
	case <-entered:
		t.Fatal("rlock entered while the gate was held")
	case <-time.After(20 * time.Millisecond):
	}
	g.unlock()
	if err := <-entered; err != nil {
		t.Fatalf("rlock after unlock = %v", err)
	}

	// A claim given up while shared holders run lets new ones in again.
	short3, cancel3 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel3()
	if err := g.lock(short3); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock with a shared holder = %v, want the context's error", err)
	}
	if err := g.rlock(ctx); err != nil {
		t.Fatalf("rlock after an abandoned claim = %v", err)
	}
	g.runlock()
	g.runlock()
	if err := g.lock(ctx); err != nil {
		t.Fatalf("lock of a free gate = %v", err)
	}
	g.unlock()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}
