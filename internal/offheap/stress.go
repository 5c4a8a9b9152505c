package offheap

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Stress is for the tests of packages that keep data in arenas: until the
// test ends, every allocation of 64 bytes or more goes outside the heap and
// a goroutine runs the collector without pause, so that each replaced
// arena is freed as soon as its owner is unreachable and a reader that
// forgot to keep its owner alive faults.
func Stress(tb testing.TB) {
	tb.Helper()
	restore := SetMinSize(64)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	})
	tb.Cleanup(func() {
		stop.Store(true)
		wg.Wait()
		restore()
	})
}
