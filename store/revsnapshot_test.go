package store_test

import (
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// TestRevSnapshot: a value is compiled once per revision; the owner's
// own change (Changed) takes effect at once; another writer's change once
// the recheck bound has passed; a context pinned to the value's revision
// reads nothing.
func TestRevSnapshot(t *testing.T) {
	st := storetest.Open(t)
	ctx := t.Context()
	var c store.RevSnapshot[uint64]
	compiled := 0
	compile := func(tx store.Tx) (uint64, error) { compiled++; return store.ConfigRevision(tx), nil }
	get := func() uint64 {
		t.Helper()
		v, err := c.Get(ctx, st, compile)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	bump := func() uint64 {
		t.Helper()
		var rev uint64
		if err := st.Update(ctx, func(tx store.Tx) error { var err error; rev, err = store.BumpConfigRevision(tx); return err }); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	if _, ok := c.Fresh(); ok {
		t.Error("fresh before the first Get")
	}
	first := get()
	if v, ok := c.Fresh(); !ok || v != first || get() != first || compiled != 1 {
		t.Fatalf("second use: %v %v, compiled %d", v, ok, compiled)
	}
	// Another writer: unseen within the bound.
	other := bump()
	if get() != first {
		t.Error("another writer's change seen within the recheck bound")
	}
	// The owner's change: at once.
	own := bump()
	c.Changed(own)
	if _, ok := c.Fresh(); ok {
		t.Error("fresh after Changed")
	}
	if v := get(); v != own || compiled != 2 {
		t.Errorf("after Changed: %d (want %d), compiled %d", v, own, compiled)
	}
	// Pinned to the value's revision: no read, even past the bound.
	c.SetRecheck(time.Nanosecond)
	time.Sleep(time.Millisecond)
	if v, err := c.Get(store.WithRevision(ctx, own), st, compile); err != nil || v != own || compiled != 2 {
		t.Errorf("pinned: %d %v, compiled %d", v, err, compiled)
	}
	// Past the bound, the revision is read: unchanged, nothing compiled;
	// moved, compiled again.
	if v := get(); v != own || compiled != 2 {
		t.Errorf("unchanged revision: %d, compiled %d", v, compiled)
	}
	later := bump()
	if v := get(); v != later || compiled != 3 || later <= other {
		t.Errorf("another writer past the bound: %d (want %d), compiled %d", v, later, compiled)
	}
	if v, ok := c.Last(); !ok || v != later {
		t.Errorf("Last = %d %v", v, ok)
	}
}
