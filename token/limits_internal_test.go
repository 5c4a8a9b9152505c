package token

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

// The enrollment limits read the realm's counter (not its index) and the
// owner's index.
func TestCheckLimitsFromCounters(t *testing.T) {
	s := New(Config{Store: storetest.Open(t)})
	u1 := &user.User{Realm: "R1", Resolver: "res", UID: "u1", Login: "one"}
	for i, tok := range []*Token{
		{Serial: "A1", Type: "hotp", Owner: u1, Realms: []string{"r1"}},
		{Serial: "A2", Type: "hotp", Owner: u1, Realms: []string{"r1"}},
		{Serial: "A3", Type: "hotp", Realms: []string{"R1", "r2"}},
		{Serial: "A4", Type: "hotp", Realms: []string{"r2"}},
	} {
		tok.ID, tok.Info = uint64(i+1), map[string]string{}
		put(t, s, nil, tok)
	}
	// The realm index loses its entries: only the counter knows.
	if err := s.cfg.Store.Update(t.Context(), func(tx store.Tx) error { return tx.DeleteBucket(bucketRealm) }); err != nil {
		t.Fatal(err)
	}
	n := func(v int) *int { return &v }
	newTok := &Token{Serial: "NEW", Owner: u1}
	for _, c := range []struct {
		l    Limits
		want error
	}{
		{Limits{PerRealm: n(3)}, ErrMaxPerRealm},
		{Limits{PerRealm: n(4)}, nil},
		{Limits{PerUser: n(2)}, ErrMaxPerUser},
		{Limits{PerUser: n(3), PerRealm: n(4)}, nil},
	} {
		err := s.cfg.Store.View(t.Context(), func(tx store.Tx) error { return checkLimits(tx, newTok, c.l) })
		if err != c.want {
			t.Errorf("limits %+v: %v, want %v", c.l, err, c.want)
		}
	}
	err := s.cfg.Store.View(t.Context(), func(tx store.Tx) error {
		return checkLimits(tx, &Token{Serial: "X"}, Limits{Realm: "r2", PerRealm: n(2)})
	})
	if err != ErrMaxPerRealm {
		t.Errorf("an unassigned token in r2 beyond 2: %v", err)
	}
}

// Unassigned agrees with decoding every token of the realm, by either
// walk, and leaves the decode cache alone.
func TestUnassignedFromIndexes(t *testing.T) {
	s := New(Config{Store: storetest.Open(t)})
	toks := seed(t, s, rand.New(rand.NewPCG(41, 42)), 300)
	check := func() {
		t.Helper()
		s.decoded = newDecodeCache(0)
		for _, realm := range []string{"r1", "R2", " r3 ", "none", ""} {
			got, err := s.Unassigned(t.Context(), realm)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, tok := range toks {
				if tok != nil && !tok.Assigned() && realm != "" &&
					slices.ContainsFunc(tok.Realms, func(r string) bool { return strings.EqualFold(r, strings.TrimSpace(realm)) }) {
					want = append(want, tok.Serial)
				}
			}
			slices.Sort(want)
			var gotS []string
			for _, tok := range got {
				gotS = append(gotS, tok.Serial)
			}
			if !slices.Equal(gotS, want) {
				t.Fatalf("Unassigned(%q) = %v, want %v", realm, gotS, want)
			}
		}
		if s.decoded.len() != 0 {
			t.Fatal("Unassigned filled the decode cache")
		}
	}
	check() // many unassigned tokens: the realm's walk
	for i, tok := range toks {
		if !tok.Assigned() && i%10 != 0 {
			nt := tok.Clone()
			nt.Owner = &user.User{Realm: "r1", Resolver: "res", UID: fmt.Sprint("x", i)}
			put(t, s, tok, nt)
			toks[i] = nt
		}
	}
	check() // few unassigned tokens: their walk
}

// An import does not fill the decode cache.
func TestImportBypassesDecodeCache(t *testing.T) {
	s, _ := imageService(t)
	var recs []ImportRecord
	for i := range 50 {
		recs = append(recs, ImportRecord{Serial: fmt.Sprintf("IMP%03d", i), Key: []byte("12345678901234567890")})
	}
	n, failed := s.Import(t.Context(), recs, []string{"r1"})
	if n != 50 || len(failed) != 0 {
		t.Fatalf("imported %d, failed %v", n, failed)
	}
	n, failed = s.Import(t.Context(), recs[:5], nil)
	if n != 0 || len(failed) != 5 {
		t.Fatalf("a second import of the same serials: %d imported, %d failed", n, len(failed))
	}
	if s.decoded.len() != 0 {
		t.Fatalf("the import put %d tokens in the decode cache", s.decoded.len())
	}
	if tok, err := s.Get(t.Context(), "IMP007"); err != nil || tok.Serial != "IMP007" {
		t.Fatalf("Get after import: %v, %v", tok, err)
	}
}
