package monitoring

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
)

// The dates of the statistics endpoints: the start and end parameters
// privacyIDEA parses with parse_legacy_time (ISO-like strings with or
// without seconds, fractions and a zone offset, and the legacy
// DD/MM/YY hh:mm, day first), and the timestamps it answers.

// TimeLayout is the form of the timestamps in the answers (privacyIDEA's
// "%Y-%m-%d %H:%M:%S.%f%z", always in UTC).
const TimeLayout = "2006-01-02 15:04:05.000000-0700"

// maxDateLen bounds a date parameter.
const maxDateLen = 64

// The time of day and the zone shared by both date forms.
const (
	clockPart = `(?:(?:T|\s+)(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?`
	zonePart  = `\s*(Z|z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?`
)

var (
	// isoDate: 2026-05-01, 2026-05-01 12:00, 2026-05-01T12:00:00.5Z,
	// 2010-12-31 22:00+0200, ...
	isoDate = regexp.MustCompile(`^(\d{4})-(\d{1,2})-(\d{1,2})` + clockPart + zonePart + `$`)
	// legacyDate: 31/12/10 22:00, 31.12.2010 22:00:05, 31/12/2010, ...
	legacyDate = regexp.MustCompile(`^(\d{1,2})[/.](\d{1,2})[/.](\d{4}|\d{2})` + clockPart + zonePart + `$`)
)

// FormatTime is t as the answers show it.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseDate parses the value of the date parameter name (start or end).
// A date without a zone is a time in loc (the server's local time); a
// two-digit year is the one within 50 years of now. A value that does
// not parse is a parameter error that names the parameter.
func ParseDate(name, value string, loc *time.Location, now time.Time) (time.Time, error) {
	if loc == nil {
		loc = time.Local
	}
	v := strings.TrimSpace(value)
	bad := func() (time.Time, error) {
		shown := value
		if len(shown) > maxDateLen {
			shown = shown[:maxDateLen] + "..."
		}
		return time.Time{}, apierr.Newf(apierr.Parameter,
			"The parameter %s is not a date: %q. Use YYYY-MM-DD hh:mm[:ss][+hhmm] or DD/MM/YY hh:mm.", name, shown)
	}
	if v == "" || len(v) > maxDateLen {
		return bad()
	}
	var year, month, day int
	var m []string
	if m = isoDate.FindStringSubmatch(v); m != nil {
		year, month, day = atoi(m[1]), atoi(m[2]), atoi(m[3])
	} else if m = legacyDate.FindStringSubmatch(v); m != nil {
		day, month, year = atoi(m[1]), atoi(m[2]), atoi(m[3])
		if len(m[3]) == 2 {
			year = nearYear(year, now.Year())
		}
	} else {
		for _, layout := range []string{time.RFC1123, time.RFC1123Z} {
			if t, err := time.Parse(layout, v); err == nil {
				return t, nil
			}
		}
		return bad()
	}
	hour, minute, sec, nsec := atoi(m[4]), atoi(m[5]), atoi(m[6]), 0
	if f := m[7]; f != "" {
		nsec = atoi((f + "000000000")[:9])
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || sec > 59 {
		return bad()
	}
	zone := loc
	switch z := m[8]; z {
	case "":
	case "Z", "z", "UTC", "GMT":
		zone = time.UTC
	default:
		digits := strings.ReplaceAll(z[1:], ":", "")
		h, mins := atoi(digits[:2]), 0
		if len(digits) == 4 {
			mins = atoi(digits[2:])
		} else if len(digits) != 2 {
			return bad()
		}
		if h > 23 || mins > 59 {
			return bad()
		}
		off := h*3600 + mins*60
		if z[0] == '-' {
			off = -off
		}
		zone = time.FixedZone("", off)
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, zone)
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return bad()
	}
	return t, nil
}

// atoi is a conversion of digits the patterns matched ("" is 0).
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// nearYear places a two-digit year within 50 years of the current one,
// as dateutil does.
func nearYear(yy, current int) int {
	y := yy + current/100*100
	switch {
	case y >= current+50:
		y -= 100
	case y < current-50:
		y += 100
	}
	return y
}

func daysIn(year, month int) int {
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
