package policy

import (
	"fmt"
	"math"
	"net/textproto"
	"reflect"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/authsrv/authsrv/apierr"
)

// condSections lists the condition sections in the order of the spec's
// table (admin-config 1.4).
var condSections = []string{
	SectionUserinfo,
	SectionToken,
	SectionTokeninfo,
	SectionContainer,
	SectionContainerInfo,
	SectionHeader,
	SectionEnvironment,
	SectionRequestData,
}

// The comparators accepted in policy conditions (privacyIDEA's primary
// comparators; its aliases such as "==" are not accepted here).
const (
	condEquals            = "equals"
	condNotEquals         = "!equals"
	condContainsOp        = "contains"
	condNotContains       = "!contains"
	condMatchesOp         = "matches"
	condNotMatches        = "!matches"
	condInOp              = "in"
	condNotIn             = "!in"
	condSmaller           = "<"
	condBigger            = ">"
	condDateBefore        = "date_before"
	condDateAfter         = "date_after"
	condDateWithinLast    = "date_within_last"
	condDateNotWithinLast = "!date_within_last"
	condStringContains    = "string_contains"
	condStringNotContains = "!string_contains"
)

// Bounds on condition operands.
const (
	condMaxPatternLen      = 1024 // longest accepted regular expression, bytes
	condMaxCachedPatterns  = 1024 // compiled patterns kept for reuse
	condMaxDurationSeconds = 10000 * 365 * 86400
)

var condComparators = []string{
	condEquals, condNotEquals,
	condContainsOp, condNotContains,
	condMatchesOp, condNotMatches,
	condInOp, condNotIn,
	condSmaller, condBigger,
	condDateBefore, condDateAfter,
	condDateWithinLast, condDateNotWithinLast,
	condStringContains, condStringNotContains,
}

// Sections returns the condition sections, for GET /policy/defs/conditions
// and validation.
func Sections() []string { return slices.Clone(condSections) }

// Comparators returns the 16 comparators accepted in policy conditions, in
// privacyIDEA's order.
func Comparators() []string { return slices.Clone(condComparators) }

// ValidateCondition checks one condition of policy policyName as POST
// /policy does (admin-config 1.6). An inactive condition is never checked,
// as privacyIDEA lets it hold invalid parts. Errors are apierr.Parameter.
func ValidateCondition(policyName string, c Condition) error {
	if !c.Active {
		return nil
	}
	var msg string
	switch {
	case !slices.Contains(condSections, c.Section):
		msg = fmt.Sprintf("Unknown section '%s' set in condition.", c.Section)
	case !slices.Contains(condComparators, c.Comparator):
		msg = fmt.Sprintf("Unknown comparator '%s'.", c.Comparator)
	case c.Key == "":
		msg = "Key must be a non-empty string. It names the attribute of the section that the condition checks."
	case c.Value == "":
		msg = "Value must be a non-empty string. It is what the attribute is compared with."
	case c.MissingData != "" && c.MissingData != MissingRaise &&
		c.MissingData != MissingTrue && c.MissingData != MissingFalse:
		msg = fmt.Sprintf("Unknown handle missing data value '%s'!", c.MissingData)
	default:
		return nil
	}
	return apierr.New(apierr.Parameter, fmt.Sprintf("Invalid condition of policy '%s': %s", policyName, msg))
}

// ConditionData is what a request offers the conditions; the server fills
// it once per request. A nil map means the object is unavailable (no user
// object, no token, no headers, ...), which differs from a key missing in an
// available object.
type ConditionData struct {
	// UserInfo holds the user store and custom attributes of the user in
	// context; values are string or []string.
	UserInfo map[string]any
	// Token holds the token's columns (serial, tokentype, otplen, ...).
	Token map[string]any
	// TokenInfo holds the token's info dict.
	TokenInfo map[string]any
	// Container holds the container's attributes, ContainerInfo its info.
	Container     map[string]any
	ContainerInfo map[string]any
	// Headers holds the request headers; names compare case-insensitively
	// and the first value is used.
	Headers map[string][]string
	// Environment holds WSGI-style keys: REMOTE_ADDR, HTTP_USER_AGENT,
	// SERVER_NAME, ...
	Environment map[string]any
	// RequestData holds the merged request parameters without pass and
	// password.
	RequestData map[string]any
}

