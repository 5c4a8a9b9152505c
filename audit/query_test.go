package audit_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store/storetest"
)

// expect lists the fixture numbers for which keep holds, in the query's
// order, and the page's slice of them.
func expect(keep func(i int, e audit.Entry) bool, asc bool, page, size int) (count int, nums []int) {
	var all []int
	for i := 1; i <= fixtureEntries; i++ {
		if keep(i, testEntry(i)) {
			all = append(all, i)
		}
	}
	if !asc {
		slices.Reverse(all)
	}
	from := min((page-1)*size, len(all))
	return len(all), all[from:min(from+size, len(all))]
}

func numbers(rows []audit.Row) []int {
	out := make([]int, 0, len(rows))
	for _, r := range rows {
		out = append(out, r["number"].(int))
	}
	return out
}

func TestSearch(t *testing.T) {
	l := newLog(t, fixtureCopy(t), audit.Config{})
	all := func(int, audit.Entry) bool { return true }
	serial := regexp.MustCompile(`^HOTP.*5.*0$`)
	cases := []struct {
		name string
		q    audit.Query
		keep func(i int, e audit.Entry) bool
		// page and size are what the query should come down to.
		page, size int
	}{
		{name: "defaults", q: audit.Query{}, keep: all, page: 1, size: 15},
		{name: "wildcard on both sides", q: audit.Query{Filters: map[string]string{"action": "*validate*"}},
			keep: func(i int, _ audit.Entry) bool { return i%3 == 0 }, page: 1, size: 15},
		{name: "case-insensitive", q: audit.Query{Filters: map[string]string{"action": "*VALIDATE*"}},
			keep: func(i int, _ audit.Entry) bool { return i%3 == 0 }, page: 1, size: 15},
		{name: "wildcard matches anywhere", q: audit.Query{Filters: map[string]string{"action": "*auth*"}},
			keep: func(_ int, e audit.Entry) bool { return e.Action == "POST /auth" }, page: 1, size: 15},
		{name: "exact value", q: audit.Query{Filters: map[string]string{"user": "USER1"}},
			keep: func(i int, _ audit.Entry) bool { return i%10 == 1 }, page: 1, size: 15},
		{name: "exact value is not a prefix", q: audit.Query{Filters: map[string]string{"user": "user"}},
			keep: func(int, audit.Entry) bool { return false }, page: 1, size: 15},
		{name: "prefix", q: audit.Query{Filters: map[string]string{"serial": "hotp00*"}},
			keep: func(i int, _ audit.Entry) bool { return i < 100 }, page: 1, size: 15},
		{name: "wildcards in the middle", q: audit.Query{Filters: map[string]string{"serial": "HOTP*5*0"}},
			keep: func(_ int, e audit.Entry) bool { return serial.MatchString(e.Serial) }, page: 1, size: 15},
		{name: "several filters", q: audit.Query{Filters: map[string]string{"action": "*validate*", "success": "1", "realm": "REALM1"}},
			keep: func(i int, _ audit.Entry) bool { return i%6 == 0 }, page: 1, size: 15},
		{name: "only stars does not filter", q: audit.Query{Filters: map[string]string{"user": "**", "info": ""}},
			keep: all, page: 1, size: 15},
		{name: "number", q: audit.Query{Filters: map[string]string{"number": "42"}},
			keep: func(i int, _ audit.Entry) bool { return i == 42 }, page: 1, size: 15},
		{name: "date", q: audit.Query{Filters: map[string]string{"date": "2026-03-01T13:*"}},
			keep: func(i int, _ audit.Entry) bool { return i >= 60 && i < 120 }, page: 1, size: 15},
		{name: "sig_check", q: audit.Query{Filters: map[string]string{"sig_check": "ok"}},
			keep: all, page: 1, size: 15},
		{name: "missing_line", q: audit.Query{Filters: map[string]string{"missing_line": "FAIL"}},
			keep: func(int, audit.Entry) bool { return false }, page: 1, size: 15},
		{name: "since", q: audit.Query{Since: t0.Add(901 * time.Minute)},
			keep: func(i int, _ audit.Entry) bool { return i >= 901 }, page: 1, size: 15},
		{name: "since and a filter", q: audit.Query{Since: t0.Add(901 * time.Minute), Filters: map[string]string{"action": "*auth"}},
			keep: func(i int, _ audit.Entry) bool { return i >= 901 && i%3 == 2 }, page: 1, size: 15},
		{name: "page 3", q: audit.Query{Page: 3, PageSize: 100}, keep: all, page: 3, size: 100},
		{name: "last page", q: audit.Query{Page: 10, PageSize: 100}, keep: all, page: 10, size: 100},
		{name: "past the end", q: audit.Query{Page: 11, PageSize: 100}, keep: all, page: 11, size: 100},
		{name: "page below 1", q: audit.Query{Page: -1, PageSize: 10}, keep: all, page: 1, size: 10},
		{name: "page size 0", q: audit.Query{PageSize: 0}, keep: all, page: 1, size: 15},
		{name: "page size capped", q: audit.Query{PageSize: 5000}, keep: all, page: 1, size: 1000},
		{name: "page size capped, page 2", q: audit.Query{Page: 2, PageSize: 1 << 40}, keep: all, page: 2, size: 1000},
		{name: "huge page", q: audit.Query{Page: math.MaxInt, PageSize: 1000}, keep: all, page: math.MaxInt, size: 1000},
		{name: "ascending", q: audit.Query{Ascending: true, Page: 2, PageSize: 10}, keep: all, page: 2, size: 10},
		{name: "ascending filtered", q: audit.Query{Ascending: true, Page: 2, PageSize: 5, Filters: map[string]string{"action": "*validate*"}},
			keep: func(i int, _ audit.Entry) bool { return i%3 == 0 }, page: 2, size: 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := l.Search(t.Context(), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			count, nums := 0, []int(nil)
			if tc.page < math.MaxInt {
				count, nums = expect(tc.keep, tc.q.Ascending, tc.page, tc.size)
			} else {
				count, _ = expect(tc.keep, tc.q.Ascending, 1, 1)
			}
			if got := numbers(res.Rows); !slices.Equal(got, nums) {
				t.Errorf("numbers = %v, want %v", got, nums)
			}
			next, prev := 0, tc.page-1
			if tc.page < math.MaxInt/tc.size && count > tc.page*tc.size {
				next = tc.page + 1
			}
			if res.Count != count || res.Current != tc.page || res.Next != next || res.Prev != prev {
				t.Errorf("count, current, next, prev = %d, %d, %d, %d; want %d, %d, %d, %d",
					res.Count, res.Current, res.Next, res.Prev, count, tc.page, next, prev)
			}
		})
	}
}

