package postgres_test

import (
	"fmt"
	"testing"

	"github.com/authsrv/authsrv/store/postgres"
	"github.com/authsrv/authsrv/store/storetest"
)

// The benchmarks run storetest's bodies, as store/bolt's do (one counter
// update plus a 300-byte audit record per transaction), so that the two
// backends can be compared. The test server runs with fsync and
// synchronous_commit off: the numbers leave out the disk, and measure
// round trips and serialization retries.

func BenchmarkUpdate(b *testing.B) {
	c := newCluster(b)
	b.Run("serial", func(b *testing.B) {
		storetest.BenchUpdateSerial(b, c.open(b, c.schema(b), postgres.Options{}))
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
			storetest.BenchUpdateParallel(b, c.open(b, c.schema(b), postgres.Options{}), tc.writers, !tc.conflict)
		})
	}
}

func BenchmarkView(b *testing.B) {
	c := newCluster(b)
	s := c.open(b, c.schema(b), postgres.Options{})
	storetest.BenchFill(b, s)
	b.Run("serial", func(b *testing.B) { storetest.BenchView(b, s) })
	b.Run("readers=16", func(b *testing.B) { storetest.BenchViewParallel(b, s, 16) })
}