// errComparison marks a comparison that cannot be made (wrong types,
// malformed operands, unknown comparator). EvalConditions turns it into
// the policy's "Invalid comparison" error.
var errComparison = apierr.New(apierr.Policy, "invalid comparison")

func condErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errComparison, fmt.Sprintf(format, args...))
}

// Compare applies comparator to the data value left and the condition
// value right, with privacyIDEA's type rules:
//
//   - equals: type-sensitive; only a string can equal right (a list, an
//     int or a bool never does).
//   - contains: left must be a list; true when a string element equals right.
//   - matches: left must be a string; right is a Go (RE2) regular
//     expression that must match all of left; inline flags like (?i) are
//     allowed. Patterns longer than 1 KiB are refused.
//   - in: right is a CSV list ("-quoting, \ escapes, spaces after commas
//     skipped); true when left is a string equal to one item.
//   - < and >: int(left or 0) against int(right); false, "", empty lists
//     and maps count as 0, floats are truncated, non-integers are errors.
//   - date_before, date_after: both ISO-8601 dates (at least YYYY-MM-DD,
//     extended format); both naive or both with an offset.
//   - date_within_last: left (naive = UTC) is newer than now minus the
//     duration right ("1y", "7d", "6h", "15m", "30s", or a sum "1d 12h";
//     y = 365 days).
//   - string_contains: case-insensitive substring; left must be a string.
//
// Each "!" comparator is the negation of its base; errors are not negated.
// Problems return an error wrapping errComparison (an apierr.Policy).
func Compare(left any, comparator, right string, now time.Time) (bool, error) {
	neg := false
	base := comparator
	switch comparator {
	case condNotEquals, condNotContains, condNotMatches, condNotIn,
		condDateNotWithinLast, condStringNotContains:
		neg, base = true, comparator[1:]
	}
	var (
		ok  bool
		err error
	)
	switch base {
	case condEquals:
		s, isStr := left.(string)
		ok = isStr && s == right
	case condContainsOp:
		ok, err = condContains(left, right)
	case condMatchesOp:
		ok, err = condMatches(left, right)
	case condInOp:
		ok, err = condIn(left, right)
	case condSmaller, condBigger:
		var l, r int64
		if l, err = condLeftInt(left); err != nil {
			break
		}
		if r, err = strconv.ParseInt(strings.TrimSpace(right), 10, 64); err != nil {
			err = condErr("right value %q is not an integer", right)
			break
		}
		ok = (base == condSmaller && l < r) || (base == condBigger && l > r)
	case condDateBefore, condDateAfter:
		ok, err = condDateOrder(left, right, base == condDateBefore)
	case condDateWithinLast:
		ok, err = condWithinLast(left, right, now)
	case condStringContains:
		s, isStr := left.(string)
		if !isStr {
			err = condErr("string_contains needs a string, not %T", left)
			break
		}
		ok = strings.Contains(strings.ToLower(s), strings.ToLower(right))
	default:
		err = condErr("unknown comparator %q", comparator)
	}
	if err != nil {
		return false, err
	}
	return ok != neg, nil
}

