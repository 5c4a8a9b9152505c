package token

import (
	"testing"

	"github.com/authsrv/authsrv/internal/offheap"
)

// TestListSetOffHeap runs the list set's reference comparison and its
// lists-during-changes test with every column outside the heap (the
// minimum lowered to 64 bytes) while the collector runs without pause,
// freeing each replaced set as soon as it is unreachable: a list still
// reading a set, or a patch reading the old one, must keep it alive.
func TestListSetOffHeap(t *testing.T) {
	offheap.Stress(t)
	t.Run("reference", TestListSetMatchesReference)
	t.Run("classes", TestListSetSerialClasses)
	t.Run("concurrent", TestListSetConcurrentChanges)
}
