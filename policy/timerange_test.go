package policy_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
)

// trAt returns the given ISO week day (Mon=1 ... Sun=7) of the week of
// Monday 2024-01-01 at h:m:s in loc.
func trAt(day, h, m, s int, loc *time.Location) time.Time {
	return time.Date(2024, 1, day, h, m, s, 0, loc)
}

func TestParseTimeRangesValid(t *testing.T) {
	tests := []struct {
		name string
		in   string
		zero bool
	}{
		{"empty", "", true},
		{"blank", " \t\n ", true},
		{"weekdays", "Mon-Fri: 08:00-18:00", false},
		{"two ranges", "Sat: 9-12, Sun: 10:30-11:00", false},
		{"mixed case no spaces", "mon-FRI:8-18", false},
		{"backwards days", "Fri-Mon: 8-9", false},
		{"single minute", "Mon: 8-8", false},
		{"spaces everywhere", " Mon - Tue : 0 : 00 - 23 : 59 ", false},
		{"whole week", "Mon-Sun: 0-23:59", false},
		{"one digit minute", "Tue: 9:5-10", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := policy.ParseTimeRanges(tt.in)
			if err != nil {
				t.Fatalf("ParseTimeRanges(%q): %v", tt.in, err)
			}
			if tr.IsZero() != tt.zero {
				t.Errorf("IsZero = %v, want %v", tr.IsZero(), tt.zero)
			}
		})
	}
}

func TestParseTimeRangesInvalid(t *testing.T) {
	tests := []struct{ name, in string }{
		{"start after end", "Mon: 18-8"},
		{"hour 25", "Mon: 25:00-26:00"},
		{"hour 24", "Mon: 8-24"},
		{"minute 60", "Mon: 8:60-9"},
		{"unknown day", "Xyz: 1-2"},
		{"long day name", "Monday: 8-9"},
		{"no colon", "Mon 8-9"},
		{"no end time", "Mon: 8"},
		{"three times", "Mon: 8-9-10"},
		{"three days", "Mon-Tue-Wed: 8-9"},
		{"empty start", "Mon: -9"},
		{"seconds", "Mon: 8:00:00-9"},
		{"three digit hour", "Mon: 008-9"},
		{"signed hour", "Mon: +8-9"},
		{"unicode digit", "Mon: ٨-9"},
		{"no day", ":8-9"},
		{"trailing comma", "Mon: 8-9,"},
		{"leading comma", ",Mon: 8-9"},
		{"one bad of two", "Mon: 8-9, Tue: 9-8"},
		{"end day unknown", "Mon-Xyz: 8-9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := policy.ParseTimeRanges(tt.in)
			e, ok := errors.AsType[*apierr.Error](err)
			if !ok {
				t.Fatalf("ParseTimeRanges(%q) = %v, want *apierr.Error", tt.in, err)
			}
			want := fmt.Sprintf("Invalid time format '%s'!", tt.in)
			if e.Code != apierr.Parameter || e.Error() != want || e.Number() != 905 {
				t.Errorf("error = %d %v %q, want Parameter %q", e.Number(), e.Code, e.Error(), want)
			}
		})
	}
}

