package audit_test

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store/bolt"
)

// BenchmarkWriteNoSync measures the CPU side of Write (hashing, signing,
// batching) with 32 writers on a store without fsync.
func BenchmarkWriteNoSync(b *testing.B) {
	db := bolt.OpenForTest(b, filepath.Join(b.TempDir(), "a.db"))
	l, err := audit.New(audit.Config{Store: db, Key: ed25519.NewKeyFromSeed(make([]byte, 32))})
	if err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Write(context.Background(), audit.Entry{Action: "POST /validate/check", User: "alice", Realm: "realm1", Client: "127.0.0.1"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
