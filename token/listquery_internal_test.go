package token

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

// oldWildMatch is the matcher List used before the indexes (path.Match
// with the rest escaped), the reference for wildMatch.
func oldWildMatch(pattern, s string) bool {
	if pattern == "" || pattern == "*" {
		return true
	}
	if !strings.Contains(pattern, "*") {
		return strings.EqualFold(pattern, s)
	}
	var b strings.Builder
	for _, r := range pattern {
		switch r {
		case '?', '[', ']', '\\':
			b.WriteRune('\\')
		}
		b.WriteRune(r)
	}
	ok, err := path.Match(strings.ToLower(b.String()), strings.ToLower(strings.ReplaceAll(s, "/", "\x00")))
	return err == nil && ok
}

func TestWildMatchAsBefore(t *testing.T) {
	pats := []string{"", "*", "a", "A*", "*b", "*ab*", "a*b*c", "**", "a*a", "[x]*", "?*", "ab*ba", "*c"}
	strs := []string{"", "a", "ab", "abc", "AbC", "aXbYc", "aa", "a/b", "[x]y", "?q", "aba", "abba", "ba", "c"}
	for _, p := range pats {
		for _, s := range strs {
			if got, want := wildMatch(p, s), oldWildMatch(p, s); got != want {
				t.Errorf("wildMatch(%q, %q) = %v, before %v", p, s, got, want)
			}
		}
	}
}

var (
	testRealms  = []string{"r1", "R2", "r3"}
	testPrefix  = []string{"OATH", "oath", "TOTP", "Pw", "HOTPab", "x"}
	testTypes   = []string{"hotp", "totp", "pw", "spass"}
	testDescs   = []string{"", "laptop", "Phone A", "phone b", "weird\x00desc"}
	testRollout = []string{"", "clientwait", "verify"}
)

func randomToken(r *rand.Rand, i int) *Token {
	t := &Token{
		ID:           uint64(r.IntN(1000)),
		Serial:       fmt.Sprintf("%s%04d", testPrefix[r.IntN(len(testPrefix))], i),
		Type:         testTypes[r.IntN(len(testTypes))],
		Description:  testDescs[r.IntN(len(testDescs))],
		Active:       r.IntN(3) > 0,
		RolloutState: testRollout[r.IntN(len(testRollout))],
		OTPLen:       6 + 2*r.IntN(2),
		MaxFail:      []int{10, 5, 0}[r.IntN(3)],
		Count:        uint64(r.IntN(20)),
		FailCount:    r.IntN(4),
		Info:         map[string]string{},
	}
	for _, rl := range testRealms {
		if r.IntN(3) == 0 {
			t.Realms = append(t.Realms, rl)
		}
	}
	if r.IntN(2) == 0 {
		t.Owner = &user.User{Realm: testRealms[r.IntN(3)], Resolver: fmt.Sprintf("res%d", r.IntN(2)), UID: fmt.Sprintf("u%d", r.IntN(15)), Login: "l"}
	}
	if r.IntN(2) == 0 {
		t.Info["a"] = fmt.Sprintf("x%d", r.IntN(3))
	}
	if r.IntN(3) == 0 {
		t.Info["b"] = "y"
	}
	return t
}

func randomFilter(r *rand.Rand) Filter {
	var f Filter
	pick := func(n int) bool { return r.IntN(n) == 0 }
	if pick(3) {
		f.Serial = []string{"*", "oath*", "*00*", "OATH0001", "pw0003,x0004", "*1", "hotpAB*", "oath*,*7", "nomatch", "o*0*1"}[r.IntN(10)]
	}
	if pick(4) {
		f.Type = []string{"hotp", "HOTP", "*otp", "pw"}[r.IntN(4)]
	}
	if pick(6) {
		f.Types = []string{"totp", "PW"}
	}
	if pick(4) {
		f.UserRealm = []string{"r1", "r2", "R3"}[r.IntN(3)]
		if pick(2) {
			f.Resolver = "res1"
			if pick(2) {
				f.UserID = fmt.Sprintf("u%d", r.IntN(15))
			}
		}
	} else if pick(6) {
		f.Resolver = "res0"
	}
	if pick(4) {
		f.TokenRealm = []string{"r1", "r*", "R2,r3", "*3", "none"}[r.IntN(5)]
	}
	if pick(5) {
		f.Description = []string{"*phone*", "laptop", "PHONE A", "*a"}[r.IntN(4)]
	}
	if pick(4) {
		b := pick(2)
		f.Assigned = &b
	}
	if pick(4) {
		b := pick(2)
		f.Active = &b
	}
	if pick(5) {
		f.RolloutState = []string{"verify", "client*", "*"}[r.IntN(3)]
	}
	if pick(5) {
		f.InfoKey = []string{"a", "b"}[r.IntN(2)]
		if pick(2) {
			f.InfoValue = []string{"x1", "x*", "*"}[r.IntN(3)]
		}
	}
	if pick(4) {
		f.Visible = [][]string{{}, {"r1"}, {"R2", "r3"}}[r.IntN(3)]
	}
	return f
}

