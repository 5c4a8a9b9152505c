package audit_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

func key(n uint64) []byte { return store.Uint64Key(n) }

// hashOf returns the stored hash of entry n.
func hashOf(t *testing.T, st store.Store, n uint64) []byte {
	t.Helper()
	return audit.StoredHash(getRaw(t, st, audit.EntryBucket, key(n)))
}

func setEntryField(field string, value any) func(map[string]any) {
	return func(rec map[string]any) { rec["entry"].(map[string]any)[field] = value }
}

// TestVerify tampers with copies of a 1,000-entry log (reliability spec
// S6) and checks what Verify reports and what /audit/ rows show.
func TestVerify(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, st store.Store)
		want   []string // "number kind", in order
		// detail holds substrings of the problems' details, by index.
		detail map[int]string
		// rows maps an entry number to its "sig_check missing_line" in
		// Search, or "" when it must not be listed.
		rows map[uint64]string
	}{
		{
			name:   "intact",
			tamper: func(*testing.T, store.Store) {},
			rows:   map[uint64]string{1: "OK OK", 500: "OK OK", 1000: "OK OK"},
		},
		{
			name: "one field edited",
			tamper: func(t *testing.T, st store.Store) {
				editEntry(t, st, 500, setEntryField("user", "mallory"))
			},
			want:   []string{"500 edited"},
			detail: map[int]string{0: "entry 500 does not match its hash"},
			rows:   map[uint64]string{499: "OK OK", 500: "FAIL OK", 501: "OK OK"},
		},
		{
			name: "success flag edited",
			tamper: func(t *testing.T, st store.Store) {
				editEntry(t, st, 10, setEntryField("success", false))
			},
			want: []string{"10 edited"},
			rows: map[uint64]string{10: "FAIL OK"},
		},
		{
			name: "edited and rehashed without the key",
			tamper: func(t *testing.T, st store.Store) {
				editEntry(t, st, 500, setEntryField("user", "mallory"))
				putRaw(t, st, audit.EntryBucket, key(500), audit.Rehash(getRaw(t, st, audit.EntryBucket, key(500))))
			},
			// The seal and the checkpoint at 500 and the link from 501
			// still hold the old hash.
			want:   []string{"500 signature", "500 checkpoint", "501 chain"},
			detail: map[int]string{0: "entry 500 is not as the seal of entry 500 signed them"},
			rows:   map[uint64]string{500: "FAIL OK", 501: "OK OK"},
		},
		{
			name: "seals swapped",
			tamper: func(t *testing.T, st store.Store) {
				s42, s43 := getRaw(t, st, audit.SealBucket, key(42)), getRaw(t, st, audit.SealBucket, key(43))
				putRaw(t, st, audit.SealBucket, key(42), s43)
				putRaw(t, st, audit.SealBucket, key(43), s42)
			},
			want:   []string{"42 signature", "42 checkpoint", "43 checkpoint"},
			detail: map[int]string{0: "entries 42-43 are covered by no valid seal", 1: "seal stored under 42 names entries 43-43"},
			rows:   map[uint64]string{41: "OK OK", 42: "FAIL OK", 43: "FAIL OK", 44: "OK OK"},
		},
		{
			name:   "seal deleted",
			tamper: func(t *testing.T, st store.Store) { deleteRaw(t, st, audit.SealBucket, key(77)) },
			want:   []string{"77 signature"},
			detail: map[int]string{0: "entry 77 is covered by no valid seal"},
			rows:   map[uint64]string{77: "FAIL OK", 78: "OK OK"},
		},
		{
			name: "seal forged with another key",
			tamper: func(t *testing.T, st store.Store) {
				putRaw(t, st, audit.SealBucket, key(300), audit.SignedSeal(otherKey, 300, 300, hashOf(t, st, 300), fixedClock()))
			},
			want:   []string{"300 signature", "300 checkpoint"},
			detail: map[int]string{1: "not signed by the log's key"},
			rows:   map[uint64]string{300: "FAIL OK"},
		},
		{
			name:   "middle entry deleted",
			tamper: func(t *testing.T, st store.Store) { deleteKeys(t, st, audit.EntryBucket, 500, 500) },
			want:   []string{"500 deleted"},
			detail: map[int]string{0: "entry 500 is missing"},
			rows:   map[uint64]string{499: "OK OK", 500: "", 501: "OK FAIL", 502: "OK OK"},
		},
		{
			name:   "range deleted",
			tamper: func(t *testing.T, st store.Store) { deleteKeys(t, st, audit.EntryBucket, 300, 310) },
			want:   []string{"300 deleted"},
			detail: map[int]string{0: "entries 300-310 are missing (11 entries)"},
			rows:   map[uint64]string{305: "", 311: "OK FAIL"},
		},
		{
			name:   "first entry deleted",
			tamper: func(t *testing.T, st store.Store) { deleteKeys(t, st, audit.EntryBucket, 1, 1) },
			want:   []string{"1 deleted"},
			rows:   map[uint64]string{2: "OK FAIL"},
		},
		{
			name:   "last 10 truncated",
			tamper: func(t *testing.T, st store.Store) { deleteKeys(t, st, audit.EntryBucket, 991, 1000) },
			want:   []string{"991 truncated"},
			detail: map[int]string{0: "entries 991-1000 after the last entry are missing (the signed head and a checkpoint name entry 1000)"},
			rows:   map[uint64]string{990: "OK OK", 1000: ""},
		},
		{
			name: "last 5 truncated, no checkpoint beyond",
			tamper: func(t *testing.T, st store.Store) {
				deleteKeys(t, st, audit.EntryBucket, 996, 1000)
				deleteRaw(t, st, audit.CheckpointBucket, key(1000))
			},
			want:   []string{"996 truncated"},
			detail: map[int]string{0: "(the signed head names entry 1000)"},
		},
		{
			name: "truncated and head deleted",
			tamper: func(t *testing.T, st store.Store) {
				deleteKeys(t, st, audit.EntryBucket, 991, 1000)
				deleteRaw(t, st, audit.MetaBucket, audit.HeadKey)
			},
			want:   []string{"990 head", "991 truncated"},
			detail: map[int]string{0: "missing", 1: "signed checkpoint 1000 names entry 1000"},
		},
		{
			name: "truncated, head and checkpoint deleted",
			tamper: func(t *testing.T, st store.Store) {
				deleteKeys(t, st, audit.EntryBucket, 991, 1000)
				deleteRaw(t, st, audit.MetaBucket, audit.HeadKey)
				deleteRaw(t, st, audit.CheckpointBucket, key(1000))
			},
			// The seals of the removed entries still name them.
			want:   []string{"990 head", "991 truncated"},
			detail: map[int]string{1: "the signed seal of entry 1000 names entry 1000"},
		},
		{
			name: "truncated, head, checkpoint and seals deleted",
			tamper: func(t *testing.T, st store.Store) {
				deleteKeys(t, st, audit.EntryBucket, 991, 1000)
				deleteKeys(t, st, audit.SealBucket, 991, 1000)
				deleteRaw(t, st, audit.MetaBucket, audit.HeadKey)
				deleteRaw(t, st, audit.CheckpointBucket, key(1000))
			},
			want: []string{"990 head"},
		},
		{
			name: "head forged with another key",
			tamper: func(t *testing.T, st store.Store) {
				putRaw(t, st, audit.MetaBucket, audit.HeadKey,
					audit.SignedCheckpoint(otherKey, "head", 1000, hashOf(t, st, 1000), fixedClock()))
			},
			want:   []string{"1000 head"},
			detail: map[int]string{0: "not signed by the log's key"},
		},
		{
			name: "truncated under a forged head",
			tamper: func(t *testing.T, st store.Store) {
				deleteKeys(t, st, audit.EntryBucket, 991, 1000)
				putRaw(t, st, audit.MetaBucket, audit.HeadKey,
					audit.SignedCheckpoint(otherKey, "head", 990, hashOf(t, st, 990), fixedClock()))
			},
			want: []string{"990 head", "991 truncated"},
		},
		{
			name: "truncated under a replayed older head",
			tamper: func(t *testing.T, st store.Store) {
				deleteKeys(t, st, audit.EntryBucket, 991, 1000)
				putRaw(t, st, audit.MetaBucket, audit.HeadKey,
					audit.SignedCheckpoint(testKey, "head", 990, hashOf(t, st, 990), fixedClock()))
			},
			want:   []string{"991 truncated"},
			detail: map[int]string{0: "signed checkpoint 1000"},
		},
		{
			name: "checkpoint passed off as the head",
			tamper: func(t *testing.T, st store.Store) {
				putRaw(t, st, audit.MetaBucket, audit.HeadKey, getRaw(t, st, audit.CheckpointBucket, key(1000)))
			},
			want:   []string{"1000 head"},
			detail: map[int]string{0: `marked "checkpoint"`},
		},
		{
			name: "head names the wrong hash",
			tamper: func(t *testing.T, st store.Store) {
				putRaw(t, st, audit.MetaBucket, audit.HeadKey,
					audit.SignedCheckpoint(testKey, "head", 1000, hashOf(t, st, 999), fixedClock()))
			},
			want:   []string{"1000 head"},
			detail: map[int]string{0: "disagrees with entry 1000"},
		},
		{
			name:   "head undecodable",
			tamper: func(t *testing.T, st store.Store) { putRaw(t, st, audit.MetaBucket, audit.HeadKey, []byte("{")) },
			want:   []string{"0 head"},
		},
		{
			name:   "entry undecodable",
			tamper: func(t *testing.T, st store.Store) { putRaw(t, st, audit.EntryBucket, key(700), []byte("{not json")) },
			want:   []string{"700 undecodable"},
			rows:   map[uint64]string{700: "FAIL OK", 701: "OK OK"},
		},
		{
			name: "entry moved to the end",
			tamper: func(t *testing.T, st store.Store) {
				raw := getRaw(t, st, audit.EntryBucket, key(600))
				deleteKeys(t, st, audit.EntryBucket, 600, 600)
				putRaw(t, st, audit.EntryBucket, key(1001), raw)
			},
			want: []string{"600 deleted", "1000 head", "1001 edited", "1001 signature", "1001 chain"},
			rows: map[uint64]string{601: "OK FAIL", 1001: "FAIL OK"},
		},
		{
			name: "checkpoint edited",
			tamper: func(t *testing.T, st store.Store) {
				putRaw(t, st, audit.CheckpointBucket, key(300),
					[]byte(strings.Replace(string(getRaw(t, st, audit.CheckpointBucket, key(300))), `"number":300`, `"number":301`, 1)))
			},
			want: []string{"300 checkpoint"},
		},
		{
			name: "checkpoint forged with another key",
			tamper: func(t *testing.T, st store.Store) {
				putRaw(t, st, audit.CheckpointBucket, key(300),
					audit.SignedCheckpoint(otherKey, "checkpoint", 300, hashOf(t, st, 300), fixedClock()))
			},
			want: []string{"300 checkpoint"},
		},
		{
			name:   "stray key in the bucket",
			tamper: func(t *testing.T, st store.Store) { putRaw(t, st, audit.EntryBucket, []byte("x"), []byte("{}")) },
			want:   []string{"0 undecodable"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := fixtureCopy(t)
			tc.tamper(t, st)
			l := newLog(t, st, audit.Config{})
			rep, err := l.Verify(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := problems(rep); !slices.Equal(got, tc.want) {
				t.Errorf("problems = %q, want %q\n%v", got, tc.want, rep.Problems)
			}
			if rep.OK() != (len(tc.want) == 0) {
				t.Errorf("OK() = %v with %d problems", rep.OK(), len(rep.Problems))
			}
			for i, sub := range tc.detail {
				if i >= len(rep.Problems) || !strings.Contains(rep.Problems[i].Detail, sub) {
					t.Errorf("problem %d does not say %q: %v", i, sub, rep.Problems)
				}
			}
			for n, want := range tc.rows {
				row := rowOf(t, l, n)
				got := ""
				if row != nil {
					got = fmt.Sprintf("%v %v", row["sig_check"], row["missing_line"])
				}
				if got != want {
					t.Errorf("entry %d: sig_check missing_line = %q, want %q", n, got, want)
				}
			}
		})
	}
}

