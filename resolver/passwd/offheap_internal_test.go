package passwd

import (
	"errors"
	"strings"
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

// TestReadAllGrowsInArena: a text longer than the first guess (a file
// that grew after its stat) is read whole, growing in the arena, and one
// over the limit is refused after limit+1 bytes.
func TestReadAllGrowsInArena(t *testing.T) {
	defer offheap.SetMinSize(64)()
	text := strings.Repeat("user:x:1:1::/h:/bin/sh\n", 10000)
	mem := offheap.New()
	defer mem.Free()
	got, err := readAll(strings.NewReader(text), mem, offheap.Bytes(mem, 0, 100), int64(len(text)))
	if err != nil || string(got) != text {
		t.Fatalf("read %d bytes, %v; want %d", len(got), err, len(text))
	}
	if mem.Size() < len(text) {
		t.Fatalf("the arena holds %d bytes, the text %d: it grew on the heap", mem.Size(), len(text))
	}
	_, err = readAll(strings.NewReader(text), mem, offheap.Bytes(mem, 0, 100), 5000)
	var tl *tooLargeError
	if !errors.As(err, &tl) || tl.size != 5001 {
		t.Fatalf("over the limit: %v", err)
	}
}
