package audit_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// writeCommits appends entries in commits of the given sizes, each commit
// one store transaction with several WritePrepared calls, so that each
// leaves one seal over all its entries.
func writeCommits(t *testing.T, st store.Store, l *audit.Log, sizes ...int) {
	t.Helper()
	i := 0
	for _, n := range sizes {
		update(t, st, func(tx store.Tx) error {
			for j := range n {
				if _, err := l.WritePrepared(tx, l.Prepare(testEntry(i+j+1))); err != nil {
					return err
				}
			}
			return nil
		})
		i += n
	}
}

func sealCount(t *testing.T, st store.Store) int {
	t.Helper()
	n := 0
	if err := st.View(t.Context(), func(tx store.Tx) error {
		return tx.Bucket(audit.SealBucket).ForEach(nil, func(_, _ []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func sigChecks(t *testing.T, l *audit.Log, from, to uint64) string {
	t.Helper()
	var out []string
	for n := from; n <= to; n++ {
		row := rowOf(t, l, n)
		if row == nil {
			out = append(out, "-")
			continue
		}
		out = append(out, fmt.Sprint(row["sig_check"]))
	}
	return strings.Join(out, " ")
}

// TestSealPerCommit: a commit of several entries leaves one seal; an edit
// of one entry fails that entry alone, a rehash (a forger without the
// key) fails the whole commit, and the entries of other commits stay OK.
func TestSealPerCommit(t *testing.T) {
	st := storetest.Open(t)
	l := newLog(t, st, audit.Config{})
	writeCommits(t, st, l, 5, 10, 5)
	if n := sealCount(t, st); n != 3 {
		t.Fatalf("%d seals for 3 commits", n)
	}
	if rep, err := l.Verify(t.Context()); err != nil || !rep.OK() || rep.Entries != 20 {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	if got := sigChecks(t, l, 1, 20); got != strings.TrimSpace(strings.Repeat("OK ", 20)) {
		t.Fatalf("sig_check 1-20: %s", got)
	}

	editEntry(t, st, 8, setEntryField("user", "mallory"))
	rep, err := l.Verify(t.Context())
	if err != nil || !slices.Equal(problems(rep), []string{"8 edited"}) {
		t.Fatalf("one entry edited: %v, %v", rep.Problems, err)
	}
	if got, want := sigChecks(t, l, 5, 16), "OK OK OK FAIL OK OK OK OK OK OK OK OK"; got != want {
		t.Errorf("sig_check 5-16 = %s, want %s", got, want)
	}

	putRaw(t, st, audit.EntryBucket, key(8), audit.Rehash(getRaw(t, st, audit.EntryBucket, key(8))))
	rep, err = l.Verify(t.Context())
	if err != nil || !slices.Equal(problems(rep), []string{"6 signature", "9 chain"}) {
		t.Fatalf("one entry rehashed: %v, %v", rep.Problems, err)
	}
	if d := rep.Problems[0].Detail; !strings.Contains(d, "entries 6-15 are not as the seal of entry 15 signed them") {
		t.Errorf("detail %q", d)
	}
	if got, want := sigChecks(t, l, 5, 16), "OK FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAIL FAIL OK"; got != want {
		t.Errorf("sig_check 5-16 = %s, want %s", got, want)
	}
}

// TestLegacySignedEntries: a log written before seals (a signature on
// every entry, a head of kind "head") verifies and keeps growing with
// sealed commits; a signature moved to another entry is still found.
func TestLegacySignedEntries(t *testing.T) {
	st := storetest.Open(t)
	l := newLog(t, st, audit.Config{})
	writeCommits(t, st, l, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	if err := audit.MakeLegacy(st, testKey, fixedClock()); err != nil {
		t.Fatal(err)
	}
	if n := sealCount(t, st); n != 0 {
		t.Fatalf("%d seals left in the legacy log", n)
	}
	if rep, err := l.Verify(t.Context()); err != nil || !rep.OK() {
		t.Fatalf("legacy log: %v, %v", rep.Problems, err)
	}
	// New commits chain on and are sealed.
	for i := 11; i <= 14; i++ {
		if _, err := l.Write(t.Context(), testEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := l.Verify(t.Context()); err != nil || !rep.OK() || rep.Entries != 14 {
		t.Fatalf("legacy log with new entries: %+v, %v", rep, err)
	}
	if got := sigChecks(t, l, 1, 14); got != strings.TrimSpace(strings.Repeat("OK ", 14)) {
		t.Fatalf("sig_check 1-14: %s", got)
	}

	var sig any
	editEntry(t, st, 4, func(rec map[string]any) { sig = rec["sig"] })
	editEntry(t, st, 3, func(rec map[string]any) { rec["sig"] = sig })
	rep, err := l.Verify(t.Context())
	if err != nil || !slices.Equal(problems(rep), []string{"3 signature"}) {
		t.Fatalf("signature swapped: %v, %v", rep.Problems, err)
	}
	if got := sigChecks(t, l, 2, 4); got != "OK FAIL OK" {
		t.Errorf("sig_check 2-4 = %s", got)
	}
	// Without its signature a legacy entry has no seal to fall back on.
	editEntry(t, st, 3, func(rec map[string]any) { rec["sig"] = nil })
	rep, err = l.Verify(t.Context())
	if err != nil || !slices.Equal(problems(rep), []string{"3 signature"}) || !strings.Contains(rep.Problems[0].Detail, "covered by no valid seal") {
		t.Fatalf("signature removed: %v, %v", rep.Problems, err)
	}
}

// TestRetentionCutsACommit: retention that keeps part of a commit seals
// the kept part anew, so that the log still verifies; a commit whose
// entries were edited before is not sealed anew.
func TestRetentionCutsACommit(t *testing.T) {
	st := storetest.Open(t)
	l := newLog(t, st, audit.Config{})
	writeCommits(t, st, l, 10, 10, 10)
	n, err := newLog(t, st, audit.Config{MaxEntries: 15}).Retain(t.Context())
	if err != nil || n != 15 {
		t.Fatalf("Retain = %d, %v; want 15", n, err)
	}
	rep, err := l.Verify(t.Context())
	if err != nil || !rep.OK() || rep.First != 16 || rep.Last != 30 {
		t.Fatalf("after retention: %+v, %v", rep, err)
	}
	if n := sealCount(t, st); n != 2 {
		t.Errorf("%d seals left, want 2", n)
	}
	if got := sigChecks(t, l, 16, 30); got != strings.TrimSpace(strings.Repeat("OK ", 15)) {
		t.Errorf("sig_check 16-30: %s", got)
	}

	// A forged entry in the commit that the next cut splits: it stays found.
	editEntry(t, st, 24, setEntryField("user", "mallory"))
	putRaw(t, st, audit.EntryBucket, key(24), audit.Rehash(getRaw(t, st, audit.EntryBucket, key(24))))
	if _, err := newLog(t, st, audit.Config{MaxEntries: 8}).Retain(t.Context()); err != nil {
		t.Fatal(err)
	}
	rep, err = l.Verify(t.Context())
	if err != nil || !slices.Equal(problems(rep), []string{"23 signature", "25 chain"}) {
		t.Fatalf("after retention over a rehashed entry: %v, %v", rep.Problems, err)
	}
}
