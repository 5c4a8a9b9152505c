package passwd_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/offheap"
)

// TestIndexOffHeap runs the reload-under-lookups test and the index
// tests with the index's arrays and text outside the heap however small
// (the minimum lowered to 64 bytes) while the collector runs without
// pause, freeing each replaced version as soon as it is unreachable.
func TestIndexOffHeap(t *testing.T) {
	defer offheap.SetMinSize(64)()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	})
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	t.Run("reload", TestReloadDuringLookups)
	t.Run("loading", TestLoadingAtCreation)
}