// condContains reports whether the list left holds the string right.
func condContains(left any, right string) (bool, error) {
	switch l := left.(type) {
	case []string:
		return slices.Contains(l, right), nil
	case []any:
		for _, e := range l {
			if s, ok := e.(string); ok && s == right {
				return true, nil
			}
		}
		return false, nil
	case []byte, string, nil:
		return false, condErr("contains needs a list, not %T", left)
	}
	v := reflect.ValueOf(left)
	if v.Kind() != reflect.Slice && v.Kind() != reflect.Array {
		return false, condErr("contains needs a list, not %T", left)
	}
	for i := range v.Len() {
		e := v.Index(i)
		if e.Kind() == reflect.Interface {
			e = e.Elem()
		}
		if e.IsValid() && e.Type() == reflect.TypeFor[string]() && e.String() == right {
			return true, nil
		}
	}
	return false, nil
}

// condMatches reports whether the string left fully matches pattern.
func condMatches(left any, pattern string) (bool, error) {
	s, ok := left.(string)
	if !ok {
		return false, condErr("matches needs a string, not %T", left)
	}
	re, err := condRegexp(pattern)
	if err != nil {
		return false, err
	}
	return re.MatchString(s), nil
}

type condRegexEntry struct {
	re  *regexp.Regexp
	err error
}

var (
	condRegexCache sync.Map // pattern -> *condRegexEntry
	condRegexCount atomic.Int64
)

// condRegexp compiles pattern anchored at both ends, caching the result
// (also a failure) because conditions are evaluated on every request. The
// pattern is parsed on its own first and re-serialized, so that a pattern
// such as "a)|(b" cannot break out of the anchoring group. The cache is
// bounded; past the bound patterns are compiled each time.
func condRegexp(pattern string) (*regexp.Regexp, error) {
	if v, ok := condRegexCache.Load(pattern); ok {
		e := v.(*condRegexEntry)
		return e.re, e.err
	}
	if len(pattern) > condMaxPatternLen {
		return nil, condErr("regular expression longer than %d bytes", condMaxPatternLen)
	}
	e := &condRegexEntry{}
	if ast, err := syntax.Parse(pattern, syntax.Perl); err != nil {
		e.err = condErr("bad regular expression: %v", err)
	} else if e.re, err = regexp.Compile(`^(?:` + ast.String() + `)$`); err != nil {
		e.re, e.err = nil, condErr("bad regular expression: %v", err)
	}
	if condRegexCount.Load() < condMaxCachedPatterns {
		if _, loaded := condRegexCache.LoadOrStore(pattern, e); !loaded {
			condRegexCount.Add(1)
		}
	}
	return e.re, e.err
}

// condIn reports whether left is a string equal to an item of the CSV list
// right, read the way Python's csv reader does with strict=True,
// skipinitialspace=True, doublequote=False, escapechar="\\": spaces at the
// start of a field are skipped, a field may be quoted with ", a backslash
// takes the next character literally, a quote inside an unquoted field is
// literal, text after a closing quote is appended to the field. An
// unterminated quote, a trailing backslash or a line break outside quotes
// is malformed, and that is an error even when left is not a string (the
// whole list is read first). An empty right is an empty list. The fields
// are compared as they are read, without allocating.
func condIn(left any, right string) (bool, error) {
	const (
		startField = iota
		inField
		inQuoted
	)
	s, isStr := left.(string)
	if right == "" {
		return false, nil
	}
	var buf [128]byte
	field := buf[:0]
	found := false
	state := startField
	for i := 0; i < len(right); i++ {
		c := right[i]
		if c == '\\' {
			if i+1 >= len(right) {
				return false, condErr("malformed comma-separated value: trailing escape")
			}
			i++
			field = append(field, right[i])
			if state == startField {
				state = inField
			}
			continue
		}
		if state == inQuoted {
			if c == '"' {
				state = inField
			} else {
				field = append(field, c)
			}
			continue
		}
		switch {
		case c == ' ' && state == startField:
		case c == '"' && state == startField:
			state = inQuoted
		case c == ',':
			found = found || (isStr && string(field) == s)
			field = field[:0]
			state = startField
		case c == '\n' || c == '\r':
			return false, condErr("malformed comma-separated value: line break")
		default:
			field = append(field, c)
			state = inField
		}
	}
	if state == inQuoted {
		return false, condErr("malformed comma-separated value: unterminated quote")
	}
	return found || (isStr && string(field) == s), nil
}

