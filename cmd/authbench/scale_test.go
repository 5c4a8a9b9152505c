package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScaleEndToEnd runs the scale benchmark at two small sizes against
// the real binary and checks that the files hold every figure of every
// size (not their values: this is a busy CI machine).
func TestScaleEndToEnd(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "scale.md")
	var stdout, stderr bytes.Buffer
	args := []string{"scale", "-sizes", "1k,5k", "-server", authsrvBinary(t), "-out", out, "-dir", filepath.Join(dir, "work"),
		"-validate-duration", "1s", "-reps", "2", "-lookups", "50", "-working-set", "500", "-import", "1500", "-import-file", "1000",
		"-sample", "50ms"}
	code := run(t.Context(), args, &stdout, &stderr, func(string) string { return "" })
	printed := stdout.String() + stderr.String()
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, printed)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "scale.json"))
	if err != nil {
		t.Fatalf("no JSON file: %v\n%s", err, printed)
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"eyJ", "with the password"} {
		if strings.Contains(printed+string(raw)+string(md), secret) {
			t.Errorf("the output shows a secret (%q)", secret)
		}
	}
	var rep scaleReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Sizes) != 2 || rep.Sizes[0].N != 1000 || rep.Sizes[1].N != 5000 {
		t.Fatalf("sizes %+v", rep.Sizes)
	}
	for _, s := range rep.Sizes {
		if len(s.Errors) > 0 {
			t.Errorf("N=%d: errors %v", s.N, s.Errors)
		}
		if s.WallSeconds <= 0 || s.Load == nil || s.Load.TotalSeconds <= 0 || s.Load.DataBytes <= 0 || s.Load.PasswdBytes <= 0 {
			t.Errorf("N=%d: load figures %+v, wall %v", s.N, s.Load, s.WallSeconds)
		}
		if s.StartToReadySeconds <= 0 || s.DataBytesEnd <= 0 {
			t.Errorf("N=%d: ready %v, data at end %d", s.N, s.StartToReadySeconds, s.DataBytesEnd)
		}
		if s.Lookups == nil || s.Lookups.Count != 50 || s.Lookups.FirstMS <= 0 || s.Lookups.LastMS <= 0 {
			t.Errorf("N=%d: lookups %+v", s.N, s.Lookups)
		}
		if len(s.Queries) != 7 {
			t.Errorf("N=%d: %d token queries, want 7", s.N, len(s.Queries))
		}
		for _, q := range append(s.Queries, s.UserSearch) {
			if q == nil || !q.OK || q.Calls != 2 || q.MedianMS <= 0 || q.MaxMS < q.MedianMS {
				t.Errorf("N=%d: query %+v", s.N, q)
			}
		}
		if len(s.Validate) != 2 {
			t.Fatalf("N=%d: validate figures %+v", s.N, s.Validate)
		}
		for i, v := range s.Validate {
			if v.Clients != []int{8, 32}[i] || v.OK == 0 || v.Errors != 0 || v.RequestsPerSec <= 0 || v.P99MS < v.P50MS || v.P50MS <= 0 {
				t.Errorf("N=%d: validate %+v", s.N, v)
			}
		}
		if len(s.SettleSeconds) != 4 {
			t.Errorf("N=%d: settle figures %v, want one before the user search, each validate load and the import", s.N, s.SettleSeconds)
		}
		if s.Import == nil || !s.Import.OK || s.Import.Imported != 1500 || s.Import.Files != 2 || s.Import.Seconds <= 0 {
			t.Errorf("N=%d: import %+v", s.N, s.Import)
		}
		if s.Memory == nil || s.Memory.Max.AnonKB <= 0 || s.Memory.Max.FileKB <= 0 {
			t.Fatalf("N=%d: memory %+v", s.N, s.Memory)
		}
		for _, ph := range []string{"idle", "lookups", "lists", "users", "validate", "import"} {
			if f, ok := s.Memory.Phases[ph]; !ok || f.Samples == 0 || f.AnonKB <= 0 {
				t.Errorf("N=%d: no memory samples in phase %s: %+v", s.N, ph, s.Memory.Phases)
			}
		}
	}
	for _, want := range []string{"| figure | N=1k | N=5k |", "start to ready", "first user lookup", "GET /token/ page 1",
		"GET /token/ serial=*0012*", "GET /token/ serial= exact", "GET /token/ realm=", "GET /token/ tokenrealm=", "GET /token/ user=",
		"GET /token/ last page", "GET /user/ username=u000012*", "validate 8 clients", "validate 32 clients", "import via /token/load",
		"RSS anon / file, max under validate load", "data file after load / at end", "| errors | none | none |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the markdown lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "work", "n1000")); !os.IsNotExist(err) {
		t.Errorf("the data directory of N=1000 was not removed: %v", err)
	}
}

