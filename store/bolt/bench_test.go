package bolt_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/store/storetest"
)

// The benchmarks use a real, synced file: they measure durable commits
// (reliability spec A15: one counter update plus a 300-byte audit record
// per transaction). Their bodies are storetest's, shared with
// store/postgres.

func benchDB(b *testing.B, opts bolt.Options) *bolt.DB {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

func BenchmarkUpdateSerial(b *testing.B) {
	storetest.BenchUpdateSerial(b, benchDB(b, bolt.Options{}))
}

func BenchmarkUpdateParallel(b *testing.B) {
	for _, tc := range []struct {
		writers  int
		maxBatch int
	}{{16, 0}, {32, 0}, {64, 0}, {64, 1}} {
		name := fmt.Sprintf("writers=%d", tc.writers)
		if tc.maxBatch == 1 {
			name += "/no-group-commit"
		}
		b.Run(name, func(b *testing.B) {
			storetest.BenchUpdateParallel(b, benchDB(b, bolt.Options{MaxBatch: tc.maxBatch}), tc.writers, false)
		})
	}
}

func BenchmarkView(b *testing.B) {
	db := benchDB(b, bolt.Options{})
	storetest.BenchFill(b, db)
	storetest.BenchView(b, db)
}
