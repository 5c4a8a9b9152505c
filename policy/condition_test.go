package policy_test

import (
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
)

var condNow = time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)

func TestSectionsAndComparators(t *testing.T) {
	wantSections := []string{
		"userinfo", "token", "tokeninfo", "container", "container_info",
		"HTTP Request header", "HTTP Environment", "Request Data",
	}
	if got := policy.Sections(); !slices.Equal(got, wantSections) {
		t.Errorf("Sections() = %q", got)
	}
	wantComparators := []string{
		"equals", "!equals", "contains", "!contains", "matches", "!matches", "in", "!in",
		"<", ">", "date_before", "date_after", "date_within_last", "!date_within_last",
		"string_contains", "!string_contains",
	}
	if got := policy.Comparators(); !slices.Equal(got, wantComparators) {
		t.Errorf("Comparators() = %q", got)
	}
	policy.Sections()[0] = "changed"
	policy.Comparators()[0] = "changed"
	if policy.Sections()[0] != "userinfo" || policy.Comparators()[0] != "equals" {
		t.Error("the returned slices alias the package's tables")
	}
}

func TestValidateCondition(t *testing.T) {
	ok := policy.Condition{Section: "userinfo", Key: "email", Comparator: "matches", Value: ".*@example.com", Active: true}
	with := func(f func(c *policy.Condition)) policy.Condition {
		c := ok
		f(&c)
		return c
	}
	const pre = "Invalid condition of policy 'pol1': "
	tests := []struct {
		name string
		c    policy.Condition
		want string // "" means valid
	}{
		{"valid", ok, ""},
		{"valid every section", with(func(c *policy.Condition) { c.Section = "HTTP Request header" }), ""},
		{"valid raise", with(func(c *policy.Condition) { c.MissingData = policy.MissingRaise }), ""},
		{"valid true", with(func(c *policy.Condition) { c.MissingData = policy.MissingTrue }), ""},
		{"valid false", with(func(c *policy.Condition) { c.MissingData = policy.MissingFalse }), ""},
		{"unknown section", with(func(c *policy.Condition) { c.Section = "x" }),
			pre + "Unknown section 'x' set in condition."},
		{"section case matters", with(func(c *policy.Condition) { c.Section = "UserInfo" }),
			pre + "Unknown section 'UserInfo' set in condition."},
		{"unknown comparator", with(func(c *policy.Condition) { c.Comparator = "x" }),
			pre + "Unknown comparator 'x'."},
		{"alias comparator refused", with(func(c *policy.Condition) { c.Comparator = "==" }),
			pre + "Unknown comparator '=='."},
		{"empty key", with(func(c *policy.Condition) { c.Key = "" }),
			pre + "Key must be a non-empty string. It names the attribute of the section that the condition checks."},
		{"empty value", with(func(c *policy.Condition) { c.Value = "" }),
			pre + "Value must be a non-empty string. It is what the attribute is compared with."},
		{"bad missing data", with(func(c *policy.Condition) { c.MissingData = "x" }),
			pre + "Unknown handle missing data value 'x'!"},
		{"section checked first", with(func(c *policy.Condition) { c.Section, c.Comparator, c.Key = "x", "y", "" }),
			pre + "Unknown section 'x' set in condition."},
		{"inactive may be invalid", with(func(c *policy.Condition) {
			c.Active, c.Section, c.Comparator, c.Key, c.Value, c.MissingData = false, "x", "y", "", "", "z"
		}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := policy.ValidateCondition("pol1", tt.c)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			e, isAPI := errors.AsType[*apierr.Error](err)
			if !isAPI || e.Code != apierr.Parameter || e.Error() != tt.want {
				t.Fatalf("error = %#v, want Parameter %q", err, tt.want)
			}
			if e.Message() != "ERR905: "+tt.want {
				t.Errorf("Message() = %q", e.Message())
			}
		})
	}
}

// condBad marks a Compare case that must fail.
const condBad = "error"

