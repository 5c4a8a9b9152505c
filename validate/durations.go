package validate

// The durations of policy values (auth_cache, auth_max_*, last_auth):
// parsed from privacyIDEA's "4h"/"1d12h" form and printed as Python
// prints a timedelta.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// deltaUnits are the units of the policy durations (auth_cache,
// auth_max_*, last_auth).
var deltaUnits = map[byte]time.Duration{
	's': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour,
	'w': 7 * 24 * time.Hour, 'y': 365 * 24 * time.Hour,
}

// parseDelta reads a policy duration: numbers with units s, m, h, d, w
// or y ("4h", "10m", "7d", "1y", "1d12h").
func parseDelta(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	var total time.Duration
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i || j == len(s) {
			return 0, false
		}
		unit, ok := deltaUnits[s[j]|0x20]
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(s[i:j], 10, 64)
		if err != nil || n > int64(math.MaxInt64/unit) || total > math.MaxInt64-time.Duration(n)*unit {
			return 0, false
		}
		total += time.Duration(n) * unit
		i = j + 1
	}
	return total, total > 0
}

// pyDelta prints a duration as Python prints a timedelta: "0:01:00",
// "1 day, 2:00:00", with microseconds only when there are some.
func pyDelta(d time.Duration) string {
	us := d.Microseconds()
	days := us / (86400 * 1e6)
	us -= days * 86400 * 1e6
	h, m, s, frac := us/3600e6, us%3600e6/60e6, us%60e6/1e6, us%1e6
	out := fmt.Sprintf("%d:%02d:%02d", h, m, s)
	if frac != 0 {
		out += fmt.Sprintf(".%06d", frac)
	}
	switch {
	case days == 1:
		out = "1 day, " + out
	case days > 1:
		out = fmt.Sprintf("%d days, %s", days, out)
	}
	return out
}
