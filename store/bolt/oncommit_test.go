package bolt_test

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

func TestOnCommit(t *testing.T) {
	var mu sync.Mutex
	var got []time.Duration
	db, err := bolt.Open(filepath.Join(t.TempDir(), "x.db"), bolt.Options{OnCommit: func(d time.Duration) {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}

	for i := range 3 {
		if err := db.Update(t.Context(), func(tx store.Tx) error {
			return tx.Bucket("b").Put([]byte{byte(i)}, []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != 3 {
		t.Fatalf("%d commits reported after 3 writes, want 3", n)
	}
	mu.Lock()
	for _, d := range got {
		if d <= 0 {
			t.Errorf("commit took %v, want more than 0 (an fsync)", d)
		}
	}
	mu.Unlock()

	// A rolled-back write and a read commit nothing.
	boom := errors.New("boom")
	if err := db.Update(t.Context(), func(tx store.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if err := db.View(t.Context(), func(tx store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 3 {
		t.Fatalf("%d commits reported, want still 3", n)
	}
}
