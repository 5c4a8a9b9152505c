package policy

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/authsrv/authsrv/apierr"
)

// TimeRanges is a parsed policy time restriction such as
// "Mon-Fri: 08:00-18:00, Sat: 9-12". The zero value means no restriction.
type TimeRanges struct {
	ranges []trRange
}

// trRange is one "<DOW>[-<DOW>]: <from>-<to>" item. Days are ISO week days
// (Mon=1 ... Sun=7); times are minutes since midnight, both ends inclusive.
type trRange struct {
	fromDay, toDay uint8
	from, to       uint16
}

// trDays maps the lower-cased day names to ISO week days.
var trDays = map[string]uint8{
	"mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6, "sun": 7,
}

// ParseTimeRanges parses a policy's time attribute, so that a bad value is
// refused when the policy is written rather than silently never matching.
//
// The syntax is comma separated "<DOW>[-<DOW>]: <h[:mm]>-<h[:mm]>" items;
// all whitespace is ignored (as privacyIDEA does), day names are Mon..Sun in
// any case, hours and minutes have one or two digits. A start time after the
// end time is invalid. A day range running backwards ("Fri-Mon") is
// accepted but never matches: there is no wrap-around. An empty item (a
// stray comma) is invalid. An empty or all-blank string means no
// restriction. Errors are apierr.Parameter "Invalid time format '<s>'!".
func ParseTimeRanges(s string) (TimeRanges, error) {
	compact := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	if compact == "" {
		return TimeRanges{}, nil
	}
	items := strings.Split(compact, ",")
	out := TimeRanges{ranges: make([]trRange, 0, len(items))}
	for i, item := range items {
		r, err := trParseItem(item)
		if err != nil {
			return TimeRanges{}, apierr.New(apierr.Parameter, fmt.Sprintf("Invalid time format '%s'!", s)).
				Wrap(fmt.Errorf("time range %d: %w", i+1, err))
		}
		out.ranges = append(out.ranges, r)
	}
	return out, nil
}

// trParseItem parses one whitespace-free range item.
func trParseItem(item string) (trRange, error) {
	days, times, ok := strings.Cut(item, ":")
	if !ok {
		return trRange{}, errors.New("missing ':' after the days")
	}
	var r trRange
	fromDay, toDay, isRange := strings.Cut(days, "-")
	if !isRange {
		toDay = fromDay
	}
	var found bool
	if r.fromDay, found = trDays[strings.ToLower(fromDay)]; !found {
		return trRange{}, fmt.Errorf("unknown day %q", fromDay)
	}
	if r.toDay, found = trDays[strings.ToLower(toDay)]; !found {
		return trRange{}, fmt.Errorf("unknown day %q", toDay)
	}
	from, to, ok := strings.Cut(times, "-")
	if !ok {
		return trRange{}, errors.New("missing '-' between the times")
	}
	var err error
	if r.from, err = trParseClock(from); err != nil {
		return trRange{}, err
	}
	if r.to, err = trParseClock(to); err != nil {
		return trRange{}, err
	}
	if r.from > r.to {
		return trRange{}, errors.New("start time after end time")
	}
	return r, nil
}

// trParseClock parses "h", "hh", "h:mm" or "hh:mm" (minutes may also have
// one digit, like Python's int()) into minutes since midnight.
func trParseClock(s string) (uint16, error) {
	hs, ms, hasMin := strings.Cut(s, ":")
	h, ok := trParse2(hs)
	if !ok || h > 23 {
		return 0, fmt.Errorf("bad hour %q", hs)
	}
	m := 0
	if hasMin {
		if m, ok = trParse2(ms); !ok || m > 59 {
			return 0, fmt.Errorf("bad minute %q", ms)
		}
	}
	return uint16(h*60 + m), nil
}

// trParse2 parses one or two ASCII digits.
func trParse2(s string) (int, bool) {
	if len(s) == 0 || len(s) > 2 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// Contains reports whether tm lies in at least one range. It reads the week
// day and clock of tm in tm's own location, so the caller passes
// server-local time; seconds are ignored (minute precision). No
// restriction contains every time.
func (t TimeRanges) Contains(tm time.Time) bool {
	if len(t.ranges) == 0 {
		return true
	}
	day := uint8(tm.Weekday())
	if day == 0 {
		day = 7
	}
	minute := uint16(tm.Hour()*60 + tm.Minute())
	for _, r := range t.ranges {
		if r.fromDay <= day && day <= r.toDay && r.from <= minute && minute <= r.to {
			return true
		}
	}
	return false
}

// IsZero reports whether t holds no restriction (the policy's time was
// empty).
func (t TimeRanges) IsZero() bool { return len(t.ranges) == 0 }
