package postgres_test

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/postgres"
)

// The benchmarks do what store/bolt's do (one counter update plus a
// 300-byte audit record per transaction), so that the two backends can be
// compared. The test server runs with fsync and synchronous_commit off:
// the numbers leave out the disk, and measure round trips and
// serialization retries.

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

// benchWriteOwn is a write that conflicts with no other: its own counter
// (a user's fail counter) and a record under its own key.
func benchWriteOwn(key []byte) func(tx store.Tx) error {
	return func(tx store.Tx) error {
		c := tx.Bucket("counters")
		if err := c.Put(key, store.Uint64Key(store.KeyUint64(c.Get(key))+1)); err != nil {
			return err
		}
		return tx.Bucket("records").Put(key, benchRecord)
	}
}

func checkCounter(b *testing.B, s store.Store, want int) {
	b.Helper()
	if err := s.View(b.Context(), func(tx store.Tx) error {
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

func BenchmarkUpdate(b *testing.B) {
	c := newCluster(b)
	b.Run("serial", func(b *testing.B) {
		s := c.open(b, c.schema(b), postgres.Options{})
		ctx := b.Context()
		var lat []time.Duration
		b.ReportAllocs()
		for b.Loop() {
			start := time.Now()
			if err := s.Update(ctx, benchWrite); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
		reportLatency(b, lat)
		checkCounter(b, s, b.N)
	})
	for _, tc := range []struct {
		writers  int
		conflict bool
	}{{16, true}, {64, true}, {16, false}, {64, false}} {
		name := fmt.Sprintf("writers=%d/shared-counter", tc.writers)
		if !tc.conflict {
			name = fmt.Sprintf("writers=%d/own-keys", tc.writers)
		}
		b.Run(name, func(b *testing.B) {
			s := c.open(b, c.schema(b), postgres.Options{})
			ctx := b.Context()
			b.SetParallelism(max(1, tc.writers/runtime.GOMAXPROCS(0)))
			var mu sync.Mutex
			var lat []time.Duration
			var next int
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				mu.Lock()
				next++
				fn := benchWrite
				if !tc.conflict {
					fn = benchWriteOwn(fmt.Appendf(nil, "writer-%d", next))
				}
				mu.Unlock()
				var mine []time.Duration
				for pb.Next() {
					start := time.Now()
					if err := s.Update(ctx, fn); err != nil {
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
			if tc.conflict {
				checkCounter(b, s, b.N)
			}
		})
	}
}

func BenchmarkView(b *testing.B) {
	c := newCluster(b)
	s := c.open(b, c.schema(b), postgres.Options{})
	ctx := b.Context()
	for range 1000 {
		if err := s.Update(ctx, benchWrite); err != nil {
			b.Fatal(err)
		}
	}
	key := store.Uint64Key(500)
	view := func(tx store.Tx) error {
		if store.KeyUint64(tx.Bucket("counters").Get(benchCounter)) != 1000 || tx.Bucket("audit").Get(key) == nil {
			return fmt.Errorf("unexpected data")
		}
		return nil
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := s.View(ctx, view); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
	})
	b.Run("readers=16", func(b *testing.B) {
		b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := s.View(ctx, view); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
	})
}