func TestSearchRow(t *testing.T) {
	l := newLog(t, fixtureCopy(t), audit.Config{})
	want := audit.Row{
		"number": 7, "date": "2026-03-01T12:07:00.000000", "startdate": "2026-03-01T12:06:58.765433",
		"duration": "0:00:01.234567", "action": "GET /token/", "success": 0, "authentication": "REJECT",
		"serial": "HOTP0007", "token_type": "hotp", "user": "user7", "realm": "Realm2", "resolver": "r1",
		"administrator": "", "action_detail": "", "info": "", "privacyidea_server": "node1",
		"client": "10.0.0.1", "user_agent": "privacyidea-cp", "user_agent_version": "", "policies": "",
		"thread_id": "140", "sig_check": "OK", "missing_line": "OK",
	}
	t.Run("columns", func(t *testing.T) {
		got := rowOf(t, l, 7)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("row 7 =\n%v\nwant\n%v", got, want)
		}
		cols := audit.Columns()
		slices.Sort(cols)
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(cols, keys) {
			t.Errorf("row keys %v, columns %v", keys, cols)
		}
	})
	t.Run("hide", func(t *testing.T) {
		res, err := l.Search(t.Context(), audit.Query{
			Filters: map[string]string{"number": "7"},
			Hide:    []string{"user", "sig_check", "no_such_column"},
		})
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("Search = %v, %v", res, err)
		}
		row := res.Rows[0]
		if _, ok := row["user"]; ok {
			t.Error("hidden column user is shown")
		}
		if _, ok := row["sig_check"]; ok {
			t.Error("hidden column sig_check is shown")
		}
		if len(row) != len(want)-2 || row["serial"] != "HOTP0007" {
			t.Errorf("row = %v", row)
		}
	})
	t.Run("unknown column", func(t *testing.T) {
		_, err := l.Search(t.Context(), audit.Query{Filters: map[string]string{"user": "x", "password": "*"}})
		if !apierr.Is(err, apierr.Parameter) || err.Error() != "Unknown audit column: password" {
			t.Errorf("err = %v, want Parameter Unknown audit column: password", err)
		}
		if err := l.Each(t.Context(), audit.Query{Filters: map[string]string{"bogus": "1"}}, func(audit.Row) error { return nil }); !apierr.Is(err, apierr.Parameter) {
			t.Errorf("Each: err = %v, want a Parameter error", err)
		}
	})
}

