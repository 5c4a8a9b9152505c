package audit_test

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// plainTx hides the store's store.PreCommitter, as a wrapping Tx does:
// a writer through it signs and writes the head itself.
type plainTx struct{ store.Tx }

// countingClock counts how often the log reads the clock: once per
// signed head (and per numbered checkpoint, none here).
func countingClock(n *atomic.Int32) func() time.Time {
	return func() time.Time { n.Add(1); return fixedClock() }
}

func headNumber(t *testing.T, st store.Store) uint64 {
	t.Helper()
	var head struct {
		Number uint64 `json:"number"`
	}
	if err := json.Unmarshal(getRaw(t, st, audit.MetaBucket, audit.HeadKey), &head); err != nil {
		t.Fatal(err)
	}
	return head.Number
}

// TestHeadOncePerCommit: entries appended in one commit get one signed
// head, for the last of them, and the log verifies; a rolled-back commit
// leaves nothing, and the chain goes on from the committed end.
func TestHeadOncePerCommit(t *testing.T) {
	st := storetest.Open(t)
	var heads atomic.Int32
	l := newLog(t, st, audit.Config{Now: countingClock(&heads), CheckpointEvery: 1000})
	var ps []audit.Prepared
	for i := 1; i <= 5; i++ {
		ps = append(ps, l.Prepare(testEntry(i)))
	}
	update(t, st, func(tx store.Tx) error {
		for _, p := range ps {
			if _, err := l.WritePrepared(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if n := heads.Load(); n != 1 {
		t.Errorf("%d heads signed for 5 entries in one commit, want 1", n)
	}
	if n := headNumber(t, st); n != 5 {
		t.Errorf("head names %d, want 5", n)
	}
	errBoom := errors.New("boom")
	if err := st.Update(t.Context(), func(tx store.Tx) error {
		if _, err := l.WritePrepared(tx, l.Prepare(testEntry(6))); err != nil {
			return err
		}
		return errBoom
	}); !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v", err)
	}
	if _, err := l.Write(t.Context(), testEntry(6)); err != nil {
		t.Fatal(err)
	}
	rep, err := l.Verify(t.Context())
	if err != nil || !rep.OK() || rep.Last != 6 || headNumber(t, st) != 6 {
		t.Fatalf("Verify = %+v, %v; head %d", rep, err, headNumber(t, st))
	}
}

// TestHeadMixedWriters: in one transaction, writers that keep the tip for
// the commit and writers that cannot (a Tx without store.PreCommitter)
// alternate; each sees the entries of the others, and the head names the
// last entry.
func TestHeadMixedWriters(t *testing.T) {
	st := storetest.Open(t)
	l := newLog(t, st, audit.Config{})
	for round := range 3 {
		update(t, st, func(tx store.Tx) error {
			for i := 1; i <= 6; i++ {
				var w store.Tx = tx
				if (i+round)%2 == 0 {
					w = plainTx{tx}
				}
				if _, err := l.WritePrepared(w, l.Prepare(testEntry(i))); err != nil {
					return err
				}
			}
			return nil
		})
	}
	rep, err := l.Verify(t.Context())
	if err != nil || !rep.OK() || rep.Entries != 18 {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	if n := headNumber(t, st); n != 18 {
		t.Errorf("head names %d, want 18", n)
	}
}

// TestConcurrentWritersVerify: concurrent writers through Write and
// through WritePrepared in their own transactions (grouped by the store
// into shared commits) leave a log that verifies, with the head at the
// last entry; truncating the last entries is still detected.
func TestConcurrentWritersVerify(t *testing.T) {
	st := storetest.Open(t)
	l := newLog(t, st, audit.Config{})
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				var err error
				if (w+i)%2 == 0 {
					_, err = l.Write(t.Context(), testEntry(i+1))
				} else {
					p := l.Prepare(testEntry(i + 1))
					err = st.Update(t.Context(), func(tx store.Tx) error {
						if err := tx.Bucket("other").Put([]byte{byte(w), byte(i)}, []byte{1}); err != nil {
							return err
						}
						_, err := l.WritePrepared(tx, p)
						return err
					})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rep, err := l.Verify(t.Context())
	if err != nil || !rep.OK() || rep.Entries != writers*each {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	if n := headNumber(t, st); n != writers*each {
		t.Errorf("head names %d, want %d", n, writers*each)
	}
	deleteKeys(t, st, audit.EntryBucket, writers*each-2, writers*each)
	rep, err = l.Verify(t.Context())
	// The last commit lost entries: those it kept have no seal now.
	if err != nil || rep.OK() || !slices.Contains(problems(rep), "318 truncated") {
		t.Errorf("after truncation: %v, %v", problems(rep), err)
	}
}

// TestLegacyJSONEntries: a log whose older entries are JSON records (as
// written before the compact encoding) verifies, is searched, keeps
// growing and is cut by retention; tampering with a JSON entry is found.
func TestLegacyJSONEntries(t *testing.T) {
	st := storetest.Open(t)
	l := newLog(t, st, audit.Config{})
	for i := 1; i <= 20; i++ {
		if _, err := l.Write(t.Context(), testEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	for n := uint64(1); n <= 12; n++ {
		putRaw(t, st, audit.EntryBucket, key(n), audit.RecordJSON(getRaw(t, st, audit.EntryBucket, key(n))))
	}
	if raw := getRaw(t, st, audit.EntryBucket, key(3)); raw[0] != '{' {
		t.Fatalf("entry 3 is not JSON: %q", raw)
	}
	if raw := getRaw(t, st, audit.EntryBucket, key(15)); raw[0] == '{' {
		t.Fatal("entry 15 is JSON: the writer does not write compact records")
	}
	for i := 21; i <= 25; i++ {
		if _, err := l.Write(t.Context(), testEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := l.Verify(t.Context())
	if err != nil || !rep.OK() || rep.Entries != 25 {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	res, err := l.Search(t.Context(), audit.Query{Filters: map[string]string{"serial": "HOTP000*"}})
	if err != nil || res.Count != 9 {
		t.Fatalf("Search = %d rows, %v; want 9", res.Count, err)
	}
	for _, r := range res.Rows {
		if r["sig_check"] != "OK" {
			t.Errorf("row %v: sig_check %v", r["number"], r["sig_check"])
		}
	}
	editEntry(t, st, 4, setEntryField("user", "mallory"))
	if rep, _ := l.Verify(t.Context()); len(rep.Problems) != 1 || problems(rep)[0] != "4 edited" {
		t.Errorf("an edited JSON entry: %v", problems(rep))
	}
	if raw := getRaw(t, st, audit.EntryBucket, key(4)); raw[0] != '{' {
		t.Fatal("editEntry changed the encoding")
	}
	editEntry(t, st, 4, setEntryField("user", testEntry(4).User))
	n, err := newLog(t, st, audit.Config{MaxEntries: 10}).Retain(t.Context())
	if err != nil || n != 15 {
		t.Fatalf("Retain = %d, %v", n, err)
	}
	if rep, err := l.Verify(t.Context()); err != nil || !rep.OK() || rep.First != 16 {
		t.Fatalf("after retention: %+v, %v", rep, err)
	}
}

// TestSearchCompactNeedles: a filter finds compact entries whose columns
// need Unicode lower-casing, next to a column longer than 127 bytes
// (whose length is not ASCII).
func TestSearchCompactNeedles(t *testing.T) {
	st := storetest.Open(t)
	l := newLog(t, st, audit.Config{})
	long := ""
	for range 40 {
		long += "Öffnen "
	}
	for _, u := range []string{"\u212Aelvin", "ÄRGER", "plain"} {
		e := testEntry(1)
		e.User, e.Info = u, long
		if _, err := l.Write(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	for filter, want := range map[string]int{"kelvin": 1, "*rger": 1, "ärger": 1, "PLAIN": 1, "*l*": 2, "nobody": 0} {
		res, err := l.Search(t.Context(), audit.Query{Filters: map[string]string{"user": filter}})
		if err != nil || res.Count != want {
			t.Errorf("user=%s: %d entries, %v; want %d", filter, res.Count, err, want)
		}
	}
	res, err := l.Search(t.Context(), audit.Query{Filters: map[string]string{"info": "*öffnen öffnen*"}})
	if err != nil || res.Count != 3 {
		t.Errorf("info filter: %d entries, %v; want 3", res.Count, err)
	}
}
