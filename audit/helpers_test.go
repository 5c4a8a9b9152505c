package audit_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/store/storetest"
)

// The fixture: fixtureEntries entries written through Log.Write with a
// fixed key and clock, a checkpoint every fixtureEvery entries.
const (
	fixtureEntries = 1000
	fixtureEvery   = 100
)

var (
	testKey  = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	otherKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	// t0 is the date of entry 0; entry i is dated i minutes later.
	t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// fixedClock is the clock of the test logs (it stamps checkpoints).
func fixedClock() time.Time { return t0.Add(48 * time.Hour) }

var actions = []string{"POST /validate/check", "GET /token/", "POST /auth"}

// testEntry is the i-th entry (1-based) of the fixture; the tests' own
// predicates below mirror it.
func testEntry(i int) audit.Entry {
	return audit.Entry{
		Date:           t0.Add(time.Duration(i) * time.Minute),
		StartDate:      t0.Add(time.Duration(i)*time.Minute - 1234567*time.Microsecond),
		Duration:       1.234567,
		Action:         actions[i%3],
		Success:        i%2 == 0,
		Serial:         fmt.Sprintf("HOTP%04d", i),
		TokenType:      "hotp",
		User:           fmt.Sprintf("user%d", i%10),
		Realm:          []string{"realm1", "Realm2"}[i%2],
		Resolver:       "r1",
		Administrator:  "",
		ActionDetail:   "",
		Info:           "",
		Node:           "node1",
		Client:         "10.0.0.1",
		UserAgent:      "privacyidea-cp",
		Policies:       "",
		ThreadID:       "140",
		Authentication: []string{"ACCEPT", "REJECT"}[i%2],
	}
}

func newLog(t testing.TB, st store.Store, cfg audit.Config) *audit.Log {
	t.Helper()
	cfg.Store = st
	if cfg.Key == nil {
		cfg.Key = testKey
	}
	if cfg.Now == nil {
		cfg.Now = fixedClock
	}
	if cfg.CheckpointEvery == 0 {
		cfg.CheckpointEvery = fixtureEvery
	}
	l, err := audit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

var fixture struct {
	once sync.Once
	data []byte
	err  error
}

// fixtureCopy returns a fresh copy of the fixture store, so that each
// test may tamper with its own.
func fixtureCopy(t *testing.T) store.Store {
	t.Helper()
	fixture.once.Do(func() {
		st := storetest.Open(t)
		l := newLog(t, st, audit.Config{})
		for i := 1; i <= fixtureEntries; i++ {
			if _, err := l.Write(t.Context(), testEntry(i)); err != nil {
				fixture.err = err
				return
			}
		}
		var buf bytes.Buffer
		if _, err := st.(store.Snapshotter).Snapshot(t.Context(), &buf); err != nil {
			fixture.err = err
			return
		}
		fixture.data = buf.Bytes()
	})
	if fixture.err != nil {
		t.Fatalf("fixture: %v", fixture.err)
	}
	path := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(path, fixture.data, 0o600); err != nil {
		t.Fatal(err)
	}
	return bolt.OpenForTest(t, path)
}

// update runs fn in a write transaction or fails the test.
func update(t *testing.T, st store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := st.Update(t.Context(), fn); err != nil {
		t.Fatalf("tamper: %v", err)
	}
}

// getRaw returns a copy of the raw value of key in bucket.
func getRaw(t *testing.T, st store.Store, bucket string, key []byte) []byte {
	t.Helper()
	var out []byte
	if err := st.View(t.Context(), func(tx store.Tx) error {
		out = bytes.Clone(tx.Bucket(bucket).Get(key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// editEntry rewrites entry n through edit, which gets the record as a
// generic map of its JSON form ({"entry": {...}, "prev": ..., "hash": ...,
// "sig": ...}); the entry is stored back in the encoding it had.
func editEntry(t *testing.T, st store.Store, n uint64, edit func(rec map[string]any)) {
	t.Helper()
	update(t, st, func(tx store.Tx) error {
		b := tx.Bucket(audit.EntryBucket)
		stored := b.Get(store.Uint64Key(n))
		var rec map[string]any
		if err := json.Unmarshal(audit.RecordJSON(stored), &rec); err != nil {
			return err
		}
		edit(rec)
		raw, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if stored[0] != '{' {
			if raw, err = audit.CompactRecord(raw); err != nil {
				return err
			}
		}
		return b.Put(store.Uint64Key(n), raw)
	})
}

// deleteKeys removes the numbered keys from..to (inclusive) from bucket.
func deleteKeys(t *testing.T, st store.Store, bucket string, from, to uint64) {
	t.Helper()
	update(t, st, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		for n := from; n <= to; n++ {
			if err := b.Delete(store.Uint64Key(n)); err != nil {
				return err
			}
		}
		return nil
	})
}

func putRaw(t *testing.T, st store.Store, bucket string, key, value []byte) {
	t.Helper()
	update(t, st, func(tx store.Tx) error { return tx.Bucket(bucket).Put(key, value) })
}

func deleteRaw(t *testing.T, st store.Store, bucket string, key []byte) {
	t.Helper()
	update(t, st, func(tx store.Tx) error { return tx.Bucket(bucket).Delete(key) })
}

// rowOf returns the API row of entry n, or nil when it is not listed.
func rowOf(t *testing.T, l *audit.Log, n uint64) audit.Row {
	t.Helper()
	res, err := l.Search(t.Context(), audit.Query{Filters: map[string]string{"number": fmt.Sprint(n)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) == 0 {
		return nil
	}
	return res.Rows[0]
}

// problems renders a report's problems as "number kind" lines.
func problems(r audit.Report) []string {
	out := make([]string, 0, len(r.Problems))
	for _, p := range r.Problems {
		out = append(out, fmt.Sprintf("%d %s", p.Number, p.Kind))
	}
	return out
}
