package sql_test

import (
	"testing"

	"github.com/authsrv/authsrv/resolver"
)

// BenchmarkSQLUserLookup is the hot path of an authentication: login to
// uid, then the user's info, on SQLite.
func BenchmarkSQLUserLookup(b *testing.B) {
	s := open(b, sqliteConfig(seedSQLite(b), false))
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		uid, err := s.UserID(ctx, "carol.smith")
		if err != nil {
			b.Fatal(err)
		}
		info, err := s.User(ctx, uid)
		if err != nil || info.String(resolver.KeyUsername) != "carol.smith" {
			b.Fatal(info, err)
		}
	}
}