func TestFormatDuration(t *testing.T) {
	cases := []struct {
		name string
		sec  float64
		want string
	}{
		{"zero", 0, "0:00:00"},
		{"microseconds", 1.234567, "0:00:01.234567"},
		{"one microsecond", 0.000001, "0:00:00.000001"},
		{"rounded to microseconds", 0.0000004, "0:00:00"},
		{"hours", 3661.5, "1:01:01.500000"},
		{"one day", 86400, "1 day, 0:00:00"},
		{"days", 2*86400 + 1, "2 days, 0:00:01"},
		{"negative as Python", -1, "-1 day, 23:59:59"},
		{"not a number", math.NaN(), ""},
		{"infinite", math.Inf(1), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := audit.FormatDuration(tc.sec); got != tc.want {
				t.Errorf("FormatDuration(%v) = %q, want %q", tc.sec, got, tc.want)
			}
		})
	}
}

func TestEach(t *testing.T) {
	st := fixtureCopy(t)
	l := newLog(t, st, audit.Config{})
	cases := []struct {
		name string
		q    audit.Query
		keep func(i int, e audit.Entry) bool
	}{
		{"everything newest first", audit.Query{}, func(int, audit.Entry) bool { return true }},
		{"everything oldest first", audit.Query{Ascending: true}, func(int, audit.Entry) bool { return true }},
		{"filtered", audit.Query{Filters: map[string]string{"action": "*validate*"}}, func(i int, _ audit.Entry) bool { return i%3 == 0 }},
		{"since, paging ignored", audit.Query{Since: t0.Add(400 * time.Minute), Page: 3, PageSize: 2, Ascending: true},
			func(i int, _ audit.Entry) bool { return i >= 400 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			err := l.Each(t.Context(), tc.q, func(r audit.Row) error {
				got = append(got, r["number"].(int))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			_, want := expect(tc.keep, tc.q.Ascending, 1, fixtureEntries)
			if !slices.Equal(got, want) {
				t.Errorf("Each gave %d rows %v..., want %d", len(got), got[:min(5, len(got))], len(want))
			}
		})
	}
	t.Run("callback error", func(t *testing.T) {
		stop := errors.New("client went away")
		n := 0
		err := l.Each(t.Context(), audit.Query{}, func(audit.Row) error {
			if n++; n == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 3 {
			t.Errorf("Each = %v after %d rows, want the callback's error after 3", err, n)
		}
	})
	t.Run("writes while streaming", func(t *testing.T) {
		// The callback runs outside the transaction, so it can write: an
		// entry appended while streaming oldest first shows up once at
		// the end; newest first it lies before the start and is skipped.
		for _, asc := range []bool{true, false} {
			st := fixtureCopy(t)
			l := newLog(t, st, audit.Config{})
			var got []int
			err := l.Each(t.Context(), audit.Query{Ascending: asc}, func(r audit.Row) error {
				got = append(got, r["number"].(int))
				if len(got) == 1 {
					_, err := l.Write(t.Context(), testEntry(fixtureEntries+1))
					return err
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := fixtureEntries
			if asc {
				want++
			}
			if len(got) != want || !slices.IsSortedFunc(got, func(a, b int) int {
				if asc {
					return a - b
				}
				return b - a
			}) {
				t.Errorf("ascending %v: %d rows, want %d in order", asc, len(got), want)
			}
		}
	})
}

func TestParseTimelimit(t *testing.T) {
	day := 24 * time.Hour
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1d", day, true},
		{"2h", 2 * time.Hour, true},
		{"30m", 30 * time.Minute, true},
		{"10s", 10 * time.Second, true},
		{"1w", 7 * day, true},
		{"1d2h", 26 * time.Hour, true},
		{"1w1d1h1m1s", 8*day + time.Hour + time.Minute + time.Second, true},
		{"2h1d", 26 * time.Hour, true},
		{" 5m ", 5 * time.Minute, true},
		{"0s", 0, true},
		{"007m", 7 * time.Minute, true},
		{"106751d", 106751 * day, true},
		{"", 0, false},
		{"  ", 0, false},
		{"10", 0, false},
		{"d", 0, false},
		{"1x", 0, false},
		{"1D", 0, false},
		{"-1d", 0, false},
		{"+1d", 0, false},
		{"1.5h", 0, false},
		{"1d 2h", 0, false},
		{"1d2", 0, false},
		{"106752d", 0, false},
		{"99999999999999999999s", 0, false},
		{"106751d106751d", 0, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%q", tc.in), func(t *testing.T) {
			got, err := audit.ParseTimelimit(tc.in)
			if tc.ok {
				if err != nil || got != tc.want {
					t.Errorf("ParseTimelimit(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Errorf("ParseTimelimit(%q) = %v, want an error", tc.in, got)
			} else if !apierr.Is(err, apierr.Parameter) {
				t.Errorf("ParseTimelimit(%q) error %v is not a Parameter error", tc.in, err)
			}
		})
	}
}

func FuzzParseTimelimit(f *testing.F) {
	for _, s := range []string{"1d", "2h", "30m", "10s", "1w", "1d2h", "", "1x", "99999999999999999999s", "106751d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := audit.ParseTimelimit(s)
		if err != nil {
			if !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("ParseTimelimit(%q) error %v is not a Parameter error", s, err)
			}
			if len(err.Error()) > 200 {
				t.Fatalf("ParseTimelimit(%q) error is %d bytes long", s, len(err.Error()))
			}
			return
		}
		if d < 0 || d%time.Second != 0 {
			t.Fatalf("ParseTimelimit(%q) = %v", s, d)
		}
		// The same span in seconds parses to the same duration.
		again, err := audit.ParseTimelimit(fmt.Sprintf("%ds", d/time.Second))
		if err != nil || again != d {
			t.Fatalf("ParseTimelimit(%q) = %v, but %ds = %v, %v", s, d, d/time.Second, again, err)
		}
	})
}

func TestWriteCSV(t *testing.T) {
	t.Run("rows", func(t *testing.T) {
		rows := []audit.Row{
			{
				"number": 1, "date": "2026-03-01T12:01:00.000000", "duration": "0:00:01.234567",
				"action": "-2+3", "success": 1, "user": "=cmd|' /C calc'!A0", "realm": "+r",
				"serial": "@SUM(1)", "info": "a,b \"quoted\"", "client": "\tx", "policies": "p1\np2",
				"user_agent": "\rua", "administrator": "admin@realm", "sig_check": "OK", "missing_line": "OK",
			},
			{"number": 2, "success": 0, "user": "bob"}, // hidden or missing columns are empty
		}
		var buf bytes.Buffer
		err := audit.WriteCSV(&buf, func(yield func(audit.Row) error) error {
			for _, r := range rows {
				if err := yield(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := "number,date,startdate,duration,action,success,authentication,serial,token_type,user,realm,resolver," +
			"administrator,action_detail,info,privacyidea_server,client,user_agent,user_agent_version,policies,thread_id,sig_check,missing_line\n" +
			`1,2026-03-01T12:01:00.000000,,0:00:01.234567,'-2+3,1,,'@SUM(1),,'=cmd|' /C calc'!A0,'+r,,admin@realm,,"a,b ""quoted""",,'` +
			"\tx,\"'\rua\",,\"p1\np2\",,OK,OK\n" +
			"2,,,,,0,,,,bob,,,,,,,,,,,,,\n"
		if got := buf.String(); got != want {
			t.Errorf("CSV =\n%q\nwant\n%q", got, want)
		}
	})
	t.Run("from Each", func(t *testing.T) {
		l := newLog(t, fixtureCopy(t), audit.Config{})
		var buf bytes.Buffer
		q := audit.Query{Filters: map[string]string{"number": "5"}, Hide: []string{"user"}}
		err := audit.WriteCSV(&buf, func(yield func(audit.Row) error) error { return l.Each(t.Context(), q, yield) })
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		want := "5,2026-03-01T12:05:00.000000,2026-03-01T12:04:58.765433,0:00:01.234567,POST /auth,0,REJECT,HOTP0005,hotp,,Realm2,r1,,,,node1,10.0.0.1,privacyidea-cp,,,140,OK,OK"
		if len(lines) != 2 || lines[1] != want {
			t.Errorf("CSV lines = %q, want header and %q", lines, want)
		}
	})
	t.Run("rows error", func(t *testing.T) {
		stop := errors.New("stop")
		if err := audit.WriteCSV(&bytes.Buffer{}, func(func(audit.Row) error) error { return stop }); !errors.Is(err, stop) {
			t.Errorf("WriteCSV = %v, want the rows error", err)
		}
	})
}

// TestSearchEncoding checks that filters see values as decoded, whatever
// their JSON spelling: the raw-byte pre-check must never hide an entry,
// or re-encoding a record (which keeps its signature valid) could hide
// it from searches.
func TestSearchEncoding(t *testing.T) {
	st := storetest.Open(t)
	l := newLog(t, st, audit.Config{})
	for _, user := range []string{"<Admin>&Co", "\u212Aelvin", "user3", "alice", "Ärger"} {
		if _, err := l.Write(t.Context(), audit.Entry{Date: t0, Action: "POST /auth", User: user}); err != nil {
			t.Fatal(err)
		}
	}
	// Entries written before the compact encoding are JSON, in any
	// spelling that decodes to the same columns.
	respell := func(n uint64, from, to string) {
		raw := string(audit.RecordJSON(getRaw(t, st, audit.EntryBucket, key(n))))
		if !strings.Contains(raw, from) {
			t.Fatalf("entry %d has no %s: %s", n, from, raw)
		}
		putRaw(t, st, audit.EntryBucket, key(n), []byte(strings.Replace(raw, from, to, 1)))
	}
	respell(3, `"user":"user3"`, `"user":"\u0075ser3"`)
	respell(4, `"user":"alice"`, `"user":"zzz","user":"alice"`)
	if rep, err := l.Verify(t.Context()); err != nil || !rep.OK() {
		t.Fatalf("re-spelled entries must still verify: %v, %v", rep.Problems, err)
	}
	cases := []struct {
		filter string
		want   []int
	}{
		{"*<admin>*", []int{1}},
		{"<ADMIN>&co", []int{1}},
		{"kelvin", []int{2}},
		{"*ELVIN", []int{2}},
		{"user3", []int{3}},
		{"*ser*", []int{3}},
		{"alice", []int{4}},
		{"zzz", nil},
		{"ärger", []int{5}},
		{"ÄR*", []int{5}},
	}
	for _, tc := range cases {
		t.Run(tc.filter, func(t *testing.T) {
			res, err := l.Search(t.Context(), audit.Query{Ascending: true, Filters: map[string]string{"user": tc.filter}})
			if err != nil {
				t.Fatal(err)
			}
			if got := numbers(res.Rows); !slices.Equal(got, tc.want) || res.Count != len(tc.want) {
				t.Errorf("user=%s: %v (count %d), want %v", tc.filter, got, res.Count, tc.want)
			}
			for _, r := range res.Rows {
				if r["sig_check"] != "OK" {
					t.Errorf("entry %v: sig_check %v", r["number"], r["sig_check"])
				}
			}
		})
	}
}

// FuzzFilterMatch compares the wildcard matcher with a regular expression
// over the lower-cased texts.
func FuzzFilterMatch(f *testing.F) {
	for _, s := range [][2]string{{"*auth*", "POST /auth"}, {"a*b*c", "abc"}, {"a*a", "a"}, {"**", ""}, {"x*", "X"}, {"*.*", "a.b"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, value string) {
		if !utf8.ValidString(pattern) || !utf8.ValidString(value) {
			t.Skip()
		}
		parts := strings.Split(strings.ToLower(pattern), "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile(`(?s)^` + strings.Join(parts, ".*") + `$`)
		if got, want := audit.MatchFilter(pattern, value), re.MatchString(strings.ToLower(value)); got != want {
			t.Errorf("MatchFilter(%q, %q) = %v, want %v", pattern, value, got, want)
		}
	})
}

// An unfiltered search reads only its page and takes the count from the
// first and the last number; it must agree with the walk that a filter
// matching every entry takes, also after retention removed the oldest.
func TestSearchUnfilteredAgreesWithWalk(t *testing.T) {
	st := fixtureCopy(t)
	for _, keep := range []uint64{0, 333} {
		if keep > 0 {
			n, err := newLog(t, st, audit.Config{MaxEntries: keep}).Retain(t.Context())
			if err != nil || n != fixtureEntries-int(keep) {
				t.Fatalf("Retain = %d, %v", n, err)
			}
		}
		l := newLog(t, st, audit.Config{})
		for _, asc := range []bool{false, true} {
			for _, size := range []int{1, 10, 15, 100} {
				for page := 1; page <= int(fixtureEntries)/size+2; page += max(1, int(fixtureEntries)/size/7) {
					q := audit.Query{Page: page, PageSize: size, Ascending: asc}
					fast, err := l.Search(t.Context(), q)
					if err != nil {
						t.Fatal(err)
					}
					// A Since before every entry matches them all but walks the log.
					q.Since = t0.Add(-time.Hour)
					walk, err := l.Search(t.Context(), q)
					if err != nil {
						t.Fatal(err)
					}
					wantCount := fixtureEntries
					if keep > 0 {
						wantCount = int(keep)
					}
					if fast.Count != wantCount || fast.Count != walk.Count || fast.Next != walk.Next || fast.Prev != walk.Prev ||
						!slices.Equal(numbers(fast.Rows), numbers(walk.Rows)) {
						t.Fatalf("keep %d, asc %v, page %d of %d: unfiltered count %d next %d prev %d rows %v; walk count %d next %d prev %d rows %v",
							keep, asc, page, size, fast.Count, fast.Next, fast.Prev, numbers(fast.Rows), walk.Count, walk.Next, walk.Prev, numbers(walk.Rows))
					}
				}
			}
		}
	}
}