// condLeftInt converts the data value of < and > like Python's
// int(left or 0).
func condLeftInt(left any) (int64, error) {
	switch l := left.(type) {
	case nil:
		return 0, nil
	case bool:
		if l {
			return 1, nil
		}
		return 0, nil
	case int:
		return int64(l), nil
	case int8:
		return int64(l), nil
	case int16:
		return int64(l), nil
	case int32:
		return int64(l), nil
	case int64:
		return l, nil
	case uint:
		return condUint(uint64(l))
	case uint8:
		return int64(l), nil
	case uint16:
		return int64(l), nil
	case uint32:
		return int64(l), nil
	case uint64:
		return condUint(l)
	case float32:
		return condFloat(float64(l))
	case float64:
		return condFloat(l)
	case string:
		if l == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(strings.TrimSpace(l), 10, 64)
		if err != nil {
			return 0, condErr("left value %q is not an integer", l)
		}
		return n, nil
	case fmt.Stringer: // json.Number and the like
		return condLeftInt(l.String())
	}
	v := reflect.ValueOf(left)
	switch v.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		if v.Len() == 0 {
			return 0, nil
		}
	}
	return 0, condErr("left value of type %T is not an integer", left)
}

func condUint(u uint64) (int64, error) {
	if u > math.MaxInt64 {
		return 0, condErr("left value %d out of range", u)
	}
	return int64(u), nil
}

func condFloat(f float64) (int64, error) {
	if math.IsNaN(f) || f >= math.MaxInt64 || f < math.MinInt64 {
		return 0, condErr("left value %v is not an integer", f)
	}
	return int64(f), nil // truncates, like int()
}

// condDate converts a data value to a time; aware is false for a naive
// ISO string (no offset), which is then read as UTC.
func condDate(v any) (t time.Time, aware bool, err error) {
	switch d := v.(type) {
	case time.Time:
		return d, true, nil
	case string:
		return condParseISO(d)
	}
	return time.Time{}, false, condErr("a date must be an ISO-8601 string, not %T", v)
}

// condDateOrder implements date_before (before=true) and date_after.
func condDateOrder(left any, right string, before bool) (bool, error) {
	l, la, err := condDate(left)
	if err != nil {
		return false, err
	}
	r, ra, err := condParseISO(right)
	if err != nil {
		return false, err
	}
	if la != ra {
		return false, condErr("cannot compare timezone-naive and timezone-aware dates")
	}
	if before {
		return l.Before(r), nil
	}
	return l.After(r), nil
}

// condWithinLast implements date_within_last: now - left < duration.
func condWithinLast(left any, right string, now time.Time) (bool, error) {
	l, _, err := condDate(left)
	if err != nil {
		return false, err
	}
	secs, err := condParseDuration(right)
	if err != nil {
		return false, err
	}
	cutoff := time.Unix(now.Unix()-secs, int64(now.Nanosecond()))
	return l.After(cutoff), nil
}

