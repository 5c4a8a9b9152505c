//go:build linux

package bolt

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestStatmReaderReadsTheSharedField compares the reader's count, read
// twice through the same descriptor, with the third field of the file as
// a plain read gives it.
func TestStatmReaderReadsTheSharedField(t *testing.T) {
	r, err := openStatm()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	for i := range 2 {
		got, err := r.shared()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile("/proc/self/statm")
		if err != nil {
			t.Fatal(err)
		}
		pages, err := strconv.ParseInt(strings.Fields(string(b))[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		want := pages * int64(os.Getpagesize())
		// The count may move between the two reads; a few pages at most.
		if d := got - want; got <= 0 || d > 1<<20 || d < -(1<<20) {
			t.Fatalf("read %d: shared %d bytes, the file says %d", i, got, want)
		}
	}
}
