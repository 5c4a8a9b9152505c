package bolt_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

// Update's function may run more than once, so it only reads and writes the
// transaction; anything else happens after Update has returned, when the
// write is on disk.
func ExampleDB_Update() {
	dir, err := os.MkdirTemp("", "authsrv")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := bolt.Open(filepath.Join(dir, "authsrv.db"), bolt.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ctx := context.Background()
	var id uint64
	err = db.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket("tokens")
		n, err := b.NextSequence()
		if err != nil {
			return err
		}
		id = n // set on every run; the last run's value is the committed one
		return b.Put(store.Uint64Key(n), []byte("hotp"))
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created token", id) // act only now

	err = db.View(ctx, func(tx store.Tx) error {
		return tx.Bucket("tokens").ForEach(nil, func(k, v []byte) error {
			fmt.Printf("%d: %s\n", store.KeyUint64(k), v)
			return nil
		})
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// created token 1
	// 1: hotp
}
