package monitoring_test

import (
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/monitoring"
)

func TestParseDate(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		berlin = time.FixedZone("CEST", 2*3600) // no tz database: the summer offset
	}
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	utc := func(s string) time.Time {
		t, err := time.Parse("2006-01-02 15:04:05.999999", s)
		if err != nil {
			panic(err)
		}
		return t
	}
	cases := []struct {
		in   string
		want time.Time
	}{
		{"2010-12-31 22:00+0200", utc("2010-12-31 20:00:00")},
		{"2010-12-31T22:00+02:00", utc("2010-12-31 20:00:00")},
		{"2010-12-31 22:00 -0130", utc("2010-12-31 23:30:00")},
		{"2026-05-01T12:00:00Z", utc("2026-05-01 12:00:00")},
		{"2026-05-01 12:00:00 UTC", utc("2026-05-01 12:00:00")},
		{"2026-05-01 12:00:00.5+00", utc("2026-05-01 12:00:00.5")},
		{"2026-05-01T12:00:00.123456789Z", utc("2026-05-01 12:00:00.123456789")},
		{"2026-05-01 12:00:07,25Z", utc("2026-05-01 12:00:07.25")},
		{" 2026-5-1 8:05Z ", utc("2026-05-01 08:05:00")},
		// Naive: the server's local time (Berlin, summer: UTC+2).
		{"2026-05-01 12:00", utc("2026-05-01 10:00:00")},
		{"2026-05-01", utc("2026-04-30 22:00:00")},
		{"2026-05-01T12:00:30.25", utc("2026-05-01 10:00:30.25")},
		// Legacy DD/MM/YY hh:mm, day first, naive.
		{"01/05/26 12:00", utc("2026-05-01 10:00:00")},
		{"31/12/10 22:00", utc("2010-12-31 21:00:00")}, // winter: UTC+1
		{"31.12.2010 22:00:05", utc("2010-12-31 21:00:05")},
		{"02/03/75 00:00", utc("2075-03-01 23:00:00")},
		{"02/03/77 00:00", utc("1977-03-01 23:00:00")},
		{"01/05/26 12:00+0000", utc("2026-05-01 12:00:00")},
		{"01/05/2026", utc("2026-04-30 22:00:00")},
		// The dates the API itself writes elsewhere.
		{"Fri, 01 May 2026 12:34:56 GMT", utc("2026-05-01 12:34:56")},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := monitoring.ParseDate("start", c.in, berlin, now)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(c.want) {
				t.Errorf("got %v, want %v", got.UTC(), c.want)
			}
		})
	}
}

func TestParseDateRefused(t *testing.T) {
	for _, in := range []string{
		"", "   ", "yesterday", "2026-13-01", "2026-02-30 10:00", "2026-05-01 24:00", "2026-05-01 12:60",
		"2026-05-01 12:00:61", "32/01/26 10:00", "01/13/26 10:00", "2026-05-01 12:00+2500", "2026-05-01 12:00+02:75",
		"2026-05-01 12:00+020", "2026-05-01T", "12:00", "1/2", "2026/05/01 12:00", "2026-05-01 12:00 garbage",
		strings.Repeat("9", 200), "2026-05-01\x0012:00",
	} {
		_, err := monitoring.ParseDate("end", in, time.UTC, time.Now())
		if err == nil {
			t.Errorf("%q parsed", in)
			continue
		}
		if !apierr.Is(err, apierr.Parameter) || !strings.Contains(err.Error(), "end") {
			t.Errorf("%q: %v, want a parameter error naming end", in, err)
		}
		if len(err.Error()) > 200 {
			t.Errorf("%q: error of %d bytes", in, len(err.Error()))
		}
	}
}

func TestFormatTime(t *testing.T) {
	in := time.Date(2026, 5, 1, 14, 0, 0, 123456789, time.FixedZone("", 2*3600))
	if got, want := monitoring.FormatTime(in), "2026-05-01 12:00:00.123456+0000"; got != want {
		t.Errorf("FormatTime = %q, want %q", got, want)
	}
	if got, want := monitoring.FormatTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)), "2026-05-01 12:00:00.000000+0000"; got != want {
		t.Errorf("FormatTime = %q, want %q", got, want)
	}
}

// FuzzParseDate: any input parses or is a parameter error, never a
// panic; what parses formats and parses back to the same instant.
func FuzzParseDate(f *testing.F) {
	for _, s := range []string{"2010-12-31 22:00+0200", "01/05/26 12:00", "2026-05-01T12:00:00.5Z", "31.12.2010", "Fri, 01 May 2026 12:34:56 GMT", "x"} {
		f.Add(s)
	}
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := monitoring.ParseDate("start", s, time.UTC, now)
		if err != nil {
			if !apierr.Is(err, apierr.Parameter) {
				t.Fatalf("%q: %v is not a parameter error", s, err)
			}
			return
		}
		back, err := monitoring.ParseDate("start", monitoring.FormatTime(got), time.UTC, now)
		if err != nil || !back.Equal(got.Truncate(time.Microsecond)) {
			t.Fatalf("%q: %v formats as %q, which parses as %v %v", s, got, monitoring.FormatTime(got), back, err)
		}
	})
}
