//go:build linux

package bolt_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

// fill writes n values of size bytes each and returns them by key.
func fill(t *testing.T, db *bolt.DB, n, size int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 100 {
		err := db.Update(ctx, func(tx store.Tx) error {
			b := tx.Bucket("data")
			for j := i; j < i+100 && j < n; j++ {
				if err := b.Put(key(j), value(j, size)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func key(i int) []byte { return []byte(fmt.Sprintf("k%08d", i)) }

func value(i, size int) []byte { return bytes.Repeat([]byte{byte(i)}, size) }

// readAll reads every value and checks it.
func readAll(t *testing.T, db *bolt.DB, n, size int) {
	t.Helper()
	err := db.View(context.Background(), func(tx store.Tx) error {
		b := tx.Bucket("data")
		for i := 0; i < n; i++ {
			if got := b.Get(key(i)); !bytes.Equal(got, value(i, size)) {
				return fmt.Errorf("key %d: wrong value (%d bytes)", i, len(got))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTrimResidentDropsPagesAndKeepsData(t *testing.T) {
	db := bolt.OpenForTest(t, filepath.Join(t.TempDir(), "s.db"))
	const n, size = 4000, 8 << 10 // ~32 MiB
	fill(t, db, n, size)
	readAll(t, db, n, size)
	before, err := db.Resident()
	if err != nil {
		t.Fatal(err)
	}
	if !before.Supported || before.ResidentBytes < 24<<20 || before.ResidentBytes > before.FileBytes {
		t.Fatalf("after reading every value: %+v, want most of the file resident", before)
	}
	if _, err := db.TrimResident(); err != nil {
		t.Fatal(err)
	}
	after, err := db.Resident()
	if err != nil {
		t.Fatal(err)
	}
	if after.ResidentBytes > 1<<20 {
		t.Fatalf("after TrimResident: %d bytes resident, want almost none", after.ResidentBytes)
	}
	readAll(t, db, n, size)
	again, _ := db.Resident()
	if again.ResidentBytes < 24<<20 {
		t.Fatalf("reading again mapped only %d bytes", again.ResidentBytes)
	}
}

func TestResidentLimitKeepsTheMapBounded(t *testing.T) {
	const limit = 4 << 20
	db, err := bolt.Open(filepath.Join(t.TempDir(), "s.db"), bolt.Options{ResidentLimit: limit, ResidentInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n, size = 2000, 8 << 10
	fill(t, db, n, size)
	readAll(t, db, n, size)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := db.Resident()
		if err != nil {
			t.Fatal(err)
		}
		if st.ResidentBytes <= limit {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resident file pages stayed at %d bytes, limit %d", st.ResidentBytes, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	readAll(t, db, n, size)
}

// Trimming while writers grow the file (which moves bbolt's map) and
// readers read must neither fault nor lose data.
func TestTrimResidentWhileTheFileGrows(t *testing.T) {
	db := bolt.OpenForTest(t, filepath.Join(t.TempDir(), "s.db"))
	const size = 4 << 10
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := db.TrimResident(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = db.View(context.Background(), func(tx store.Tx) error {
				return tx.Bucket("data").ForEach(nil, func(k, v []byte) error {
					if len(v) != size || v[0] != v[size-1] {
						t.Errorf("key %s: torn value", k)
						return store.ErrStop
					}
					return nil
				})
			})
		}
	}()
	const n = 12000 // ~48 MiB: the file grows past several map sizes
	fill(t, db, n, size)
	close(stop)
	wg.Wait()
	readAll(t, db, n, size)
}