// condParseISO parses the extended ISO-8601 forms
// YYYY-MM-DD[(T|t| )hh[:mm[:ss[(.|,)f...]]]][Z|z|±hh[[:]mm]]. At least the
// full date is required (no guessing of month or day); 24:00 is midnight
// of the next day. A string without an offset is naive and returned in
// UTC.
func condParseISO(s string) (time.Time, bool, error) {
	bad := func() (time.Time, bool, error) {
		return time.Time{}, false, condErr("invalid date format %q, expected ISO-8601", s)
	}
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return bad()
	}
	y, ok1 := condDigits(s[0:4])
	mo, ok2 := condDigits(s[5:7])
	d, ok3 := condDigits(s[8:10])
	if !ok1 || !ok2 || !ok3 || y < 1 || mo < 1 || mo > 12 || d < 1 ||
		d > time.Date(y, time.Month(mo)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return bad()
	}
	rest := s[10:]
	var h, mi, sec, nsec int
	if rest != "" && rest[0] != 'Z' && rest[0] != 'z' && rest[0] != '+' && rest[0] != '-' {
		if rest[0] != 'T' && rest[0] != 't' && rest[0] != ' ' {
			return bad()
		}
		rest = rest[1:]
		var ok bool
		if len(rest) < 2 {
			return bad()
		}
		if h, ok = condDigits(rest[:2]); !ok || h > 24 {
			return bad()
		}
		rest = rest[2:]
		if len(rest) >= 3 && rest[0] == ':' {
			if mi, ok = condDigits(rest[1:3]); !ok || mi > 59 {
				return bad()
			}
			rest = rest[3:]
			if len(rest) >= 3 && rest[0] == ':' {
				if sec, ok = condDigits(rest[1:3]); !ok || sec > 59 {
					return bad()
				}
				rest = rest[3:]
				if len(rest) >= 2 && (rest[0] == '.' || rest[0] == ',') {
					n := 1
					for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
						n++
					}
					frac := rest[1:n]
					if frac == "" {
						return bad()
					}
					if len(frac) > 9 {
						frac = frac[:9]
					}
					nsec, _ = condDigits(frac)
					for range 9 - len(frac) {
						nsec *= 10
					}
					rest = rest[n:]
				}
			}
		}
		if h == 24 && (mi != 0 || sec != 0 || nsec != 0) {
			return bad()
		}
	}
	loc := time.UTC
	aware := false
	switch {
	case rest == "":
	case rest == "Z" || rest == "z":
		aware = true
	case rest[0] == '+' || rest[0] == '-':
		off := rest[1:]
		var oh, om int
		var ok bool
		switch {
		case len(off) == 2:
			oh, ok = condDigits(off)
		case len(off) == 4:
			oh, ok = condDigits(off[:2])
			if ok {
				om, ok = condDigits(off[2:])
			}
		case len(off) == 5 && off[2] == ':':
			oh, ok = condDigits(off[:2])
			if ok {
				om, ok = condDigits(off[3:])
			}
		}
		if !ok || oh > 23 || om > 59 {
			return bad()
		}
		secs := oh*3600 + om*60
		if rest[0] == '-' {
			secs = -secs
		}
		loc = time.FixedZone("", secs)
		aware = true
	default:
		return bad()
	}
	return time.Date(y, time.Month(mo), d, h, mi, sec, nsec, loc), aware, nil
}

