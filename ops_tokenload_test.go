package authsrv_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// oathCSV is an oathcsv file of the HOTP tokens prefix<from> to
// prefix<to-1>, with six-digit numbers.
func oathCSV(prefix string, from, to int) []byte {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%s%06d,%s,hotp,6\n", prefix, i, rfcKeyHex)
	}
	return []byte(b.String())
}

// passedDeadline is a context with a deadline that passes when passed
// says so, whatever the clock: a deadline that comes after a given number
// of commits on any machine.
type passedDeadline struct {
	context.Context
	passed func() bool
	once   sync.Once
	done   chan struct{}
}

func newPassedDeadline(parent context.Context, passed func() bool) *passedDeadline {
	return &passedDeadline{Context: parent, passed: passed, done: make(chan struct{})}
}

func (c *passedDeadline) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }

func (c *passedDeadline) Err() error {
	if c.passed() {
		c.once.Do(func() { close(c.done) })
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

func (c *passedDeadline) Done() <-chan struct{} {
	_ = c.Err()
	return c.done
}

// tokenCommits counts the commits since n that wrote tokens, and fails t
// for one that wrote tokens without an audit entry.
func tokenCommits(t *testing.T, rs *recStore, n int) int {
	t.Helper()
	k := 0
	for _, buckets := range rs.since(n) {
		if slices.Contains(buckets, "tokens") {
			k++
			if !slices.Contains(buckets, "audit") {
				t.Errorf("a commit wrote %v without its audit entry", buckets)
			}
		}
	}
	return k
}

// importEntries are the infos of the audit entries of an import, in the
// order written, and the number of tokens the batch entries name.
func importEntries(t *testing.T, s *authsrv.Server, name string) (infos []string, batched int) {
	t.Helper()
	rs := rows(t, s, map[string]string{"action": "POST /token/load/" + name})
	slices.SortFunc(rs, func(a, b audit.Row) int {
		return a["number"].(int) - b["number"].(int)
	})
	batch := regexp.MustCompile(`^imported (\d+) tokens( \(batch \d+[:,] .*\))?$`)
	for _, r := range rs {
		info, _ := r["info"].(string)
		infos = append(infos, info)
		// A summary of an import that stopped early is a failure; the
		// entries of what it brought in are successes.
		if ok := r["success"] == 1; ok == strings.Contains(info, "stopped") {
			t.Errorf("entry %q: success %v", info, r["success"])
		}
		if m := batch.FindStringSubmatch(info); m != nil && (m[2] != "" || len(rs) == 1) {
			n, _ := strconv.Atoi(m[1])
			batched += n
		}
	}
	return infos, batched
}

// existing counts the tokens prefix<from>..prefix<to-1> in the store.
func existing(t *testing.T, s *authsrv.Server, prefix string, from, to int) int {
	t.Helper()
	n := 0
	for i := from; i < to; i++ {
		ok, err := s.Tokens().Exists(t.Context(), fmt.Sprintf("%s%06d", prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			n++
		}
	}
	return n
}

// TestImportStopsAtDeadlineBetweenBatches: an import whose deadline comes
// after its second batch keeps those two batches whole, each with its
// audit entry, answers and audits how many it imported and how many it did
// not attempt; the same file imported again brings in the rest and
// refuses the serials it has.
func TestImportStopsAtDeadlineBetweenBatches(t *testing.T) {
	s, rs := tokenServer(t)
	o := s.Ops()
	const total = 3200
	// Ten serials of the first batch exist already.
	if res, err := o.ImportTokens(t.Context(), admin, authsrv.TokenImport{Format: "oathcsv", Name: "pre.csv", File: oathCSV("CUT", 100, 110)}); err != nil || res.Imported != 10 {
		t.Fatalf("pre-import: %+v, %v", res, err)
	}
	file := oathCSV("CUT", 0, total)

	n0 := rs.count()
	ctx := newPassedDeadline(t.Context(), func() bool { return tokenCommits(t, rs, n0) >= 2 })
	res, err := o.ImportTokens(ctx, admin, authsrv.TokenImport{Format: "oathcsv", Name: "cut.csv", File: file})
	if err != nil {
		t.Fatal(err)
	}
	if res.Imported != 990 || len(res.NotImported) != 10 || res.NotAttempted != total-1000 {
		t.Errorf("imported %d, not imported %d, not attempted %d; want 990, 10, %d", res.Imported, len(res.NotImported), res.NotAttempted, total-1000)
	}
	if !strings.Contains(res.Stopped, "deadline") {
		t.Errorf("stopped %q, want the deadline", res.Stopped)
	}
	for _, f := range res.NotImported {
		if f.Reason != "a token with this serial already exists" {
			t.Errorf("%s not imported: %q", f.Serial, f.Reason)
		}
	}
	if got := tokenCommits(t, rs, n0); got != 2 {
		t.Errorf("%d commits wrote tokens, want 2", got)
	}
	// The two batches are whole; nothing after them was written.
	if n := existing(t, s, "CUT", 0, 1000); n != 1000 {
		t.Errorf("%d of the first 1000 serials exist", n)
	}
	if n := existing(t, s, "CUT", 1000, total); n != 0 {
		t.Errorf("%d serials after the cut exist", n)
	}
	infos, batched := importEntries(t, s, "cut.csv")
	want := []string{
		"imported 490 tokens (batch 1: 490 tokens so far)",
		"imported 500 tokens (batch 2: 990 tokens so far)",
		"imported 990 tokens, then stopped: the deadline of the request came; 2200 records not attempted",
	}
	if !slices.Equal(infos, want) {
		t.Errorf("audit entries\n%q\nwant\n%q", infos, want)
	}
	if batched != res.Imported {
		t.Errorf("the batch entries name %d tokens, %d were imported", batched, res.Imported)
	}

	// Again, without a deadline: the rest comes in, in batches.
	n1 := rs.count()
	res, err = o.ImportTokens(t.Context(), admin, authsrv.TokenImport{Format: "oathcsv", Name: "again.csv", File: file})
	if err != nil {
		t.Fatal(err)
	}
	if res.Imported != total-1000 || len(res.NotImported) != 1000 || res.NotAttempted != 0 || res.Stopped != "" {
		t.Errorf("second import: imported %d, not imported %d, not attempted %d, stopped %q", res.Imported, len(res.NotImported), res.NotAttempted, res.Stopped)
	}
	if got, want := tokenCommits(t, rs, n1), (total-1000+499)/500; got != want {
		t.Errorf("%d commits wrote tokens, want %d", got, want)
	}
	if n := existing(t, s, "CUT", 0, total); n != total {
		t.Errorf("%d of %d serials exist", n, total)
	}
	infos, batched = importEntries(t, s, "again.csv")
	if batched != total-1000 || len(infos) != 5 || infos[4] != "imported 200 tokens (batch 5, the last: 2200 tokens in all)" {
		t.Errorf("second import: entries name %d tokens: %q", batched, infos)
	}
}

// recServer is a server on rs, without users.
func recServer(t *testing.T, rs *recStore) *authsrv.Server {
	t.Helper()
	key := bytes.Repeat([]byte{7}, 32)
	s, err := authsrv.New(authsrv.WithStore(rs), authsrv.WithEncKey(key), authsrv.WithJWTKey(key), cheapKDF)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// slowStore makes every write take at least pause.
type slowStore struct {
	store.Store
	pause time.Duration
}

func (s slowStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	time.Sleep(s.pause)
	return err
}

// TestImportWithShortDeadline: an import that cannot finish by its
// deadline (each batch takes 20 ms, the deadline is 100 ms away) stops
// there, answers, and every token it wrote is named by an audit entry.
func TestImportWithShortDeadline(t *testing.T) {
	rs := &recStore{Store: slowStore{Store: storetest.Open(t), pause: 20 * time.Millisecond}}
	s := recServer(t, rs)
	const total = 5000
	n0 := rs.count()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	res, err := s.Ops().ImportTokens(ctx, admin, authsrv.TokenImport{Format: "oathcsv", Name: "short.csv", File: oathCSV("SHORT", 0, total)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("imported %d, not attempted %d", res.Imported, res.NotAttempted)
	if res.NotAttempted == 0 || !strings.Contains(res.Stopped, "deadline") {
		t.Errorf("not attempted %d, stopped %q: the import did not stop at its deadline", res.NotAttempted, res.Stopped)
	}
	if got := res.Imported + len(res.NotImported) + res.NotAttempted; got != total {
		t.Errorf("imported + not imported + not attempted = %d, want %d", got, total)
	}
	if n := existing(t, s, "SHORT", 0, total); n != res.Imported {
		t.Errorf("%d tokens exist, the answer says %d", n, res.Imported)
	}
	if res.Imported%500 != 0 {
		t.Errorf("imported %d: not whole batches", res.Imported)
	}
	tokenCommits(t, rs, n0)
	infos, batched := importEntries(t, s, "short.csv")
	if batched != res.Imported {
		t.Errorf("the batch entries name %d tokens, %d were imported", batched, res.Imported)
	}
	last := infos[len(infos)-1]
	if want := fmt.Sprintf("imported %d tokens, then stopped: the deadline of the request came; %d records not attempted", res.Imported, res.NotAttempted); last != want {
		t.Errorf("last entry %q, want %q", last, want)
	}
}

// BenchmarkImportTokens imports files of 1000 and of 17000 tokens (the
// size of a 1 MiB OATH CSV) into a store on disk (fsync on), as the binary
// does; tokens/s is the figure to compare.
func BenchmarkImportTokens(b *testing.B) {
	for _, n := range []int{1000, 17000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s, err := authsrv.New(authsrv.WithDataDir(b.TempDir()), cheapKDF)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				file := oathCSV(fmt.Sprintf("B%04d", i), 0, n)
				i++
				res, err := s.Ops().ImportTokens(b.Context(), admin, authsrv.TokenImport{Format: "oathcsv", Name: "b.csv", File: file})
				if err != nil || res.Imported != n {
					b.Fatalf("imported %d, %v", res.Imported, err)
				}
			}
			b.ReportMetric(float64(n*i)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// policyFile is an exported policy file of n admin policies, with a broken
// one last when broken.
func policyFile(n int, broken bool) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "[pol%05d]\nscope = 'admin'\naction = 'enable, disable'\nrealm = 'realm1'\npriority = %d\n", i, 1+i%5)
	}
	if broken {
		b.WriteString("[broken]\nscope = 'admin'\naction = 'nonsense'\n")
	}
	return []byte(b.String())
}

// TestImportPoliciesOneTransaction: a large policy file is imported in
// one transaction with its audit entry, which names how many; a file with
// one bad policy at its end imports nothing.
func TestImportPoliciesOneTransaction(t *testing.T) {
	s, rs := tokenServer(t)
	const n = 5000
	n0 := rs.count()
	if _, err := s.Ops().ImportPolicies(t.Context(), admin, policyFile(n, true)); err == nil {
		t.Fatal("a file with a bad policy was imported")
	}
	if ps, err := s.Policies().List(t.Context(), policy.Filter{}); err != nil || len(ps) != 0 {
		t.Fatalf("a failed import left %d policies (%v)", len(ps), err)
	}
	n1 := rs.count()
	got, err := s.Ops().ImportPolicies(t.Context(), admin, policyFile(n, false))
	if err != nil || got != n {
		t.Fatalf("imported %d, %v", got, err)
	}
	if ps, err := s.Policies().List(t.Context(), policy.Filter{}); err != nil || len(ps) != n {
		t.Fatalf("%d policies stored (%v)", len(ps), err)
	}
	for i, c := range [][][]string{rs.since(n0)[:n1-n0], rs.since(n1)} {
		writes := 0
		for _, buckets := range c {
			if slices.Contains(buckets, "policies") {
				writes++
				if !slices.Contains(buckets, "audit") {
					t.Errorf("a commit wrote %v without its audit entry", buckets)
				}
			}
		}
		if writes != i {
			t.Errorf("import %d: %d commits wrote policies, want %d", i+1, writes, i)
		}
	}
	infos := map[string]any{}
	for _, r := range rows(t, s, map[string]string{"action": "POST /policy/import"}) {
		infos[r["info"].(string)] = r["success"]
	}
	if infos[fmt.Sprintf("imported %d policies", n)] != 1 || len(infos) != 2 {
		t.Errorf("audit entries (info: success) %v", infos)
	}
}