func TestCompare(t *testing.T) {
	tests := []struct {
		name  string
		left  any
		op    string
		right string
		want  any // bool or condBad
	}{
		// equals
		{"equals string", "abc", "equals", "abc", true},
		{"equals case sensitive", "abc", "equals", "ABC", false},
		{"equals empty string", "", "equals", "", true},
		{"equals list never", []string{"abc"}, "equals", "abc", false},
		{"equals any list never", []any{"abc"}, "equals", "abc", false},
		{"equals int never", 5, "equals", "5", false},
		{"equals bool never", true, "equals", "True", false},
		{"!equals string", "abc", "!equals", "abd", true},
		{"!equals same", "abc", "!equals", "abc", false},
		{"!equals list", []string{"abc"}, "!equals", "abc", true},
		// contains
		{"contains hit", []string{"a", "b"}, "contains", "b", true},
		{"contains miss", []string{"a", "b"}, "contains", "c", false},
		{"contains any list", []any{1, "a"}, "contains", "a", true},
		{"contains any list int", []any{1}, "contains", "1", false},
		{"contains int list", []int{1}, "contains", "1", false},
		{"contains empty list", []string{}, "contains", "a", false},
		{"contains string left", "abc", "contains", "a", condBad},
		{"contains int left", 1, "contains", "1", condBad},
		{"contains bytes left", []byte("a"), "contains", "a", condBad},
		{"contains nil left", nil, "contains", "a", condBad},
		{"!contains hit", []string{"a"}, "!contains", "a", false},
		{"!contains miss", []string{"a"}, "!contains", "b", true},
		{"!contains string left", "a", "!contains", "a", condBad},
		// matches
		{"matches full", "alice", "matches", "a.*", true},
		{"matches not partial", "xalice", "matches", "a.*", false},
		{"matches not prefix", "alice", "matches", "ali", false},
		{"matches alternation anchored", "axyz", "matches", "a|b", false},
		{"matches alternation", "b", "matches", "a|b", true},
		{"matches inline flag", "ALICE", "matches", "(?i)alice", true},
		{"matches case", "ALICE", "matches", "alice", false},
		{"matches no breakout", "a", "matches", "a)|(b", condBad},
		{"matches quote literal", "a.b", "matches", `\Qa.b`, true},
		{"matches quote literal miss", "axb", "matches", `\Qa.b`, false},
		{"matches newline not end", "abc\n", "matches", "abc", false},
		{"matches bad regexp", "a", "matches", "[", condBad},
		{"matches python flag", "a", "matches", "(?x)a", condBad},
		{"matches too long", "a", "matches", strings.Repeat("a", 1025), condBad},
		{"matches max length", strings.Repeat("a", 1024), "matches", strings.Repeat("a", 1024), true},
		{"matches list left", []string{"a"}, "matches", "a", condBad},
		{"matches int left", 1, "matches", "1", condBad},
		{"!matches", "bob", "!matches", "a.*", true},
		{"!matches hit", "alice", "!matches", "a.*", false},
		{"!matches bad regexp", "a", "!matches", "(", condBad},
		// in
		{"in hit", "b", "in", "a, b,c", true},
		{"in miss", "d", "in", "a, b,c", false},
		{"in quoted comma", "a,b", "in", `"a,b", c`, true},
		{"in escaped comma", "a,b", "in", `a\,b, c`, true},
		{"in escaped quote", `a"b`, "in", `"a\"b"`, true},
		{"in quote mid field literal", `a"b`, "in", `a"b,c`, true},
		{"in text after quote", "abcd", "in", `"ab"cd`, true},
		{"in leading space skipped", " b", "in", "a, b", false},
		{"in trailing space kept", "a", "in", "a ,b", false},
		{"in trailing space value", "a ", "in", "a ,b", true},
		{"in empty item", "", "in", "a,,b", true},
		{"in unterminated quote", "a", "in", `"a`, condBad},
		{"in trailing escape", "a", "in", `a\`, condBad},
		{"in line break", "a", "in", "a\nb", condBad},
		{"in int left", 5, "in", "5", false},
		{"in list left", []string{"a"}, "in", "a", false},
		{"in bad csv int left", 5, "in", `"5`, condBad},
		{"!in hit", "a", "!in", "a,b", false},
		{"!in miss", "c", "!in", "a,b", true},
		{"!in int left", 5, "!in", "5", true},
		// < and >
		{"< strings", "5", "<", "10", true},
		{"< int", 5, "<", "10", true},
		{"< equal", 10, "<", "10", false},
		{"> int", 11, ">", "10", true},
		{"> negative", "-3", ">", "-4", true},
		{"< empty string is 0", "", "<", "1", true},
		{"< false is 0", false, "<", "1", true},
		{"> true is 1", true, ">", "0", true},
		{"< empty list is 0", []string{}, "<", "1", true},
		{"< nil is 0", nil, "<", "1", true},
		{"< list", []string{"1"}, "<", "2", condBad},
		{"< not integer", "abc", "<", "1", condBad},
		{"< decimal string", "1.5", "<", "2", condBad},
		{"< right not integer", 1, "<", "x", condBad},
		{"< right decimal", 1, "<", "2.0", condBad},
		{"> spaces", " 7 ", ">", " 6 ", true},
		{"< float truncated", 3.9, "<", "4", true},
		{"> float truncated", 4.9, ">", "4", false},
		{"< NaN", math.NaN(), "<", "1", condBad},
		{"< Inf", math.Inf(1), "<", "1", condBad},
		{"> json number", json.Number("12"), ">", "11", true},
		{"> uint8", uint8(200), ">", "199", true},
		{"< int64 min", int64(math.MinInt64), "<", "0", true},
		{"< overflow", "99999999999999999999", "<", "1", condBad},
		{"< map", map[string]any{"a": 1}, "<", "1", condBad},
		// date_before / date_after
		{"date_before dates", "2024-01-01", "date_before", "2024-06-01", true},
		{"date_before equal", "2024-01-01", "date_before", "2024-01-01", false},
		{"date_before aware", "2024-01-01T10:00:00+02:00", "date_before", "2024-01-01T09:00:00Z", true},
		{"date_before aware reversed", "2024-01-01T10:00:00-02:00", "date_before", "2024-01-01T09:00:00Z", false},
		{"date_before naive times", "2024-01-01 10:00", "date_before", "2024-01-01T10:00:01", true},
		{"date_before fraction", "2024-01-01T10:00:00.5", "date_before", "2024-01-01T10:00:00.6", true},
		{"date_before hour only", "2024-01-01T09", "date_before", "2024-01-01T10", true},
		{"date_before offset forms", "2024-01-01T10:00+0100", "date_before", "2024-01-01T10:00+02", false},
		{"date_before 24:00", "2024-01-01T24:00", "date_before", "2024-01-02T00:00:01", true},
		{"date_before naive vs aware", "2024-01-01", "date_before", "2024-06-01T00:00:00Z", condBad},
		{"date_before aware vs naive", "2024-01-01T00:00Z", "date_before", "2024-06-01", condBad},
		{"date_before time.Time left", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), "date_before", "2024-06-01T00:00:00+00:00", true},
		{"date_before time.Time vs naive", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), "date_before", "2024-06-01", condBad},
		{"date_before short", "2024-1-1", "date_before", "2024-06-01", condBad},
		{"date_before year only", "2024", "date_before", "2025", condBad},
		{"date_before bad day", "2024-02-30", "date_before", "2024-06-01", condBad},
		{"date_before leap day", "2024-02-29", "date_before", "2024-06-01", true},
		{"date_before year zero", "0000-01-01", "date_before", "2024-06-01", condBad},
		{"date_before bad right", "2024-01-01", "date_before", "tomorrow", condBad},
		{"date_before int left", 20240101, "date_before", "2024-06-01", condBad},
		{"date_before list left", []string{"2024-01-01"}, "date_before", "2024-06-01", condBad},
		{"date_before trailing junk", "2024-01-01x", "date_before", "2024-06-01", condBad},
		{"date_before bad hour", "2024-01-01T25:00", "date_before", "2024-06-01", condBad},
		{"date_before bad offset", "2024-01-01T10:00+2", "date_before", "2024-06-01T00:00Z", condBad},
		{"date_after dates", "2024-06-01", "date_after", "2024-01-01", true},
		{"date_after equal", "2024-06-01", "date_after", "2024-06-01", false},
		{"date_after aware", "2024-01-01T10:00:00+02:00", "date_after", "2024-01-01T07:59:59Z", true},
		{"date_after mixed", "2024-06-01", "date_after", "2024-01-01T00:00Z", condBad},
		// date_within_last (now is 2025-06-15 12:00 UTC)
		{"within 7d", "2025-06-10", "date_within_last", "7d", true},
		{"not within 7d", "2025-06-01", "date_within_last", "7d", false},
		{"within naive is utc", "2025-06-15T11:30:00", "date_within_last", "1h", true},
		{"within aware", "2025-06-15T11:30:00+01:00", "date_within_last", "1h", false},
		{"within aware z", "2025-06-15T11:30:00Z", "date_within_last", "1h", true},
		{"within minutes", "2025-06-15T11:50:00Z", "date_within_last", "15m", true},
		{"within seconds", "2025-06-15T11:59:00Z", "date_within_last", "30s", false},
		{"within year", "2024-07-01", "date_within_last", "1y", true},
		{"within sum", "2025-06-14T01:00:00Z", "date_within_last", "1d 12h", true},
		{"within sum short", "2025-06-13T23:00:00Z", "date_within_last", "1d12h", false},
		{"within boundary excluded", "2025-06-15T11:00:00Z", "date_within_last", "1h", false},
		{"within spaces", "2025-06-15T11:30:00Z", "date_within_last", " 1 h ", true},
		{"within future date", "2026-01-01", "date_within_last", "1d", true},
		{"within negative", "2025-06-15T13:00:00Z", "date_within_last", "-30m", true},
		{"within time.Time", condNow.Add(-time.Minute), "date_within_last", "2m", true},
		{"within bad unit", "2025-06-10", "date_within_last", "7x", condBad},
		{"within upper unit", "2025-06-10", "date_within_last", "7D", condBad},
		{"within no unit", "2025-06-10", "date_within_last", "7", condBad},
		{"within no number", "2025-06-10", "date_within_last", "d", condBad},
		{"within empty", "2025-06-10", "date_within_last", "", condBad},
		{"within huge", "2025-06-10", "date_within_last", "99999999999y", condBad},
		{"within bad date", "yesterday", "date_within_last", "7d", condBad},
		{"within int left", 5, "date_within_last", "7d", condBad},
		{"!within", "2025-06-01", "!date_within_last", "7d", true},
		{"!within hit", "2025-06-10", "!date_within_last", "7d", false},
		{"!within error", "x", "!date_within_last", "7d", condBad},
		// string_contains
		{"string_contains", "Hello World", "string_contains", "WORLD", true},
		{"string_contains miss", "Hello World", "string_contains", "planet", false},
		{"string_contains list", []string{"Hello"}, "string_contains", "hello", condBad},
		{"string_contains int", 5, "string_contains", "5", condBad},
		{"!string_contains", "Hello", "!string_contains", "bye", true},
		{"!string_contains hit", "Hello", "!string_contains", "ELL", false},
		{"!string_contains list", []string{"x"}, "!string_contains", "x", condBad},
		// unknown comparators
		{"alias refused", "a", "==", "a", condBad},
		{"empty comparator", "a", "", "a", condBad},
		{"bare bang", "a", "!", "a", condBad},
		{"negated <", 1, "!<", "2", condBad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := policy.Compare(tt.left, tt.op, tt.right, condNow)
			if tt.want == condBad {
				if err == nil {
					t.Fatalf("Compare(%#v %s %q) = %v, want an error", tt.left, tt.op, tt.right, got)
				}
				if !apierr.Is(err, apierr.Policy) {
					t.Errorf("error %v is not an apierr.Policy", err)
				}
				if got {
					t.Error("true with an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Compare(%#v %s %q): %v", tt.left, tt.op, tt.right, err)
			}
			if got != tt.want {
				t.Errorf("Compare(%#v %s %q) = %v, want %v", tt.left, tt.op, tt.right, got, tt.want)
			}
		})
	}
}