func TestTimeRangesContains(t *testing.T) {
	utc := time.UTC
	tests := []struct {
		name string
		in   string
		at   time.Time
		want bool
	}{
		{"empty always", "", trAt(7, 3, 0, 0, utc), true},
		{"mon start edge", "Mon-Fri: 08:00-18:00", trAt(1, 8, 0, 0, utc), true},
		{"mon before start", "Mon-Fri: 08:00-18:00", trAt(1, 7, 59, 59, utc), false},
		{"wed noon", "Mon-Fri: 08:00-18:00", trAt(3, 12, 0, 0, utc), true},
		{"fri end edge", "Mon-Fri: 08:00-18:00", trAt(5, 18, 0, 0, utc), true},
		{"fri end edge seconds", "Mon-Fri: 08:00-18:00", trAt(5, 18, 0, 59, utc), true},
		{"fri after end", "Mon-Fri: 08:00-18:00", trAt(5, 18, 1, 0, utc), false},
		{"sat", "Mon-Fri: 08:00-18:00", trAt(6, 12, 0, 0, utc), false},
		{"sun", "Mon-Fri: 08:00-18:00", trAt(7, 12, 0, 0, utc), false},
		{"sat 9", "Sat: 9-12, Sun: 10:30-11:00", trAt(6, 9, 0, 0, utc), true},
		{"sat 12", "Sat: 9-12, Sun: 10:30-11:00", trAt(6, 12, 0, 0, utc), true},
		{"sat 12:01", "Sat: 9-12, Sun: 10:30-11:00", trAt(6, 12, 1, 0, utc), false},
		{"sun 10:29", "Sat: 9-12, Sun: 10:30-11:00", trAt(7, 10, 29, 59, utc), false},
		{"sun 10:30", "Sat: 9-12, Sun: 10:30-11:00", trAt(7, 10, 30, 0, utc), true},
		{"sun 11:00", "Sat: 9-12, Sun: 10:30-11:00", trAt(7, 11, 0, 0, utc), true},
		{"sun 11:01", "Sat: 9-12, Sun: 10:30-11:00", trAt(7, 11, 1, 0, utc), false},
		{"sat 10:45 only sunday", "Sat: 9-10, Sun: 10:30-11:00", trAt(6, 10, 45, 0, utc), false},
		{"case folded", "mon-FRI:8-18", trAt(2, 17, 59, 0, utc), true},
		{"backwards fri", "Fri-Mon: 8-9", trAt(5, 8, 30, 0, utc), false},
		{"backwards sat", "Fri-Mon: 8-9", trAt(6, 8, 30, 0, utc), false},
		{"backwards mon", "Fri-Mon: 8-9", trAt(1, 8, 30, 0, utc), false},
		{"single minute in", "Mon: 8-8", trAt(1, 8, 0, 30, utc), true},
		{"single minute out", "Mon: 8-8", trAt(1, 8, 1, 0, utc), false},
		{"minute precision in", "Tue: 9:05-9:07", trAt(2, 9, 7, 59, utc), true},
		{"minute precision out", "Tue: 9:05-9:07", trAt(2, 9, 4, 59, utc), false},
		{"midnight", "Sun: 0-0:00", trAt(7, 0, 0, 0, utc), true},
		{"end of day", "Sun: 23:59-23:59", trAt(7, 23, 59, 59, utc), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := policy.ParseTimeRanges(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := tr.Contains(tt.at); got != tt.want {
				t.Errorf("%q.Contains(%v) = %v, want %v", tt.in, tt.at, got, tt.want)
			}
		})
	}
}

// TestTimeRangesLocation checks that Contains reads the clock in the
// time's own location.
func TestTimeRangesLocation(t *testing.T) {
	tr, err := policy.ParseTimeRanges("Mon: 8-9")
	if err != nil {
		t.Fatal(err)
	}
	berlin := time.FixedZone("CET", 3600)
	at := trAt(1, 8, 30, 0, berlin) // 07:30 UTC
	if !tr.Contains(at) {
		t.Error("08:30 CET not contained")
	}
	if tr.Contains(at.UTC()) {
		t.Error("07:30 UTC contained")
	}
	// Sunday 23:30 UTC is Monday 00:30 at +01:00.
	tr, _ = policy.ParseTimeRanges("Mon: 0-1")
	if !tr.Contains(trAt(7, 23, 30, 0, time.UTC).In(berlin)) {
		t.Error("day not taken from the location")
	}
}

func FuzzTimeRange(f *testing.F) {
	for _, s := range []string{
		"", "Mon-Fri: 08:00-18:00", "Sat: 9-12, Sun: 10:30-11:00", "mon-FRI:8-18",
		"Fri-Mon: 8-9", "Mon: 18-8", "Mon: 25:00-26:00", "Xyz: 1-2", "Mon 8-9",
		"Mon-Fri: 8-18", "Sun:0-23:59,Mon:0-0", "-:-", ":", ",", "Mon:8:-9",
	} {
		f.Add(s, int64(1704096000), int32(3600))
	}
	f.Fuzz(func(t *testing.T, s string, sec int64, off int32) {
		tr, err := policy.ParseTimeRanges(s)
		if err != nil {
			e, ok := errors.AsType[*apierr.Error](err)
			if !ok || e.Code != apierr.Parameter || e.Error() != fmt.Sprintf("Invalid time format '%s'!", s) {
				t.Fatalf("bad error %#v", err)
			}
			if !tr.IsZero() {
				t.Fatal("non-zero ranges with an error")
			}
			return
		}
		blank := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) }) < 0
		if tr.IsZero() != blank {
			t.Fatalf("IsZero = %v for %q", tr.IsZero(), s)
		}
		loc := time.FixedZone("", int(off%(18*3600)))
		at := time.Unix(sec%(1<<40), int64(sec&0x3fffffff)%1e9).In(loc)
		got := tr.Contains(at)
		// Minute precision: the start of the local minute gives the same answer.
		start := at.Add(-time.Duration(at.Second())*time.Second - time.Duration(at.Nanosecond()))
		if tr.Contains(start) != got {
			t.Fatalf("%q: Contains(%v)=%v but Contains(%v)=%v", s, at, got, start, !got)
		}
		if tr.IsZero() && !got {
			t.Fatal("empty ranges must contain every time")
		}
	})
}
