package passwd_test

import (
	"testing"

	"github.com/authsrv/authsrv/internal/offheap"
)

// TestIndexOffHeap runs the reload-under-lookups test and the index
// tests with the index's arrays and text outside the heap however small
// (the minimum lowered to 64 bytes) while the collector runs without
// pause, freeing each replaced version as soon as it is unreachable.
func TestIndexOffHeap(t *testing.T) {
	offheap.Stress(t)
	t.Run("reload", TestReloadDuringLookups)
	t.Run("loading", TestLoadingAtCreation)
}
