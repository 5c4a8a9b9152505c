package bolt_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
)

// The benchmarks use a real, synced file: they measure durable commits
// (reliability spec A15: one counter update plus a 300-byte audit record
// per transaction).

func benchDB(b *testing.B, opts bolt.Options) *bolt.DB {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

var (
	benchCounter = []byte("counter")
	benchRecord  = bytes.Repeat([]byte{'r'}, 300)
)

// benchWrite is one authentication's write: raise a counter, append a
// record.
func benchWrite(tx store.Tx) error {
	c := tx.Bucket("counters")
	if err := c.Put(benchCounter, store.Uint64Key(store.KeyUint64(c.Get(benchCounter))+1)); err != nil {
		return err
	}
	a := tx.Bucket("audit")
	seq, err := a.NextSequence()
	if err != nil {
		return err
	}
	return a.Put(store.Uint64Key(seq), benchRecord)
}

func checkCounter(b *testing.B, db *bolt.DB, want int) {
	b.Helper()
	if err := db.View(b.Context(), func(tx store.Tx) error {
		if n := store.KeyUint64(tx.Bucket("counters").Get(benchCounter)); n != uint64(want) {
			return fmt.Errorf("counter = %d after %d updates", n, want)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

func BenchmarkUpdateSerial(b *testing.B) {
	db := benchDB(b, bolt.Options{})
	ctx := b.Context()
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if err := db.Update(ctx, benchWrite); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
	reportLatency(b, lat)
	checkCounter(b, db, b.N)
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
			db := benchDB(b, bolt.Options{MaxBatch: tc.maxBatch})
			ctx := b.Context()
			b.SetParallelism(max(1, tc.writers/runtime.GOMAXPROCS(0)))
			var mu sync.Mutex
			var lat []time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					start := time.Now()
					if err := db.Update(ctx, benchWrite); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
			reportLatency(b, lat)
			checkCounter(b, db, b.N)
		})
	}
}

func BenchmarkView(b *testing.B) {
	db := benchDB(b, bolt.Options{})
	ctx := b.Context()
	for range 1000 {
		if err := db.Update(ctx, benchWrite); err != nil {
			b.Fatal(err)
		}
	}
	key := store.Uint64Key(500)
	b.ReportAllocs()
	for b.Loop() {
		if err := db.View(ctx, func(tx store.Tx) error {
			if store.KeyUint64(tx.Bucket("counters").Get(benchCounter)) != 1000 || tx.Bucket("audit").Get(key) == nil {
				return fmt.Errorf("unexpected data")
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