// TestScaleChecksAnswers: a list answer with a wrong count, a short page
// or another first serial fails the query instead of counting as fast.
func TestScaleChecksAnswers(t *testing.T) {
	env := func(v string) *envelope {
		e, err := decodeEnvelope(200, []byte(`{"result":{"status":true,"value":`+v+`}}`))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	page := func(serials ...string) string {
		var b strings.Builder
		for i, s := range serials {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"serial":"` + s + `"}`)
		}
		return b.String()
	}
	q := tokenQuery("x", "/token/", 20, 2, 15, "SC0000016")
	good := `{"count":20,"current":2,"tokens":[` + page("SC0000016", "SC0000017", "SC0000018", "SC0000019", "SC0000020") + `]}`
	if err := q.check(env(good)); err != nil {
		t.Errorf("a right answer was refused: %v", err)
	}
	for name, v := range map[string]string{
		"wrong count":  `{"count":19,"current":2,"tokens":[` + page("SC0000016", "SC0000017", "SC0000018", "SC0000019", "SC0000020") + `]}`,
		"no count":     `{"current":2,"tokens":[]}`,
		"short page":   `{"count":20,"current":2,"tokens":[` + page("SC0000016") + `]}`,
		"wrong page":   `{"count":20,"current":1,"tokens":[` + page("SC0000016", "SC0000017", "SC0000018", "SC0000019", "SC0000020") + `]}`,
		"wrong first":  `{"count":20,"current":2,"tokens":[` + page("SC0000001", "SC0000017", "SC0000018", "SC0000019", "SC0000020") + `]}`,
		"not a list":   `[]`,
		"empty answer": `{}`,
	} {
		if err := q.check(env(v)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	uq := userQuery(1000)
	var users []string
	for i := 120; i <= 129; i++ {
		users = append(users, `{"username":"`+scaleLogin(i)+`"}`)
	}
	if err := uq.check(env("[" + strings.Join(users, ",") + "]")); err != nil {
		t.Errorf("the right users were refused: %v", err)
	}
	if err := uq.check(env("[" + strings.Join(users[:9], ",") + "]")); err == nil {
		t.Error("a user list without one of the users was accepted")
	}
	if err := uq.check(env("[" + strings.Join(append(users, `{"username":"u0000999"}`), ",") + "]")); err == nil {
		t.Error("a user list with a user that does not match was accepted")
	}
}

// TestScaleQueriesExpect: the expected counts come from the serials and
// logins the loader writes.
func TestScaleQueriesExpect(t *testing.T) {
	qs := tokenQueries(1000)
	if len(qs) != 7 || !strings.Contains(qs[6].path, "page=67&") {
		t.Fatalf("queries %+v", qs)
	}
	// SC0000012 and SC0000120..SC0000129 contain 0012 below 1000.
	var tokens []string
	for _, i := range []int{12, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129} {
		tokens = append(tokens, `{"serial":"`+scaleSerial(i)+`"}`)
	}
	e, err := decodeEnvelope(200, []byte(`{"result":{"status":true,"value":{"count":11,"current":1,"tokens":[`+strings.Join(tokens, ",")+`]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(qs[1].path, "serial=*0012*") || qs[1].check(e) != nil {
		t.Errorf("the wildcard query %s does not expect the 11 serials with 0012: %v", qs[1].path, qs[1].check(e))
	}
	if scaleLogin(7) != "u0000007" || scaleSerial(1000000) != "SC1000000" || importSerial(3) != "IM0000003" {
		t.Error("names changed")
	}
	if !bytes.Equal(scaleKey("SC0000001"), scaleKey("SC0000001")) || bytes.Equal(scaleKey("SC0000001"), scaleKey("SC0000002")) || len(scaleKey("x")) != keySize {
		t.Error("keys are not derived from the serial")
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1k, 100k,1M,7")
	if err != nil || len(got) != 4 || got[0] != 1000 || got[1] != 100000 || got[2] != 1000000 || got[3] != 7 {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-1k", "10M", "1x", "k"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestScaleTargets: the "Done when" table says yes for figures within
// issue 17's bounds and no for each one outside.
func TestScaleTargets(t *testing.T) {
	mk := func(listMed, listMax, userMS, p99, idleMiB, busyMiB, importRate, first float64) *sizeResult {
		return &sizeResult{
			N:          1000000,
			Load:       &loadStats{PasswdBytes: 10 << 20},
			Queries:    []*queryFig{{Name: "a", OK: true, Calls: 3, MedianMS: listMed, MaxMS: listMax}, {Name: "b", OK: true, Calls: 3, MedianMS: 1, MaxMS: 2}},
			UserSearch: &queryFig{OK: true, Calls: 3, MedianMS: userMS, MaxMS: userMS},
			Validate:   []*validateFig{{Clients: 32, OK: 10, P50MS: 1, P99MS: p99}},
			Import:     &importFig{OK: true, Tokens: 100000, Imported: 100000, TokensPerSec: importRate},
			Lookups:    &lookupFig{Count: 1000, FirstMS: first, LastMS: 1, MedianMS: 1},
			Memory: &memoryFig{Phases: map[string]memFig{
				"idle":     {RSSKB: int64(idleMiB * 1024)},
				"validate": {RSSKB: int64(busyMiB * 1024)},
			}},
		}
	}
	base := mk(1, 2, 1, 20, 50, 100, 5000, 1)
	good := mk(10, 50, 20, 30, 110, 310, 1700, 7)
	for _, tg := range targets(good, base) {
		if !tg.OK {
			t.Errorf("within the bounds, yet %q says no: %s", tg.Name, tg.Detail)
		}
	}
	if n := len(targets(good, base)); n != 7 {
		t.Errorf("%d targets, want 7", n)
	}
	bad := mk(11, 51, 21, 31, 111, 311, 1600, 8)
	for _, tg := range targets(bad, base) {
		if tg.OK {
			t.Errorf("outside the bounds, yet %q says yes: %s", tg.Name, tg.Detail)
		}
	}
	rep := &scaleReport{Sizes: []*sizeResult{base, bad}}
	if md := rep.markdown(); !strings.Contains(md, "## Targets of issue 17") || !strings.Contains(md, "**no**") {
		t.Errorf("the markdown has no targets table:\n%s", md)
	}
}

func TestParseStatTicksOddName(t *testing.T) {
	// A command name with a space and a parenthesis, as a process may
	// name itself.
	stat := "4242 (auth srv) x) S 1 4242 4242 0 -1 4194560 2013 0 0 0 137 42 0 0 20 0 9 0 123 456 789"
	got, err := parseStatTicks(stat)
	if err != nil || got != 137+42 {
		t.Errorf("got %d, %v; want 179", got, err)
	}
	if _, err := parseStatTicks("1 (x) S 1 2"); err == nil {
		t.Error("a short line was accepted")
	}
	if n, err := cpuTicks(os.Getpid()); err != nil || n < 0 {
		t.Errorf("own process: %d, %v", n, err)
	}
}

// TestScaleKeepsForeignDirectory: a data directory that exists already is
// refused, and left as it was.
func TestScaleKeepsForeignDirectory(t *testing.T) {
	work := t.TempDir()
	mine := filepath.Join(work, "n10", "data", "keep.txt")
	if err := os.MkdirAll(filepath.Dir(mine), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mine, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"scale", "-sizes", "10", "-server", authsrvBinary(t), "-dir", work, "-out", filepath.Join(work, "f.md")},
		&stdout, &stderr, func(string) string { return "" })
	if code != exitFailed || !strings.Contains(stderr.String(), "exists already") {
		t.Errorf("exit %d\n%s", code, stderr.String())
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("the existing directory was touched: %v", err)
	}
}