// condFullData offers every section, each with the key "k".
func condFullData() policy.ConditionData {
	return policy.ConditionData{
		UserInfo:      map[string]any{"k": "v", "groups": []string{"admins", "staff"}, "empty": "", "nil": nil},
		Token:         map[string]any{"k": "v", "otplen": 6},
		TokenInfo:     map[string]any{"k": "v"},
		Container:     map[string]any{"k": "v"},
		ContainerInfo: map[string]any{"k": "v"},
		Headers:       map[string][]string{"K": {"v", "second"}, "X-Empty": {}},
		Environment:   map[string]any{"k": "v"},
		RequestData:   map[string]any{"k": "v", "n": 3.0},
	}
}

func TestEvalConditionsMissingData(t *testing.T) {
	sections := []struct {
		section string
		obj     string
		clear   func(d *policy.ConditionData)
	}{
		{"userinfo", "user", func(d *policy.ConditionData) { d.UserInfo = nil }},
		{"token", "token", func(d *policy.ConditionData) { d.Token = nil }},
		{"tokeninfo", "token", func(d *policy.ConditionData) { d.TokenInfo = nil }},
		{"container", "container", func(d *policy.ConditionData) { d.Container = nil }},
		{"container_info", "container", func(d *policy.ConditionData) { d.ContainerInfo = nil }},
		{"HTTP Request header", "HTTP Request header", func(d *policy.ConditionData) { d.Headers = nil }},
		{"HTTP Environment", "HTTP Environment", func(d *policy.ConditionData) { d.Environment = nil }},
		{"Request Data", "Request Data", func(d *policy.ConditionData) { d.RequestData = nil }},
	}
	for _, s := range sections {
		for _, mode := range []string{"", policy.MissingRaise, policy.MissingTrue, policy.MissingFalse} {
			cond := policy.Condition{Section: s.section, Key: "k", Comparator: "equals", Value: "v", Active: true, MissingData: mode}
			t.Run(s.section+"/present/"+mode, func(t *testing.T) {
				ok, err := policy.EvalConditions("pol", []policy.Condition{cond}, condFullData(), condNow)
				if err != nil || !ok {
					t.Fatalf("= %v, %v; want true", ok, err)
				}
			})
			t.Run(s.section+"/unavailable/"+mode, func(t *testing.T) {
				d := condFullData()
				s.clear(&d)
				ok, err := policy.EvalConditions("pol", []policy.Condition{cond}, d, condNow)
				condCheckMissing(t, mode, ok, err,
					"Policy 'pol' has a condition on the section '"+s.section+"' with key 'k', but a "+s.obj+" is unavailable!")
			})
			t.Run(s.section+"/unknown key/"+mode, func(t *testing.T) {
				c := cond
				c.Key = "absent"
				ok, err := policy.EvalConditions("pol", []policy.Condition{c}, condFullData(), condNow)
				condCheckMissing(t, mode, ok, err,
					"Unknown "+s.section+" key 'absent' referenced in condition of policy 'pol'!")
			})
		}
	}
	t.Run("nil value is missing", func(t *testing.T) {
		c := policy.Condition{Section: "userinfo", Key: "nil", Comparator: "equals", Value: "v", Active: true}
		_, err := policy.EvalConditions("pol", []policy.Condition{c}, condFullData(), condNow)
		condCheckMissing(t, "", false, err, "Unknown userinfo key 'nil' referenced in condition of policy 'pol'!")
	})
	t.Run("header without values is missing", func(t *testing.T) {
		c := policy.Condition{Section: "HTTP Request header", Key: "x-empty", Comparator: "equals", Value: "v", Active: true}
		_, err := policy.EvalConditions("pol", []policy.Condition{c}, condFullData(), condNow)
		condCheckMissing(t, "", false, err, "Unknown HTTP Request header key 'x-empty' referenced in condition of policy 'pol'!")
	})
	t.Run("unknown mode raises", func(t *testing.T) {
		c := policy.Condition{Section: "userinfo", Key: "k", Comparator: "equals", Value: "v", Active: true, MissingData: "bogus"}
		_, err := policy.EvalConditions("pol", []policy.Condition{c}, policy.ConditionData{}, condNow)
		condCheckMissing(t, "", false, err, "Policy 'pol' has a condition on the section 'userinfo' with key 'k', but a user is unavailable!")
	})
}

