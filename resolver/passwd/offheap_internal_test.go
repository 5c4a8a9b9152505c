package passwd

import (
	"testing"

	"github.com/authsrv/authsrv/internal/offheap"
)

// TestIndexEqualsLinearOffHeap is the index's reference comparison with
// its arrays outside the heap however small (the minimum lowered to 64
// bytes), the parallel parse's scratch memory included.
func TestIndexEqualsLinearOffHeap(t *testing.T) {
	defer offheap.SetMinSize(64)()
	TestIndexEqualsLinear(t)
}
