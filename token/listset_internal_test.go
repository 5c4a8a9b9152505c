package token

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/authsrv/authsrv/internal/offheap"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

// setRows is a set's content, one line per token, independent of its
// dictionaries' order.
func setRows(ls *listSet) []string {
	out := make([]string, ls.len())
	for i := range out {
		out[i] = fmt.Sprintf("%s|%s|%s|%q|%s|%d", ls.serial(i), ls.types[ls.typ[i]], ls.orealms[ls.orealm[i]],
			ls.rsets[ls.rset[i]], ls.rolls[ls.roll[i]], ls.flags[i])
	}
	return out
}

// wantSetCurrent checks that s holds a set of the store's generation
// with the content a fresh build has.
func wantSetCurrent(t *testing.T, s *Service) {
	t.Helper()
	err := s.cfg.Store.View(t.Context(), func(tx store.Tx) error {
		ls := s.lset.Load()
		if ls == nil || ls.gen != readGen(tx) {
			t.Fatalf("the list set is not of the store's generation %d", readGen(tx))
		}
		fresh := buildListSet(tx, nil)
		if fresh == nil {
			t.Fatal("no set built")
		}
		if got, want := setRows(ls), setRows(fresh); !slices.Equal(got, want) {
			t.Fatalf("the kept set differs from a fresh build:\n got  %v\n want %v", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// changeTokens changes every third token through svc (which may be
// another Service on the same store): unassign, reassign, new state,
// delete, and adds new tokens.
func changeTokens(t *testing.T, svc *Service, r *rand.Rand, toks []*Token, next int) []*Token {
	t.Helper()
	for i := 0; i < len(toks); i += 3 {
		old := toks[i]
		if old == nil {
			continue
		}
		nt := old.Clone()
		switch r.IntN(4) {
		case 0:
			nt.Owner = nil
		case 1:
			nt.Owner = &user.User{Realm: "r3", Resolver: "res0", UID: "u99", Login: "new"}
			nt.Realms = []string{"R2", "rnew"}
			nt.Type = "newtype"
		case 2:
			nt.Active, nt.RolloutState = !nt.Active, "newstate"
		default:
			if err := svc.cfg.Store.Update(t.Context(), func(tx store.Tx) error { return svc.remove(tx, old) }); err != nil {
				t.Fatal(err)
			}
			toks[i] = nil
			continue
		}
		put(t, svc, old, nt)
		toks[i] = nt
	}
	for i := range 20 {
		tok := randomToken(r, next+i)
		put(t, svc, nil, tok)
		toks = append(toks, tok)
	}
	return toks
}

// Lists answered from the in-memory set agree with the reference, also
// after another Service on the same store (another process or node)
// changed tokens, after the change log lost entries, and after a rebuild
// of the indexes.
func TestListSetMatchesReference(t *testing.T) {
	st := storetest.Open(t)
	s := New(Config{Store: st})
	s.setMinWork = -1 // every list in serial order from the set
	other := New(Config{Store: st})
	r := rand.New(rand.NewPCG(21, 22))
	toks := seed(t, s, r, 400)
	compareQueries(t, s, r, 500)
	wantSetCurrent(t, s)

	toks = changeTokens(t, other, r, toks, 1000)
	compareQueries(t, s, r, 300)
	wantSetCurrent(t, s) // patched

	// Changes by this Service, then by the other, before one list.
	toks = changeTokens(t, s, r, toks, 2000)
	toks = changeTokens(t, other, r, toks, 3000)
	compareQueries(t, s, r, 200)
	wantSetCurrent(t, s)

	// A gap in the log: the set is rebuilt, not patched from part of it.
	var gen uint64
	toks = changeTokens(t, other, r, toks, 4000)
	if err := st.Update(t.Context(), func(tx store.Tx) error {
		gen = readGen(tx)
		return tx.Bucket(bucketGen).Delete(genLogKey(gen - 3))
	}); err != nil {
		t.Fatal(err)
	}
	compareQueries(t, s, r, 100)
	wantSetCurrent(t, s)

	checkIndexesAsRebuilt(t, s)
	compareQueries(t, s, r, 100)
	wantSetCurrent(t, s)
	_ = toks
}

// The set's serial matching: the needle scan and the per-entry rule
// agree with listMatch on serials of every case class, including mixed
// case and non-ASCII serials.
func TestListSetSerialClasses(t *testing.T) {
	s := New(Config{Store: storetest.Open(t)})
	s.setMinWork = -1
	serials := []string{"abc1", "ABC2", "AbC3", "xabcx", "XABCX", "a\u212a1", "k1", "K2", "ab_c", "AB_C", "zzabc", "abcabc", "ab", "x0"}
	for i, sr := range serials {
		put(t, s, nil, &Token{ID: uint64(i + 1), Serial: sr, Type: "hotp", Info: map[string]string{}})
	}
	for _, spec := range []string{"*abc*", "*ABC", "abc*", "*c*", "*k*", "k*", "*_c", "abc1", "ABC1,k1", "*b*c*", "a*", "**", "*bc*,x0", "*", "nomatch*"} {
		f := Filter{Serial: spec}
		for _, desc := range []bool{false, true} {
			got, err := s.List(t.Context(), f, "", desc, 1, 50)
			if err != nil {
				t.Fatal(err)
			}
			want := refList(t, s, f, "", desc, 1, 50)
			if got.Count != want.Count || !slices.Equal(serialsOf(got), serialsOf(want)) {
				t.Fatalf("serial %q desc %v: got %d %v, want %d %v", spec, desc, got.Count, serialsOf(got), want.Count, serialsOf(want))
			}
		}
	}
	if s.lset.Load() == nil {
		t.Fatal("the lists did not use the set")
	}
}

// Lists from the set while other goroutines (through this Service and
// another on the same store) create and delete tokens: every answer is
// one snapshot. Tokens are created and deleted in pairs in one
// transaction, so a count of them is always even, and every listed token
// matches the filter.
func TestListSetConcurrentChanges(t *testing.T) {
	st := storetest.Open(t)
	s := New(Config{Store: st})
	s.setMinWork = -1
	other := New(Config{Store: st})
	seed(t, s, rand.New(rand.NewPCG(31, 32)), 200)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w, svc := range []*Service{s, other} {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				pair := []*Token{
					{ID: 1, Serial: fmt.Sprintf("PAIR%d-%d-a", w, i), Type: "totp", Active: true, Realms: []string{"r1"}, Info: map[string]string{}},
					{ID: 2, Serial: fmt.Sprintf("PAIR%d-%d-b", w, i), Type: "totp", Active: true, Realms: []string{"r1"}, Info: map[string]string{}},
				}
				err := st.Update(t.Context(), func(tx store.Tx) error {
					for _, p := range pair {
						if err := svc.save(tx, nil, p); err != nil {
							return err
						}
					}
					return nil
				})
				if err == nil && i%2 == 0 {
					err = st.Update(t.Context(), func(tx store.Tx) error {
						for _, p := range pair {
							if err := svc.remove(tx, p); err != nil {
								return err
							}
						}
						return nil
					})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	active := true
	filters := []Filter{
		{Serial: "*pair*"},
		{Serial: "*-a,*-b", Type: "totp"},
		{TokenRealm: "r1", Type: "totp", Serial: "pair*"},
		{Visible: []string{"r1"}, Active: &active, Serial: "*air*"},
	}
	for i := range 200 {
		f := filters[i%len(filters)]
		p, err := s.List(t.Context(), f, "", i%3 == 0, 1+i%2, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range p.Tokens {
			if !f.match(tok) || !strings.HasPrefix(tok.Serial, "PAIR") {
				t.Fatalf("filter %+v listed %s, which does not match", f, tok.Serial)
			}
		}
		if p.Count%2 != 0 {
			t.Fatalf("filter %+v counted %d tokens of pairs: not one snapshot", f, p.Count)
		}
	}
	close(stop)
	wg.Wait()
	if _, err := s.List(t.Context(), filters[0], "", false, 1, 7); err != nil {
		t.Fatal(err)
	}
	wantSetCurrent(t, s)
}

// WarmListSet builds the set of the current generation.
func TestWarmListSet(t *testing.T) {
	s := New(Config{Store: storetest.Open(t)})
	seed(t, s, rand.New(rand.NewPCG(51, 52)), 50)
	if err := s.WarmListSet(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantSetCurrent(t, s)
}

// sumSerials is the bytes of the serials of the tokens tx sees.
func sumSerials(t *testing.T, tx store.Tx) int {
	t.Helper()
	total := 0
	if err := tx.Bucket(bucketTokens).ForEach(nil, func(k, _ []byte) error {
		total += len(k)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return total
}

// The set's columns are mapped once, at their final size, also for
// serials much longer than the guess: a build sized by the counters of
// tokens and of their serials' bytes, and a patch sized by the changed
// serials, never grow a column (which holds the old and the new mapping
// at once). A file without the serials' counter (indexes of an older
// release) still gets a correct set, and the counter once the indexes
// are checked at start.
func TestListSetSizedUpFront(t *testing.T) {
	defer offheap.SetMinSize(64)()
	st := storetest.Open(t)
	s := New(Config{Store: st})
	r := rand.New(rand.NewPCG(61, 62))
	long := func(tok *Token, i int) *Token {
		tok.Serial = fmt.Sprintf("%s-a-long-serial-%06d", tok.Serial, i)
		return tok
	}
	var toks []*Token
	if err := st.Update(t.Context(), func(tx store.Tx) error {
		toks = toks[:0]
		for i := range 400 {
			tok := long(randomToken(r, i), i)
			if err := s.save(tx, nil, tok); err != nil {
				return err
			}
			toks = append(toks, tok)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	noGrowth := func(step string, ls *listSet) {
		t.Helper()
		if ls == nil {
			t.Fatalf("%s: no set", step)
		}
		if ls.mem.Size() == 0 {
			t.Fatalf("%s: the columns are on the heap", step)
		}
		if peak, size := ls.mem.Peak(), ls.mem.Size(); peak != size {
			t.Fatalf("%s: the set's memory peaked at %d bytes for %d kept: a column grew", step, peak, size)
		}
	}
	var ls *listSet
	if err := st.View(t.Context(), func(tx store.Tx) error {
		if got, want := readCounter(tx.Bucket(bucketCounts), cntSerials), sumSerials(t, tx); got != want {
			t.Fatalf("the serials' counter is %d, the serials have %d bytes", got, want)
		}
		ls = buildListSet(tx, nil)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	noGrowth("build", ls)
	// Sized from the counters, with a sixteenth (and 64 entries) of room
	// for the patches to come.
	n := ls.len()
	if room := n/16 + 64; cap(ls.lower) != len(ls.lower)+len(ls.lower)/16+64*(maxSerialLen+1) || cap(ls.off) != len(ls.off)+room || cap(ls.typ) != len(ls.typ)+room {
		t.Fatalf("build: text %d of %d bytes, offsets %d of %d, codes %d of %d: not sized from the counters with a sixteenth of room",
			len(ls.lower), cap(ls.lower), len(ls.off), cap(ls.off), len(ls.typ), cap(ls.typ))
	}

	// Deletions, changes and new (longer) serials: few enough for a
	// patch.
	for i := 0; i < len(toks); i += 9 {
		if err := st.Update(t.Context(), func(tx store.Tx) error { return s.remove(tx, toks[i]) }); err != nil {
			t.Fatal(err)
		}
	}
	for i := 3; i < len(toks); i += 13 {
		if i%9 == 0 {
			continue // deleted
		}
		nt := toks[i].Clone()
		nt.Owner, nt.Active = nil, !nt.Active
		put(t, s, toks[i], nt)
	}
	for i := range 20 {
		tok := randomToken(r, 1000+i)
		tok.Serial = fmt.Sprintf("%s-an-even-longer-serial-%d", tok.Serial, i)
		put(t, s, nil, tok)
	}
	var patched, fresh *listSet
	if err := st.View(t.Context(), func(tx store.Tx) error {
		if got, want := readCounter(tx.Bucket(bucketCounts), cntSerials), sumSerials(t, tx); got != want {
			t.Fatalf("after changes the serials' counter is %d, the serials have %d bytes", got, want)
		}
		patched, fresh = patchListSet(tx, ls, nil), buildListSet(tx, nil)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	noGrowth("patch", patched)
	noGrowth("build after changes", fresh)
	if got, want := setRows(patched), setRows(fresh); !slices.Equal(got, want) {
		t.Fatalf("the patched set differs from a fresh build:\n got  %v\n want %v", got, want)
	}

	// The first set, no longer read, recycled: the next patch is written
	// into its memory and leaves nothing of what it held.
	for i := range 5 {
		tok := randomToken(r, 2000+i)
		put(t, s, nil, tok)
	}
	oldMem := ls.mem
	var again *listSet
	if err := st.View(t.Context(), func(tx store.Tx) error {
		again, fresh = patchListSet(tx, patched, ls), buildListSet(tx, nil)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if again != ls || again.mem != oldMem {
		t.Fatal("the patch did not reuse the recycled set")
	}
	noGrowth("patch into a recycled set", again)
	if got, want := setRows(again), setRows(fresh); !slices.Equal(got, want) {
		t.Fatalf("the set patched into recycled memory differs from a fresh build:\n got  %v\n want %v", got, want)
	}
	// A recycled set without room is freed, and the patch made anew.
	small := newSetBuilder(0, 1, 1, nil, nil).finish()
	smallMem := small.mem
	if smallMem.Size() == 0 {
		t.Fatal("the small set's columns are on the heap: the check below would prove nothing")
	}
	if err := st.View(t.Context(), func(tx store.Tx) error {
		if patchListSet(tx, again, small) == small {
			t.Error("a recycled set without room was used")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if smallMem.Size() != 0 {
		t.Error("a recycled set without room was not freed")
	}

	// Indexes without the counter: a correct set, and BuildIndexes (at
	// start) counts the serials once.
	if err := st.Update(t.Context(), func(tx store.Tx) error {
		return tx.Bucket(bucketCounts).Delete([]byte(cntSerials))
	}); err != nil {
		t.Fatal(err)
	}
	var guessed *listSet
	if err := st.View(t.Context(), func(tx store.Tx) error { guessed = buildListSet(tx, nil); return nil }); err != nil {
		t.Fatal(err)
	}
	if guessed == nil || !slices.Equal(setRows(guessed), setRows(fresh)) {
		t.Fatal("without the serials' counter the set differs from one built with it")
	}
	if err := s.BuildIndexes(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if err := st.View(t.Context(), func(tx store.Tx) error {
		if got, want := readCounter(tx.Bucket(bucketCounts), cntSerials), sumSerials(t, tx); got != want {
			t.Fatalf("BuildIndexes set the serials' counter to %d, the serials have %d bytes", got, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