// condCheckMissing checks the outcome of a missing-data case for mode.
func condCheckMissing(t *testing.T, mode string, ok bool, err error, msg string) {
	t.Helper()
	switch mode {
	case policy.MissingTrue:
		if err != nil || !ok {
			t.Fatalf("= %v, %v; want true", ok, err)
		}
	case policy.MissingFalse:
		if err != nil || ok {
			t.Fatalf("= %v, %v; want false", ok, err)
		}
	default:
		e, isAPI := errors.AsType[*apierr.Error](err)
		if !isAPI || e.Code != apierr.Policy || e.Error() != msg {
			t.Fatalf("error = %#v, want Policy %q", err, msg)
		}
		if e.Status() != 403 || e.Message() != "ERR303: "+msg {
			t.Errorf("status %d message %q", e.Status(), e.Message())
		}
		if ok {
			t.Error("true with an error")
		}
	}
}

func TestEvalConditions(t *testing.T) {
	c := func(section, key, op, value string) policy.Condition {
		return policy.Condition{Section: section, Key: key, Comparator: op, Value: value, Active: true}
	}
	inactive := func(cd policy.Condition) policy.Condition { cd.Active = false; return cd }
	tests := []struct {
		name  string
		conds []policy.Condition
		data  policy.ConditionData
		want  bool
		err   string
	}{
		{"no conditions", nil, policy.ConditionData{}, true, ""},
		{"only inactive", []policy.Condition{inactive(c("userinfo", "k", "equals", "v"))}, policy.ConditionData{}, true, ""},
		{"inactive invalid ignored", []policy.Condition{inactive(c("nosuch", "", "bogus", ""))}, policy.ConditionData{}, true, ""},
		{"inactive false ignored", []policy.Condition{inactive(c("userinfo", "k", "equals", "other"))}, condFullData(), true, ""},
		{"all true", []policy.Condition{
			c("userinfo", "k", "equals", "v"),
			c("userinfo", "groups", "contains", "admins"),
			c("token", "otplen", ">", "4"),
		}, condFullData(), true, ""},
		{"one false", []policy.Condition{
			c("userinfo", "k", "equals", "v"),
			c("userinfo", "groups", "contains", "nobody"),
		}, condFullData(), false, ""},
		{"stops at first false", []policy.Condition{
			c("userinfo", "k", "equals", "other"),
			c("userinfo", "absent", "equals", "v"),
			c("userinfo", "k", "matches", "["),
		}, condFullData(), false, ""},
		{"error before false", []policy.Condition{
			c("userinfo", "k", "matches", "["),
			c("userinfo", "k", "equals", "other"),
		}, condFullData(), false, "Invalid comparison in the userinfo conditions of policy 'pol'"},
		{"comparison error token", []policy.Condition{c("token", "otplen", "contains", "6")}, condFullData(), false,
			"Invalid comparison in the token conditions of policy 'pol'"},
		{"comparison error header", []policy.Condition{c("HTTP Request header", "K", "<", "1")}, condFullData(), false,
			"Invalid comparison in the HTTP Request header conditions of policy 'pol'"},
		{"equals int column never", []policy.Condition{c("token", "otplen", "equals", "6")}, condFullData(), false, ""},
		{"empty string is a value", []policy.Condition{c("userinfo", "empty", "!equals", "x")}, condFullData(), true, ""},
		{"header case-insensitive", []policy.Condition{c("HTTP Request header", "k", "equals", "v")}, condFullData(), true, ""},
		{"header first value", []policy.Condition{c("HTTP Request header", "K", "equals", "second")}, condFullData(), false, ""},
		{"header lower-case map", []policy.Condition{c("HTTP Request header", "User-Agent", "string_contains", "curl")},
			policy.ConditionData{Headers: map[string][]string{"user-agent": {"curl/8.0"}}}, true, ""},
		{"header folded map", []policy.Condition{c("HTTP Request header", "x-forwarded-FOR", "equals", "1.2.3.4")},
			policy.ConditionData{Headers: map[string][]string{"X-FORWARDED-for": {"1.2.3.4"}}}, true, ""},
		{"environment", []policy.Condition{c("HTTP Environment", "k", "in", "a, v")}, condFullData(), true, ""},
		{"environment key is case-sensitive", []policy.Condition{c("HTTP Environment", "K", "equals", "v")}, condFullData(), false,
			"Unknown HTTP Environment key 'K' referenced in condition of policy 'pol'!"},
		{"request data as given", []policy.Condition{c("Request Data", "n", "<", "4")}, condFullData(), true, ""},
		{"request data float never equals", []policy.Condition{c("Request Data", "n", "equals", "3")}, condFullData(), false, ""},
		{"container info", []policy.Condition{c("container_info", "k", "string_contains", "V")}, condFullData(), true, ""},
		{"unknown section", []policy.Condition{c("nosuch", "k", "equals", "v")}, condFullData(), false,
			"Policy 'pol' has a condition with the unknown section 'nosuch'!"},
		{"unknown comparator", []policy.Condition{c("userinfo", "k", "==", "v")}, condFullData(), false,
			"Invalid comparison in the userinfo conditions of policy 'pol'"},
		{"missing true continues", []policy.Condition{
			{Section: "userinfo", Key: "absent", Comparator: "equals", Value: "v", Active: true, MissingData: policy.MissingTrue},
			c("userinfo", "k", "equals", "other"),
		}, condFullData(), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := policy.EvalConditions("pol", tt.conds, tt.data, condNow)
			if tt.err != "" {
				e, isAPI := errors.AsType[*apierr.Error](err)
				if !isAPI || e.Code != apierr.Policy || e.Error() != tt.err {
					t.Fatalf("error = %#v, want Policy %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if ok != tt.want {
				t.Errorf("= %v, want %v", ok, tt.want)
			}
		})
	}
}

// TestCompareRegexpCache runs one pattern from many goroutines; with -race
// it checks the cache.
func TestCompareRegexpCache(t *testing.T) {
	done := make(chan bool)
	for i := range 8 {
		go func() {
			ok := true
			for j := range 200 {
				p := "(?i)user[0-9]+" + strings.Repeat("x?", (i+j)%3)
				got, err := policy.Compare("USER42", "matches", p, condNow)
				ok = ok && err == nil && got
			}
			done <- ok
		}()
	}
	for range 8 {
		if !<-done {
			t.Error("wrong result under concurrency")
		}
	}
}

// condNegations maps each negated comparator to its base.
var condNegations = map[string]string{
	"!equals": "equals", "!contains": "contains", "!matches": "matches", "!in": "in",
	"!date_within_last": "date_within_last", "!string_contains": "string_contains",
}

func FuzzPolicyCondition(f *testing.F) {
	f.Add("userinfo", "email", "matches", ".*@example.com", "", true, "alice@example.com", uint8(0))
	f.Add("HTTP Request header", "User-Agent", "string_contains", "curl", "raise_error", true, "curl/8", uint8(1))
	f.Add("token", "otplen", "<", "8", "condition_is_true", true, "6", uint8(2))
	f.Add("Request Data", "x", "in", `"a,b", c`, "condition_is_false", true, "a,b", uint8(3))
	f.Add("tokeninfo", "last_auth", "date_within_last", "7d", "", true, "2025-06-10T10:00:00+02:00", uint8(4))
	f.Add("container", "k", "date_before", "2024-01-01", "", true, "2023-12-31", uint8(5))
	f.Add("userinfo", "groups", "contains", "admins", "", true, "admins", uint8(6))
	f.Add("x", "", "bogus", "", "weird", false, "", uint8(7))
	f.Add("userinfo", "k", "matches", `a)|(b`, "", true, "a", uint8(8))
	f.Add("HTTP Environment", "REMOTE_ADDR", "!in", `"unterminated`, "", true, "1.2.3.4", uint8(9))
	f.Fuzz(func(t *testing.T, section, key, comparator, value, missing string, active bool, s string, shape uint8) {
		var v any
		switch shape % 6 {
		case 0:
			v = s
		case 1:
			v = []string{s, strings.ToUpper(s)}
		case 2:
			v = len(s)
		case 3:
			v = len(s)%2 == 0
		case 4:
			v = []any{s, len(s)}
		case 5:
			v = nil
		}
		m := func(bit uint8) map[string]any {
			if shape&(1<<bit) != 0 {
				return nil
			}
			return map[string]any{key: v}
		}
		data := policy.ConditionData{
			UserInfo: m(3), Token: m(4), TokenInfo: m(4), Container: m(5), ContainerInfo: m(5),
			Environment: m(6), RequestData: m(7),
		}
		if shape&(1<<6) == 0 {
			data.Headers = map[string][]string{key: {s}}
		}
		c := policy.Condition{Section: section, Key: key, Comparator: comparator, Value: value, Active: active, MissingData: missing}
		if err := policy.ValidateCondition("p", c); err != nil && !apierr.Is(err, apierr.Parameter) {
			t.Fatalf("ValidateCondition error %#v", err)
		}
		ok, err := policy.EvalConditions("p", []policy.Condition{c}, data, condNow)
		if err != nil && (!apierr.Is(err, apierr.Policy) || ok) {
			t.Fatalf("EvalConditions = %v, %#v", ok, err)
		}
		got, err := policy.Compare(s, comparator, value, condNow)
		if err != nil && (!apierr.Is(err, apierr.Policy) || got) {
			t.Fatalf("Compare = %v, %#v", got, err)
		}
		if base, isNeg := condNegations[comparator]; isNeg {
			bgot, berr := policy.Compare(s, base, value, condNow)
			if (err == nil) != (berr == nil) || (err == nil && got == bgot) {
				t.Fatalf("%s not the negation of %s: %v,%v vs %v,%v", comparator, base, got, err, bgot, berr)
			}
		}
		// Oracle for in without quoting or escapes: split on commas, skip
		// leading spaces.
		if comparator == "in" && value != "" && !strings.ContainsAny(value, "\"\\\r\n") {
			want := slices.ContainsFunc(strings.Split(value, ","), func(it string) bool {
				return strings.TrimLeft(it, " ") == s
			})
			if err != nil || got != want {
				t.Fatalf("%q in %q = %v, %v; want %v", s, value, got, err, want)
			}
		}
		// Oracle for matches: the plain anchored pattern, where it means
		// the same (no \Q that would swallow the anchor).
		if comparator == "matches" && len(value) <= 1024 && !strings.Contains(value, `\Q`) {
			if _, e1 := regexp.Compile(value); e1 == nil {
				if re, e2 := regexp.Compile(`^(?:` + value + `)$`); e2 == nil {
					if err != nil || got != re.MatchString(s) {
						t.Fatalf("matches %q on %q = %v, %v; regexp says %v", value, s, got, err, re.MatchString(s))
					}
				}
			}
		}
	})
}

func BenchmarkEvalConditions(b *testing.B) {
	conds := []policy.Condition{
		{Section: "userinfo", Key: "email", Comparator: "matches", Value: `(?i).*@example\.com`, Active: true},
		{Section: "userinfo", Key: "groups", Comparator: "contains", Value: "staff", Active: true},
		{Section: "userinfo", Key: "department", Comparator: "in", Value: `sales, "r&d", it`, Active: true},
		{Section: "userinfo", Key: "mobile", Comparator: "!equals", Value: "", Active: true},
		{Section: "HTTP Request header", Key: "user-agent", Comparator: "string_contains", Value: "privacyidea-cp", Active: true},
	}
	data := policy.ConditionData{
		UserInfo: map[string]any{
			"email":      "Alice@Example.com",
			"groups":     []string{"admins", "staff"},
			"department": "it",
			"mobile":     "+49 123",
		},
		Headers: map[string][]string{
			"User-Agent": {"privacyidea-cp/2.0 Windows/Laptop"},
			"Accept":     {"*/*"},
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		ok, err := policy.EvalConditions("bench", conds, data, condNow)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}
