package audit_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store/bolt"
)

// The write benchmarks use a real, synced file: Write returns only once
// the entry is durable (reliability spec A4, A15).

func benchLog(b *testing.B) *audit.Log {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "audit.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return newLog(b, db, audit.Config{CheckpointEvery: audit.DefaultCheckpointEvery})
}

// checkLog verifies the benchmark's log outside the timer.
func checkLog(b *testing.B, l *audit.Log, n int) {
	b.Helper()
	b.StopTimer()
	rep, err := l.Verify(b.Context())
	if err != nil || !rep.OK() || rep.Entries != uint64(n) {
		b.Fatalf("after %d writes: Verify = %d entries, %v, %v", n, rep.Entries, rep.Problems, err)
	}
}

// BenchmarkWrite writes from many goroutines, as concurrent requests do:
// the store commits them in groups, one fsync for many entries.
func BenchmarkWrite(b *testing.B) {
	l := benchLog(b)
	ctx := b.Context()
	var n atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Write(ctx, testEntry(int(n.Add(1)))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	checkLog(b, l, b.N)
}

// BenchmarkWriteSerial writes one entry at a time: one fsync each.
func BenchmarkWriteSerial(b *testing.B) {
	l := benchLog(b)
	ctx := b.Context()
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		if _, err := l.Write(ctx, testEntry(n)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "entries/s")
	checkLog(b, l, n)
}

// benchEntries is the size of the log that Verify and Search walk.
const benchEntries = 20000

func scanLog(b *testing.B) *audit.Log {
	b.Helper()
	l := newLog(b, bolt.OpenForTest(b, filepath.Join(b.TempDir(), "audit.db")), audit.Config{})
	for i := 1; i <= benchEntries; i++ {
		if _, err := l.Write(b.Context(), testEntry(i)); err != nil {
			b.Fatal(err)
		}
	}
	return l
}

// BenchmarkVerify walks a 20,000-entry log.
func BenchmarkVerify(b *testing.B) {
	l := scanLog(b)
	b.ReportAllocs()
	for b.Loop() {
		rep, err := l.Verify(b.Context())
		if err != nil || !rep.OK() {
			b.Fatal(rep.Problems, err)
		}
	}
	b.ReportMetric(benchEntries*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkSearch is one page of a 20,000-entry log: without filters only
// the page is decoded; with a filter or a time limit every entry is.
func BenchmarkSearch(b *testing.B) {
	l := scanLog(b)
	cases := []struct {
		name string
		q    audit.Query
	}{
		{"no filter", audit.Query{}},
		{"filter", audit.Query{Filters: map[string]string{"action": "*validate*", "user": "user1"}}},
		{"since", audit.Query{Since: t0.Add(benchEntries * time.Minute / 2)}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Search(b.Context(), tc.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