func TestVerifyReport(t *testing.T) {
	t.Run("counts", func(t *testing.T) {
		st := fixtureCopy(t)
		deleteKeys(t, st, audit.EntryBucket, 1, 5)
		rep, err := audit.VerifyStore(t.Context(), st, testKey.Public().(ed25519.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Entries != 995 || rep.First != 6 || rep.Last != 1000 {
			t.Errorf("Entries, First, Last = %d, %d, %d; want 995, 6, 1000", rep.Entries, rep.First, rep.Last)
		}
	})
	t.Run("empty store", func(t *testing.T) {
		rep, err := newLog(t, storetest.Open(t), audit.Config{}).Verify(t.Context())
		if err != nil || !rep.OK() || rep.Entries != 0 {
			t.Errorf("Verify = %+v, %v; want an OK empty report", rep, err)
		}
	})
	t.Run("another key", func(t *testing.T) {
		rep, err := audit.VerifyStore(t.Context(), fixtureCopy(t), otherKey.Public().(ed25519.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, p := range rep.Problems {
			kinds[p.Kind]++
		}
		// Every seal fails, and so all entries are reported as one run.
		want := map[string]int{"signature": 1, "checkpoint": fixtureEntries + fixtureEntries/fixtureEvery, "head": 1}
		if fmt.Sprint(kinds) != fmt.Sprint(want) {
			t.Errorf("problems by kind = %v, want %v", kinds, want)
		}
	})
	t.Run("bad public key", func(t *testing.T) {
		if _, err := audit.VerifyStore(t.Context(), storetest.Open(t), ed25519.PublicKey("short")); err == nil {
			t.Error("VerifyStore accepted a 5-byte key")
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := newLog(t, fixtureCopy(t), audit.Config{}).Verify(ctx); err == nil {
			t.Error("Verify with a canceled context returned no error")
		}
	})
}

// TestRetention checks that retention keeps the log verifiable through
// the base checkpoint, and that tampering with the base is reported.
func TestRetention(t *testing.T) {
	retain := func(t *testing.T, st store.Store, cfg audit.Config, want int) {
		t.Helper()
		n, err := newLog(t, st, cfg).Retain(t.Context())
		if err != nil || n != want {
			t.Fatalf("Retain = %d, %v; want %d removed", n, err, want)
		}
	}
	write := func(t *testing.T, st store.Store, n int) {
		t.Helper()
		l := newLog(t, st, audit.Config{})
		for i := range n {
			if _, err := l.Write(t.Context(), testEntry(fixtureEntries+1+i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name        string
		setup       func(t *testing.T, st store.Store)
		want        []string
		first, last uint64
		rows        map[uint64]string
	}{
		{
			name:  "max entries",
			setup: func(t *testing.T, st store.Store) { retain(t, st, audit.Config{MaxEntries: 100}, 900) },
			first: 901, last: 1000,
			rows: map[uint64]string{900: "", 901: "OK OK", 902: "OK OK"},
		},
		{
			name: "max entries, then more entries",
			setup: func(t *testing.T, st store.Store) {
				retain(t, st, audit.Config{MaxEntries: 100}, 900)
				write(t, st, 3)
			},
			first: 901, last: 1003,
			rows: map[uint64]string{901: "OK OK", 1001: "OK OK"},
		},
		{
			name: "exactly one full slice removed",
			setup: func(t *testing.T, st store.Store) {
				write(t, st, 10)
				retain(t, st, audit.Config{MaxEntries: 10}, 1000)
			},
			first: 1001, last: 1010,
			rows: map[uint64]string{1001: "OK OK"},
		},
		{
			name: "more than one slice removed",
			setup: func(t *testing.T, st store.Store) {
				write(t, st, 10)
				retain(t, st, audit.Config{MaxEntries: 5}, 1005)
			},
			first: 1006, last: 1010,
			rows: map[uint64]string{1006: "OK OK"},
		},
		{
			name: "max age removes everything",
			setup: func(t *testing.T, st store.Store) {
				late := func() time.Time { return t0.Add(10000 * time.Minute) }
				retain(t, st, audit.Config{MaxAge: time.Hour, Now: late}, 1000)
			},
		},
		{
			name: "everything removed, then one entry",
			setup: func(t *testing.T, st store.Store) {
				late := func() time.Time { return t0.Add(10000 * time.Minute) }
				retain(t, st, audit.Config{MaxAge: time.Hour, Now: late}, 1000)
				write(t, st, 1)
			},
			first: 1001, last: 1001,
			rows: map[uint64]string{1001: "OK OK"},
		},
		{
			name: "max age",
			setup: func(t *testing.T, st store.Store) {
				// Entry i is dated t0+i minutes: keep the last 60 minutes.
				at := func() time.Time { return t0.Add(1000 * time.Minute) }
				retain(t, st, audit.Config{MaxAge: time.Hour, Now: at}, 939)
			},
			first: 940, last: 1000,
			rows: map[uint64]string{940: "OK OK"},
		},
		{
			name: "base edited",
			setup: func(t *testing.T, st store.Store) {
				retain(t, st, audit.Config{MaxEntries: 100}, 900)
				raw := getRaw(t, st, audit.MetaBucket, audit.BaseKey)
				putRaw(t, st, audit.MetaBucket, audit.BaseKey, []byte(strings.Replace(string(raw), `"number":901`, `"number":850`, 1)))
			},
			want:  []string{"1 deleted", "850 checkpoint"},
			first: 901, last: 1000,
			rows: map[uint64]string{901: "OK FAIL", 902: "OK OK"},
		},
		{
			name: "base deleted",
			setup: func(t *testing.T, st store.Store) {
				retain(t, st, audit.Config{MaxEntries: 100}, 900)
				deleteRaw(t, st, audit.MetaBucket, audit.BaseKey)
			},
			want:  []string{"1 deleted"},
			first: 901, last: 1000,
			rows: map[uint64]string{901: "OK FAIL"},
		},
		{
			name: "base forged with another key",
			setup: func(t *testing.T, st store.Store) {
				retain(t, st, audit.Config{MaxEntries: 100}, 900)
				prev := hashOf(t, st, 950)
				deleteKeys(t, st, audit.EntryBucket, 901, 950)
				putRaw(t, st, audit.MetaBucket, audit.BaseKey,
					audit.SignedCheckpoint(otherKey, "base", 951, prev, fixedClock()))
			},
			want:  []string{"1 deleted", "951 checkpoint"},
			first: 951, last: 1000,
			rows: map[uint64]string{951: "OK FAIL"},
		},
		{
			name: "older base replayed",
			setup: func(t *testing.T, st store.Store) {
				retain(t, st, audit.Config{MaxEntries: 200}, 800)
				old := getRaw(t, st, audit.MetaBucket, audit.BaseKey)
				retain(t, st, audit.Config{MaxEntries: 100}, 100)
				putRaw(t, st, audit.MetaBucket, audit.BaseKey, old)
			},
			want:  []string{"801 deleted"},
			first: 901, last: 1000,
			rows: map[uint64]string{901: "OK FAIL"},
		},
		{
			name: "first kept entries deleted",
			setup: func(t *testing.T, st store.Store) {
				retain(t, st, audit.Config{MaxEntries: 100}, 900)
				deleteKeys(t, st, audit.EntryBucket, 901, 905)
			},
			want:  []string{"901 deleted"},
			first: 906, last: 1000,
			rows: map[uint64]string{906: "OK FAIL"},
		},
		{
			name: "removed entry put back",
			setup: func(t *testing.T, st store.Store) {
				raw := getRaw(t, st, audit.EntryBucket, key(900))
				retain(t, st, audit.Config{MaxEntries: 100}, 900)
				putRaw(t, st, audit.EntryBucket, key(900), raw)
			},
			// Its seal went with it.
			want:  []string{"900 signature", "900 checkpoint"},
			first: 900, last: 1000,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := fixtureCopy(t)
			tc.setup(t, st)
			l := newLog(t, st, audit.Config{})
			rep, err := l.Verify(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := problems(rep); !slices.Equal(got, tc.want) {
				t.Errorf("problems = %q, want %q\n%v", got, tc.want, rep.Problems)
			}
			if rep.First != tc.first || rep.Last != tc.last {
				t.Errorf("First, Last = %d, %d; want %d, %d", rep.First, rep.Last, tc.first, tc.last)
			}
			for n, want := range tc.rows {
				row := rowOf(t, l, n)
				got := ""
				if row != nil {
					got = fmt.Sprintf("%v %v", row["sig_check"], row["missing_line"])
				}
				if got != want {
					t.Errorf("entry %d: sig_check missing_line = %q, want %q", n, got, want)
				}
			}
		})
	}
}

// TestWriteCanonical writes what a client may send (bytes that are not
// UTF-8) and a local time with a monotonic reading: the entry must verify
// after its JSON round trip.
func TestWriteCanonical(t *testing.T) {
	st := storetest.Open(t)
	l := newLog(t, st, audit.Config{})
	zone := time.FixedZone("X", 5*3600+30*60)
	e, err := l.Write(t.Context(), audit.Entry{
		Date:      time.Now().In(zone),
		StartDate: time.Now(),
		Action:    "POST /validate/check",
		User:      "b\xe2\x82",
		UserAgent: "curl\xff\xfe/8",
		Duration:  0.1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.UserAgent != "curl\uFFFD\uFFFD/8" || e.User != "b\uFFFD\uFFFD" {
		t.Errorf("written entry has user %q, user agent %q", e.User, e.UserAgent)
	}
	rep, err := l.Verify(t.Context())
	if err != nil || !rep.OK() {
		t.Fatalf("Verify = %v, %v", rep.Problems, err)
	}
	if row := rowOf(t, l, 1); row["sig_check"] != "OK" || row["user_agent"] != "curl\uFFFD\uFFFD/8" {
		t.Errorf("row = %v", row)
	}
}

// TestWriteConcurrent writes from many goroutines (one group commit for
// several entries) and checks that the chain has no gap or fork.
func TestWriteConcurrent(t *testing.T) {
	st := storetest.Open(t)
	l := newLog(t, st, audit.Config{CheckpointEvery: 50})
	const workers, each = 20, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if _, err := l.Write(t.Context(), testEntry(w*each+i+1)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rep, err := l.Verify(t.Context())
	if err != nil || !rep.OK() || rep.Entries != workers*each || rep.Last != workers*each {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}
