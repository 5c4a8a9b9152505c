package ldap_test

import (
	"testing"

	"github.com/authsrv/authsrv/resolver"
)

// BenchmarkLDAPUserLookup is one login resolution as the service does it
// on a cache miss: UserID, then User, against slapd on loopback.
func BenchmarkLDAPUserLookup(b *testing.B) {
	s := directory(b)
	r := open(b, config(s))
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		uid, err := r.UserID(ctx, "alice")
		if err != nil {
			b.Fatal(err)
		}
		if info, err := r.User(ctx, uid); err != nil || info.String(resolver.KeyUsername) != "alice" {
			b.Fatal(info, err)
		}
	}
}

// BenchmarkLDAPUserLookupParallel is the same with concurrent callers
// sharing the connection pool.
func BenchmarkLDAPUserLookupParallel(b *testing.B) {
	s := directory(b)
	r := open(b, config(s))
	ctx := b.Context()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			uid, err := r.UserID(ctx, "alice")
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := r.User(ctx, uid); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkLDAPCheckPassword is a password check: a lookup on a pooled
// connection and a bind on a new one.
func BenchmarkLDAPCheckPassword(b *testing.B) {
	s := directory(b)
	r := open(b, config(s))
	ctx := b.Context()
	uid, err := r.UserID(ctx, "alice")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := r.CheckPassword(ctx, uid, password("alice")); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}
