package storetest

import (
	"bytes"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
)

// The benchmark bodies every backend runs, so that the backends can be
// compared: each write is one authentication's (one counter update plus a
// 300-byte audit record, reliability spec A15). A backend's benchmark
// opens the store and names the run; these measure it.

var (
	benchCounter = []byte("counter")
	benchRecord  = bytes.Repeat([]byte{'r'}, 300)
)

// BenchViewWrites is how many writes BenchFill makes.
const BenchViewWrites = 1000

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

// checkCounter fails b unless the shared counter is want.
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

// reportLatency reports the 99th percentile of lat.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchUpdateSerial measures one writer's Update calls on s, a fresh
// store: throughput (tx/s) and p99 latency.
func BenchUpdateSerial(b *testing.B, s store.Store) {
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
}

// BenchUpdateParallel measures about writers concurrent writers' Update
// calls on s, a fresh store: throughput (tx/s) and p99 latency. They all
// raise one counter, or with ownKeys each its own.
func BenchUpdateParallel(b *testing.B, s store.Store, writers int, ownKeys bool) {
	ctx := b.Context()
	b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
	var mu sync.Mutex
	var lat []time.Duration
	var next int
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		next++
		fn := benchWrite
		if ownKeys {
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
	if !ownKeys {
		checkCounter(b, s, b.N)
	}
}

// BenchFill makes BenchViewWrites writes to s, a fresh store, for
// BenchView and BenchViewParallel.
func BenchFill(b *testing.B, s store.Store) {
	b.Helper()
	for range BenchViewWrites {
		if err := s.Update(b.Context(), benchWrite); err != nil {
			b.Fatal(err)
		}
	}
}

// benchView is the read of BenchView: the counter and one record.
func benchView(tx store.Tx) error {
	if store.KeyUint64(tx.Bucket("counters").Get(benchCounter)) != BenchViewWrites ||
		tx.Bucket("audit").Get(store.Uint64Key(BenchViewWrites/2)) == nil {
		return fmt.Errorf("unexpected data")
	}
	return nil
}

// BenchView measures one reader's View calls on s, filled by BenchFill:
// throughput (tx/s).
func BenchView(b *testing.B, s store.Store) {
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.View(ctx, benchView); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}

// BenchViewParallel measures about readers concurrent readers' View calls
// on s, filled by BenchFill: throughput (tx/s).
func BenchViewParallel(b *testing.B, s store.Store, readers int) {
	ctx := b.Context()
	b.SetParallelism(max(1, readers/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.View(ctx, benchView); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
}
