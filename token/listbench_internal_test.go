package token

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/user"
)

// BenchmarkList lists from 100k HOTP tokens (AUTHSRV_LIST_TOKENS
// overrides), each owned by its own user of one realm and in that token
// realm (the shape of issue 17), written straight through save in large
// transactions.
func BenchmarkList(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("AUTHSRV_LIST_TOKENS")); err == nil && v >= 10_000 {
		n = v / 10_000 * 10_000
	}
	path := filepath.Join(b.TempDir(), "list.db")
	db, err := bolt.Open(path, bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	s := New(Config{Store: db})
	serials := make([]string, 0, n)
	for i := 0; i < n; i += 10_000 {
		if err := db.Update(b.Context(), func(tx store.Tx) error {
			for j := i; j < i+10_000; j++ {
				serial := fmt.Sprintf("OATH%08X", uint32(j)*2654435761) // distinct
				t := &Token{ID: uint64(j + 1), Serial: serial, Type: "hotp", Active: true, OTPLen: 6, MaxFail: 10, CountWindow: 10,
					Description: fmt.Sprintf("token %d", j), Realms: []string{"bench"}, Info: map[string]string{"hashlib": "sha1", "tokenkind": "software"},
					Owner:  &user.User{Realm: "bench", Resolver: "passwd", UID: fmt.Sprint(j), Login: fmt.Sprintf("user%d", j)},
					Sealed: map[string][]byte{"otpkey": make([]byte, 60)}}
				if err := s.save(tx, nil, t); err != nil {
					return err
				}
				serials = append(serials, serial)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	s.decoded = newDecodeCache(0)
	probe := serials[n/2]
	yes := true
	for _, q := range []struct {
		name   string
		f      Filter
		sort   string
		page   int
		expect int // the count, -1: any
	}{
		{"page1", Filter{}, "", 1, n},
		{"page-last", Filter{}, "", n / 15, n},
		{"page-middle", Filter{}, "", n / 30, n},
		{"serial-wild", Filter{Serial: "*abc*"}, "", 1, -1},
		{"serial-exact", Filter{Serial: probe}, "", 1, 1},
		{"realm", Filter{UserRealm: "bench"}, "", 1, n},
		{"tokenrealm", Filter{TokenRealm: "bench"}, "", 1, n},
		{"user", Filter{UserRealm: "bench", Resolver: "passwd", UserID: "4242"}, "", 1, 1},
		{"realm-type", Filter{UserRealm: "bench", Type: "hotp"}, "", 1, n},
		{"visible", Filter{Visible: []string{"bench"}}, "", 1, n},
		{"serial-suffix", Filter{Serial: "*7"}, "", 1, -1},
		{"serial-wild-deep", Filter{Serial: "*a*"}, "", 1000, -1},
		{"realm-active", Filter{UserRealm: "bench", Active: &yes}, "", 1, n},
		{"tokenrealm-assigned", Filter{TokenRealm: "bench", Assigned: &yes}, "", 1, n},
		{"visible-type", Filter{Visible: []string{"bench"}, Type: "hotp"}, "", 1, n},
		{"sort-description", Filter{}, "description", 1, n},
		{"sort-count-user", Filter{UserRealm: "bench", Resolver: "passwd", UserID: "4242"}, "count", 1, 1},
	} {
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			// The list set (built by the first list that needs it) is
			// measured by BenchmarkListSet.
			if _, err := s.List(b.Context(), q.f, q.sort, false, q.page, 15); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				p, err := s.List(b.Context(), q.f, q.sort, false, q.page, 15)
				if err != nil {
					b.Fatal(err)
				}
				if q.expect >= 0 && p.Count != q.expect {
					b.Fatalf("count %d, want %d", p.Count, q.expect)
				}
			}
			if s.decoded.len() != 0 {
				b.Fatal("a list used the decode cache")
			}
		})
	}
}

// BenchmarkListSet builds the in-memory list set from 100k tokens
// (AUTHSRV_LIST_TOKENS overrides) and patches it after one change,
// reporting the set's bytes.
func BenchmarkListSet(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("AUTHSRV_LIST_TOKENS")); err == nil && v >= 10_000 {
		n = v / 10_000 * 10_000
	}
	db, err := bolt.Open(filepath.Join(b.TempDir(), "set.db"), bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	s := New(Config{Store: db})
	for i := 0; i < n; i += 10_000 {
		if err := db.Update(b.Context(), func(tx store.Tx) error {
			for j := i; j < i+10_000; j++ {
				t := &Token{ID: uint64(j + 1), Serial: fmt.Sprintf("OATH%08X", uint32(j)*2654435761), Type: "hotp", Active: true,
					Realms: []string{"bench"}, Info: map[string]string{}, Owner: &user.User{Realm: "bench", Resolver: "passwd", UID: fmt.Sprint(j)}}
				if err := s.save(tx, nil, t); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	var ls, spare *listSet
	need := func(b *testing.B) {
		if ls != nil {
			return
		}
		if err := db.View(b.Context(), func(tx store.Tx) error { ls = buildListSet(tx, nil); return nil }); err != nil || ls == nil {
			b.Fatal("no set", err)
		}
	}
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			if err := db.View(b.Context(), func(tx store.Tx) error { ls = buildListSet(tx, nil); return nil }); err != nil || ls == nil {
				b.Fatal("no set", err)
			}
		}
		b.ReportMetric(float64(ls.bytes()), "set-bytes")
		// Where the set's memory is: the Go heap it adds, and the memory
		// outside the heap.
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var fresh *listSet
		if err := db.View(b.Context(), func(tx store.Tx) error { fresh = buildListSet(tx, nil); return nil }); err != nil || fresh == nil {
			b.Fatal("no set", err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)), "set-heap-bytes")
		b.ReportMetric(float64(offheapSize(fresh)), "set-offheap-bytes")
		runtime.KeepAlive(fresh)
	})
	b.Run("patch-1", func(b *testing.B) {
		need(b)
		for b.Loop() {
			b.StopTimer()
			t := &Token{ID: 1, Serial: "OATH-NEW", Type: "totp", Info: map[string]string{}}
			if err := db.Update(b.Context(), func(tx store.Tx) error {
				old, err := loadUncached(tx, t.Serial)
				if err != nil {
					return err
				}
				if old != nil {
					return s.remove(tx, old)
				}
				return s.save(tx, nil, t)
			}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			// As the Service does: the set before is no longer read, and
			// the next patch writes into its memory.
			if err := db.View(b.Context(), func(tx store.Tx) error { ls, spare = patchListSet(tx, ls, spare), ls; return nil }); err != nil || ls == nil {
				b.Fatal("no patch", err)
			}
		}
	})
	// 1,000 changes (owner realm changes of spread-out tokens) between
	// two lists: the first list after them patches the set.
	b.Run("patch-1000", func(b *testing.B) {
		need(b)
		round := 0
		for b.Loop() {
			b.StopTimer()
			round++
			if err := db.Update(b.Context(), func(tx store.Tx) error {
				for j := range 1000 {
					i := (j*(n/1000) + round) % n
					old, err := loadUncached(tx, fmt.Sprintf("OATH%08X", uint32(i)*2654435761))
					if err != nil || old == nil {
						return fmt.Errorf("token %d: %v", i, err)
					}
					t := *old
					t.Realms = []string{fmt.Sprintf("r%d", round%2)}
					if err := s.save(tx, old, &t); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			// As the Service does: the set before is no longer read, and
			// the next patch writes into its memory.
			if err := db.View(b.Context(), func(tx store.Tx) error { ls, spare = patchListSet(tx, ls, spare), ls; return nil }); err != nil || ls == nil {
				b.Fatal("no patch", err)
			}
		}
	})
}

// offheapSize is the memory a set holds outside the Go heap.
func offheapSize(ls *listSet) int { return ls.mem.Size() }