// condDigits parses a string of ASCII digits (at most 9).
func condDigits(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// condParseDuration parses a duration such as "7d", "-1h" or "1d 12h"
// into seconds: an optional sign, then one or more <digits><unit> terms
// with unit s, m, h, d or y (365 days); whitespace between parts is
// allowed. Totals beyond 10000 years are refused.
func condParseDuration(s string) (int64, error) {
	bad := func() (int64, error) {
		return 0, condErr("unsupported duration %q", s)
	}
	i := 0
	skip := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	skip()
	sign := int64(1)
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		if s[i] == '-' {
			sign = -1
		}
		i++
	}
	var total int64
	terms := 0
	for {
		skip()
		if i == len(s) {
			break
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start || i-start > 12 {
			return bad()
		}
		n, _ := strconv.ParseInt(s[start:i], 10, 64)
		skip()
		if i == len(s) {
			return bad()
		}
		var unit int64
		switch s[i] {
		case 's':
			unit = 1
		case 'm':
			unit = 60
		case 'h':
			unit = 3600
		case 'd':
			unit = 86400
		case 'y':
			unit = 365 * 86400
		default:
			return bad()
		}
		i++
		if n > condMaxDurationSeconds/unit {
			return bad()
		}
		total += n * unit
		if total > condMaxDurationSeconds {
			return bad()
		}
		terms++
	}
	if terms == 0 {
		return bad()
	}
	return sign * total, nil
}

// condMissingObject names the object of a section in the "unavailable"
// error.
func condMissingObject(section string) string {
	switch section {
	case SectionUserinfo:
		return "user"
	case SectionToken, SectionTokeninfo:
		return "token"
	case SectionContainer, SectionContainerInfo:
		return "container"
	}
	return section
}

// condLookup finds the data value of a condition. available is false when
// the section's object is nil; found is false when the key is absent or
// its value is nil. known is false for an unknown section.
func condLookup(section, key string, d ConditionData) (v any, available, found, known bool) {
	var m map[string]any
	switch section {
	case SectionUserinfo:
		m = d.UserInfo
	case SectionToken:
		m = d.Token
	case SectionTokeninfo:
		m = d.TokenInfo
	case SectionContainer:
		m = d.Container
	case SectionContainerInfo:
		m = d.ContainerInfo
	case SectionEnvironment:
		m = d.Environment
	case SectionRequestData:
		m = d.RequestData
	case SectionHeader:
		if d.Headers == nil {
			return nil, false, false, true
		}
		vals := condHeader(d.Headers, key)
		if len(vals) == 0 {
			return nil, true, false, true
		}
		return vals[0], true, true, true
	default:
		return nil, false, false, false
	}
	if m == nil {
		return nil, false, false, true
	}
	v, ok := m[key]
	return v, true, ok && v != nil, true
}

// condHeader looks a header up case-insensitively: the exact name, then
// the canonical name, then (deterministically, the smallest such name) any
// name equal under case folding.
func condHeader(h map[string][]string, key string) []string {
	if v, ok := h[key]; ok {
		return v
	}
	if v, ok := h[textproto.CanonicalMIMEHeaderKey(key)]; ok {
		return v
	}
	var best string
	var bestV []string
	found := false
	for k, v := range h {
		if strings.EqualFold(k, key) && (!found || k < best) {
			best, bestV, found = k, v, true
		}
	}
	return bestV
}

// EvalConditions reports whether all active conditions of policy
// policyName hold for data (AND, stopping at the first false); inactive
// conditions always hold. Missing data follows each condition's
// MissingData mode: MissingRaise (also "" or an unknown mode) gives an
// apierr.Policy error, MissingTrue lets the condition hold, MissingFalse
// makes it fail. A comparison that cannot be made is an apierr.Policy
// error too, whose hidden cause says why.
func EvalConditions(policyName string, conds []Condition, data ConditionData, now time.Time) (bool, error) {
	for _, c := range conds {
		if !c.Active {
			continue
		}
		v, available, found, known := condLookup(c.Section, c.Key, data)
		if !known {
			return false, apierr.New(apierr.Policy, fmt.Sprintf(
				"Policy '%s' has a condition with the unknown section '%s'!", policyName, c.Section))
		}
		if !available || !found {
			switch c.MissingData {
			case MissingTrue:
				continue
			case MissingFalse:
				return false, nil
			}
			if !available {
				return false, apierr.New(apierr.Policy, fmt.Sprintf(
					"Policy '%s' has a condition on the section '%s' with key '%s', but a %s is unavailable!",
					policyName, c.Section, c.Key, condMissingObject(c.Section)))
			}
			return false, apierr.New(apierr.Policy, fmt.Sprintf(
				"Unknown %s key '%s' referenced in condition of policy '%s'!", c.Section, c.Key, policyName))
		}
		ok, err := Compare(v, c.Comparator, c.Value, now)
		if err != nil {
			return false, apierr.New(apierr.Policy, fmt.Sprintf(
				"Invalid comparison in the %s conditions of policy '%s'", c.Section, policyName)).
				Wrap(fmt.Errorf("condition %s %s %s: %w", c.Key, c.Comparator, c.Value, err))
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}
