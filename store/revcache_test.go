package store_test

import (
	"testing"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

func TestRevCache(t *testing.T) {
	st := storetest.Open(t)
	ctx := t.Context()
	var c store.RevCache[string]
	view := func(fn func(tx store.Tx)) {
		t.Helper()
		if err := st.View(ctx, func(tx store.Tx) error { fn(tx); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	bump := func() {
		t.Helper()
		if err := st.Update(ctx, func(tx store.Tx) error { _, err := store.BumpConfigRevision(tx); return err }); err != nil {
			t.Fatal(err)
		}
	}
	view(func(tx store.Tx) {
		if _, ok := c.Get(tx, "a"); ok {
			t.Error("empty cache hit")
		}
		c.Put(tx, "a", "one")
	})
	view(func(tx store.Tx) {
		if v, ok := c.Get(tx, "a"); !ok || v != "one" {
			t.Errorf("Get = %q, %v", v, ok)
		}
	})
	var stale store.Tx
	done := make(chan struct{})
	release := make(chan struct{})
	go func() {
		// A reader that started before the write keeps its old revision.
		_ = st.View(ctx, func(tx store.Tx) error {
			stale = tx
			close(done)
			<-release
			if _, ok := c.Get(tx, "a"); ok {
				t.Error("a reader of the old revision sees the new cache")
			}
			c.Put(tx, "b", "old") // dropped: older than the cache
			return nil
		})
	}()
	<-done
	_ = stale
	bump()
	view(func(tx store.Tx) {
		if _, ok := c.Get(tx, "a"); ok {
			t.Error("hit after a configuration write")
		}
		c.Put(tx, "a", "two")
	})
	close(release)
	view(func(tx store.Tx) {
		if v, ok := c.Get(tx, "a"); !ok || v != "two" {
			t.Errorf("Get = %q, %v", v, ok)
		}
		if _, ok := c.Get(tx, "b"); ok {
			t.Error("a value read at an old revision was kept")
		}
	})
}

func TestRevCacheGetAt(t *testing.T) {
	var c store.RevCache[string]
	if _, ok := c.GetAt(0, "a"); ok {
		t.Error("empty cache hit")
	}
	c.PutAt(3, "a", "three")
	if v, ok := c.GetAt(3, "a"); !ok || v != "three" {
		t.Errorf("GetAt(3) = %q, %v", v, ok)
	}
	for _, rev := range []uint64{2, 4} {
		if _, ok := c.GetAt(rev, "a"); ok {
			t.Errorf("GetAt(%d) hit a cache of revision 3", rev)
		}
	}
	if _, ok := store.RevisionFrom(t.Context()); ok {
		t.Error("an unpinned context has a revision")
	}
	if rev, ok := store.RevisionFrom(store.WithRevision(t.Context(), 7)); !ok || rev != 7 {
		t.Errorf("RevisionFrom = %d, %v", rev, ok)
	}
}
