package bolt_test

import (
	"bytes"
	"testing"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

// A bucket keyed by its own sequence (the audit log) only ever appends:
// its pages are filled, not left half empty as bbolt's default splits
// them; a bucket with keys in any order keeps the default.
func TestAppendedPagesAreFull(t *testing.T) {
	db, err := bolt.Open(t.TempDir()+"/fill.db", bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	value := bytes.Repeat([]byte{'v'}, 300)
	for range 100 {
		err := db.Update(t.Context(), func(tx store.Tx) error {
			for range 20 {
				b := tx.Bucket("log")
				n, err := b.NextSequence()
				if err != nil {
					return err
				}
				if err := b.Put(store.Uint64Key(n), value); err != nil {
					return err
				}
				// The same keys written without the sequence.
				if err := tx.Bucket("plain").Put(store.Uint64Key(n), value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	logFill, err := bolt.LeafFill(db, "log")
	if err != nil {
		t.Fatal(err)
	}
	plainFill, err := bolt.LeafFill(db, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if logFill < 0.85 || plainFill > 0.7 {
		t.Fatalf("leaf pages filled: %.0f%% appended by sequence (want ≥ 85%%), %.0f%% otherwise (bbolt's default, about half)", 100*logFill, 100*plainFill)
	}
	if err := bolt.Check(db); err != nil {
		t.Fatal(err)
	}
}