// refList is List as it was: every token decoded, matched, sorted.
func refList(t *testing.T, s *Service, f Filter, sortBy string, desc bool, page, size int) Page {
	t.Helper()
	var all []*Token
	err := s.cfg.Store.View(t.Context(), func(tx store.Tx) error {
		return tx.Bucket(bucketTokens).ForEach(nil, func(k, _ []byte) error {
			tok, err := loadUncached(tx, string(k))
			if err == nil && f.match(tok) {
				all = append(all, tok)
			}
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	less := sortKey(sortBy)
	slices.SortStableFunc(all, func(a, b *Token) int {
		c := 0
		if less != nil {
			c = less(a, b)
		}
		if c == 0 {
			c = cmp.Compare(a.Serial, b.Serial)
		}
		if desc {
			return -c
		}
		return c
	})
	p := Page{Count: len(all), Page: max(page, 1)}
	if size <= 0 {
		p.Tokens = all
		return p
	}
	start := (p.Page - 1) * size
	p.Tokens = []*Token{}
	if start < len(all) {
		p.Tokens = all[start:min(start+size, len(all))]
	}
	if p.Page > 1 {
		p.Prev = p.Page - 1
	}
	if start+size < len(all) {
		p.Next = p.Page + 1
	}
	return p
}

func serialsOf(p Page) []string {
	out := make([]string, len(p.Tokens))
	for i, t := range p.Tokens {
		out[i] = t.Serial
	}
	return out
}

func put(t *testing.T, s *Service, old, tok *Token) {
	t.Helper()
	if err := s.cfg.Store.Update(t.Context(), func(tx store.Tx) error { return s.save(tx, old, tok) }); err != nil {
		t.Fatal(err)
	}
}

func seed(t *testing.T, s *Service, r *rand.Rand, n int) []*Token {
	t.Helper()
	var toks []*Token
	err := s.cfg.Store.Update(t.Context(), func(tx store.Tx) error {
		toks = toks[:0]
		for i := range n {
			tok := randomToken(r, i)
			if err := s.save(tx, nil, tok); err != nil {
				return err
			}
			toks = append(toks, tok)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// compareQueries runs random queries through List and the reference.
func compareQueries(t *testing.T, s *Service, r *rand.Rand, n int) {
	t.Helper()
	for q := range n {
		f := randomFilter(r)
		sortBy := SortColumns[r.IntN(len(SortColumns))]
		if r.IntN(3) == 0 {
			sortBy = ""
		}
		desc := r.IntN(2) == 0
		page := 1 + r.IntN(4)
		size := []int{0, 1, 3, 7, 50, 120}[r.IntN(6)]
		if size > s.listCap {
			size = s.listCap
		}
		got, err := s.List(t.Context(), f, sortBy, desc, page, size)
		if err != nil && s.listCap < 100 && strings.Contains(err.Error(), "would need more than") {
			continue // a small cap refuses broad queries
		}
		if err != nil {
			t.Fatalf("query %d %+v sort %s: %v", q, f, sortBy, err)
		}
		want := refList(t, s, f, sortBy, desc, page, size)
		if got.Count != want.Count || got.Next != want.Next || got.Prev != want.Prev || got.Page != want.Page ||
			!slices.Equal(serialsOf(got), serialsOf(want)) {
			t.Fatalf("query %d %+v sort %q desc %v page %d size %d:\n got  %d %v next %d prev %d\n want %d %v next %d prev %d",
				q, f, sortBy, desc, page, size, got.Count, serialsOf(got), got.Next, got.Prev, want.Count, serialsOf(want), want.Next, want.Prev)
		}
		for i, tok := range got.Tokens {
			if tok.Count != want.Tokens[i].Count || tok.Description != want.Tokens[i].Description {
				t.Fatalf("query %d: token %s differs from its record", q, tok.Serial)
			}
		}
	}
}

// indexDump is the content of the list index buckets.
func indexDump(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := st.View(t.Context(), func(tx store.Tx) error {
		for _, b := range []string{bucketAttr, bucketSerial, bucketORealm, bucketCol, bucketCounts, bucketOwner, bucketRealm, bucketType} {
			if err := tx.Bucket(b).ForEach(nil, func(k, v []byte) error {
				out[b+" "+string(k)] = string(v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dropListIndexes makes the store look like a file of an older release.
func dropListIndexes(t *testing.T, st store.Store) {
	t.Helper()
	if err := st.Update(t.Context(), func(tx store.Tx) error {
		for _, b := range []string{bucketAttr, bucketSerial, bucketORealm, bucketCol, bucketCounts} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// checkIndexesAsRebuilt compares the incrementally kept indexes with
// those a rebuild makes from the records.
func checkIndexesAsRebuilt(t *testing.T, s *Service) {
	t.Helper()
	kept := indexDump(t, s.cfg.Store)
	dropListIndexes(t, s.cfg.Store)
	if err := s.BuildIndexes(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	rebuilt := indexDump(t, s.cfg.Store)
	for k, v := range rebuilt {
		if kept[k] != v {
			t.Errorf("rebuilt index has %q = %x, kept %x", k, v, kept[k])
		}
	}
	for k := range kept {
		if _, ok := rebuilt[k]; !ok {
			t.Errorf("kept index has %q, the rebuild not", k)
		}
	}
}

func TestListMatchesReference(t *testing.T) {
	s := New(Config{Store: storetest.Open(t)})
	r := rand.New(rand.NewPCG(1, 2))
	toks := seed(t, s, r, 400)
	compareQueries(t, s, r, 600)

	// Changes: owner, realms, description, state, info keys, deletes.
	for i := 0; i < len(toks); i += 3 {
		old := toks[i]
		nt := old.Clone()
		switch i % 4 {
		case 0:
			nt.Owner = nil // unassign
		case 1:
			nt.Owner = &user.User{Realm: "r3", Resolver: "res0", UID: "u99", Login: "new"}
			nt.Realms = []string{"R2"}
		case 2:
			nt.Description, nt.Active, nt.RolloutState = "changed", !nt.Active, "verify"
			nt.Info["c"] = "z"
		default:
			if err := s.cfg.Store.Update(t.Context(), func(tx store.Tx) error { return s.remove(tx, old) }); err != nil {
				t.Fatal(err)
			}
			continue
		}
		put(t, s, old, nt)
		toks[i] = nt
	}
	compareQueries(t, s, r, 400)
	checkIndexesAsRebuilt(t, s)
	compareQueries(t, s, r, 100)
	// A small cap: sorts by indexed columns walk their indexes.
	s.listCap = 10
	compareQueries(t, s, r, 400)
}

// A save that changes only the counters (an authentication) writes the
// record and no index entry.
func TestCounterSaveWritesNoIndex(t *testing.T) {
	s := New(Config{Store: storetest.Open(t)})
	tok := &Token{Serial: "C1", Type: "hotp", Active: true, Realms: []string{"r1"}, Info: map[string]string{"count_auth": "1"},
		Owner: &user.User{Realm: "r1", Resolver: "res", UID: "u1"}}
	put(t, s, nil, tok)
	before := indexDump(t, s.cfg.Store)
	nt := tok.Clone()
	nt.Count, nt.FailCount, nt.Info["count_auth"] = 7, 2, "2"
	var writes []string
	err := s.cfg.Store.Update(t.Context(), func(tx store.Tx) error {
		return s.save(recordingTx{tx, &writes}, tok, nt)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(writes, []string{bucketTokens}) {
		t.Fatalf("a counter update wrote %v, want the record only", writes)
	}
	if after := indexDump(t, s.cfg.Store); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("the indexes changed")
	}
}

type recordingTx struct {
	store.Tx
	writes *[]string
}

func (r recordingTx) Bucket(name string) store.Bucket {
	return recordingBucket{r.Tx.Bucket(name), name, r.writes}
}

type recordingBucket struct {
	store.Bucket
	name   string
	writes *[]string
}

func (b recordingBucket) Put(k, v []byte) error {
	*b.writes = append(*b.writes, b.name)
	return b.Bucket.Put(k, v)
}

func (b recordingBucket) Delete(k []byte) error {
	*b.writes = append(*b.writes, b.name)
	return b.Bucket.Delete(k)
}

// A data file of an older release gets its indexes at the first use, in
// batches; a save during a rebuild keeps the part already built current.
func TestIndexRebuildOnOldFile(t *testing.T) {
	st := storetest.Open(t)
	s := New(Config{Store: st})
	r := rand.New(rand.NewPCG(3, 4))
	toks := seed(t, s, r, 300)
	want := indexDump(t, st)
	dropListIndexes(t, st)
	if ok, err := s.IndexesReady(t.Context()); err != nil || ok {
		t.Fatalf("IndexesReady on an old file = %v, %v", ok, err)
	}
	// A save while no rebuild runs leaves the missing indexes alone.
	nt := toks[5].Clone()
	nt.Description = "while old"
	put(t, s, toks[5], nt)
	toks[5] = nt
	// A rebuild that stopped half way: saves below its position keep the
	// indexes, saves above it are left to the rebuild.
	sorted := slices.Clone(toks)
	slices.SortFunc(sorted, func(a, b *Token) int { return cmp.Compare(a.Serial, b.Serial) })
	mid := sorted[150].Serial
	if err := st.Update(t.Context(), func(tx store.Tx) error {
		b := tx.Bucket(bucketCounts)
		if err := b.Put(keyIndexBuilding, []byte{'>'}); err != nil {
			return err
		}
		n := 0
		delta := map[string]int64{}
		return tx.Bucket(bucketTokens).ForEach(nil, func(k, v []byte) error {
			if string(k) > mid {
				return store.ErrStop
			}
			tok, err := decodeRecord(string(k), v)
			if err != nil {
				return err
			}
			es, cs := listEntries(tok)
			for _, e := range es {
				if err := tx.Bucket(e.bucket).Put([]byte(e.key), nil); err != nil {
					return err
				}
			}
			for _, c := range cs {
				delta[c]++
			}
			delta[cntSerials] += int64(len(k))
			n++
			if err := tx.Bucket(bucketAttr).Put(k, encodeAttr(tok)); err != nil {
				return err
			}
			if err := addCounters(tx, delta); err != nil {
				return err
			}
			clear(delta)
			return b.Put(keyIndexBuilding, append([]byte{'>'}, k...))
		})
	}); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 10, 100, 200, 299} {
		old := sorted[i]
		nt := old.Clone()
		nt.Description, nt.Realms = "during rebuild", []string{"r3"}
		put(t, s, old, nt)
		sorted[i] = nt
	}
	if err := st.Update(t.Context(), func(tx store.Tx) error { return s.remove(tx, sorted[20]) }); err != nil {
		t.Fatal(err)
	}
	var progress []int
	if err := s.BuildIndexes(t.Context(), func(n int) { progress = append(progress, n) }); err != nil {
		t.Fatal(err)
	}
	if len(progress) == 0 {
		t.Fatal("no progress reported")
	}
	if ok, err := s.IndexesReady(t.Context()); err != nil || !ok {
		t.Fatalf("IndexesReady after the rebuild = %v, %v", ok, err)
	}
	_ = want
	checkIndexesAsRebuilt(t, s)
	compareQueries(t, s, r, 200)
}

// A list on an old file builds the indexes itself.
func TestListBuildsMissingIndexes(t *testing.T) {
	st := storetest.Open(t)
	s := New(Config{Store: st})
	seed(t, s, rand.New(rand.NewPCG(5, 6)), 50)
	dropListIndexes(t, st)
	p, err := s.List(t.Context(), Filter{}, "", false, 1, 10)
	if err != nil || p.Count != 50 || len(p.Tokens) != 10 {
		t.Fatalf("List = %d tokens of %d, %v", len(p.Tokens), p.Count, err)
	}
}

func wantParamErr(t *testing.T, err error, contains string) {
	t.Helper()
	if err == nil || !apierr.Is(err, apierr.Parameter) || !strings.Contains(err.Error(), contains) {
		t.Fatalf("err = %v, want a parameter error with %q", err, contains)
	}
}

// Queries past the cap are refused with a parameter error instead of
// decoding every token; bad paging is bounded.
func TestListBounds(t *testing.T) {
	s := New(Config{Store: storetest.Open(t)})
	s.listCap = 40
	seed(t, s, rand.New(rand.NewPCG(7, 8)), 300)
	ctx := t.Context()
	_, err := s.List(ctx, Filter{InfoKey: "a", InfoValue: "x1"}, "", false, 1, 10)
	wantParamErr(t, err, "infovalue")
	_, err = s.List(ctx, Filter{}, "count", false, 1, 10)
	wantParamErr(t, err, "sortby count")
	_, err = s.List(ctx, Filter{Type: "hotp"}, "failcount", true, 1, 10)
	wantParamErr(t, err, "sortby failcount")
	_, err = s.List(ctx, Filter{}, "", false, 1, 0)
	wantParamErr(t, err, "one page")
	_, err = s.List(ctx, Filter{}, "", false, 1, 41)
	wantParamErr(t, err, "pagesize")
	_, err = s.List(ctx, Filter{}, "nosuchcolumn", false, 1, 10)
	wantParamErr(t, err, "sortby must be one of")
	// Narrow enough: answered.
	if _, err := s.List(ctx, Filter{InfoKey: "a", InfoValue: "x1", UserRealm: "r1", Resolver: "res1", UserID: "u3"}, "count", false, 1, 10); err != nil {
		t.Fatal(err)
	}
	// serial=* is no filter; huge pages are empty, not an overflow.
	for _, page := range []int{1, 1 << 40, int(^uint(0) >> 1)} {
		p, err := s.List(ctx, Filter{Serial: "*"}, "", false, page, 15)
		if err != nil || p.Count != 300 {
			t.Fatalf("page %d: count %d, %v", page, p.Count, err)
		}
		if page > 1 && (len(p.Tokens) != 0 || p.Next != 0) {
			t.Fatalf("page %d: %d tokens, next %d", page, len(p.Tokens), p.Next)
		}
	}
	// A sort by an indexed column over more candidates than the cap
	// walks its index.
	s.listCap = 20
	p, err := s.List(ctx, Filter{}, "description", true, 3, 5)
	if err != nil {
		t.Fatal(err)
	}
	s.listCap = DefaultListCap
	if want := refList(t, s, Filter{}, "description", true, 3, 5); !slices.Equal(serialsOf(p), serialsOf(want)) || p.Count != want.Count {
		t.Fatalf("sort by description past the cap: %v, want %v", serialsOf(p), serialsOf(want))
	}
}

// Lists read without the decode cache, so they do not evict what
// authentications keep; the cache stays within its byte budget.
func TestListsBypassDecodeCache(t *testing.T) {
	s := New(Config{Store: storetest.Open(t), DecodeCacheBytes: 64 << 10})
	seed(t, s, rand.New(rand.NewPCG(9, 10)), 300)
	if got := s.decoded.size(); got > 64<<10 {
		t.Fatalf("the cache holds %d bytes, more than its 64 KiB", got)
	}
	n := s.decoded.len()
	if _, err := s.Get(t.Context(), "nosuch"); err == nil {
		t.Fatal("Get of a missing serial succeeded")
	}
	s.decoded = newDecodeCache(64 << 10)
	if _, err := s.List(t.Context(), Filter{}, "", false, 1, 100); err != nil {
		t.Fatal(err)
	}
	if s.decoded.len() != 0 {
		t.Fatalf("a list put %d entries in the decode cache", s.decoded.len())
	}
	if n == 0 {
		t.Fatal("saves cached nothing")
	}
}

// getserial tries a bounded candidate set and says when it would need
// more.
func TestGetSerialBounded(t *testing.T) {
	s := New(Config{Store: storetest.Open(t)})
	s.listCap = 30
	seed(t, s, rand.New(rand.NewPCG(11, 12)), 200)
	ctx := context.Background()
	_, _, err := s.GetSerial(ctx, "123456", GetSerialFilter{})
	wantParamErr(t, err, "getserial would try more than 30 tokens")
	serial, n, err := s.GetSerial(ctx, "123456", GetSerialFilter{Serial: "oath00"})
	if err != nil || serial != "" || n == 0 || n > 30 {
		t.Fatalf("GetSerial narrowed = %q, %d, %v", serial, n, err)
	}
	_, _, err = s.GetSerial(ctx, "123456", GetSerialFilter{Window: 1000})
	wantParamErr(t, err, "window of 1000")
}
