package validate_test

import (
	"testing"
	"time"

	"github.com/authsrv/authsrv/validate"
)

func TestParseDelta(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"5s": 5 * time.Second, "10m": 10 * time.Minute, "4h": 4 * time.Hour, "7d": 7 * 24 * time.Hour,
		"1y": 365 * 24 * time.Hour, "1d12h": 36 * time.Hour, " 2H ": 2 * time.Hour,
		"": 0, "h": 0, "4": 0, "4x": 0, "-1h": 0, "0s": 0, "99999999999999999999h": 0,
	} {
		got, ok := validate.ParseDelta(in)
		if got != want || ok != (want > 0) {
			t.Errorf("ParseDelta(%q) = %v %v, want %v", in, got, ok, want)
		}
	}
}

func TestPyDelta(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second: "0:00:05", time.Minute: "0:01:00", 10 * time.Hour: "10:00:00",
		25 * time.Hour: "1 day, 1:00:00", 49 * time.Hour: "2 days, 1:00:00", 1500 * time.Millisecond: "0:00:01.500000",
	} {
		if got := validate.PyDelta(d); got != want {
			t.Errorf("PyDelta(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestParseAuthCache(t *testing.T) {
	for _, tc := range []struct {
		in        string
		age, idle time.Duration
		uses      int
		ok        bool
	}{
		{"4h", 4 * time.Hour, 0, 0, true},
		{"4h/5m", 4 * time.Hour, 5 * time.Minute, 0, true},
		{"4h/3", 4 * time.Hour, 0, 3, true},
		{"4h/0", 0, 0, 0, false},
		{"4h/x", 0, 0, 0, false},
		{"x/3", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	} {
		age, idle, uses, ok := validate.ParseAuthCache(tc.in)
		if ok != tc.ok || (ok && (time.Duration(age) != tc.age || time.Duration(idle) != tc.idle || uses != tc.uses)) {
			t.Errorf("ParseAuthCache(%q) = %v %v %d %v", tc.in, time.Duration(age), time.Duration(idle), uses, ok)
		}
	}
}

func TestMangle(t *testing.T) {
	for _, tc := range []struct {
		spec                string
		login, realm, pass  string
		wLogin, wRealm, wPw string
		applied             bool
	}{
		{`user/@example\.com$//`, "alice@example.com", "r", "p", "alice", "r", "p", true},
		{`realm/^r(\d)$/realm\1/`, "a", "r1", "p", "a", "realm1", "p", true},
		{`realm/^r(\d)$/realm\g<1>x/`, "a", "r1", "p", "a", "realm1x", "p", true},
		{`pass/^(..)/$\1\\/`, "a", "r", "pw123", "a", "r", `$pw\123`, true},
		{`pass/x/y/`, "a", "r", "", "a", "r", "", false},    // empty parameters are left alone
		{`other/x/y/`, "a", "r", "x", "a", "r", "x", false}, // unknown key
		{`user/(/y/`, "a", "r", "x", "a", "r", "x", false},  // bad regexp
		{`user/a`, "a", "r", "x", "a", "r", "x", false},     // malformed
	} {
		login, realm, pass := tc.login, tc.realm, tc.pass
		applied := validate.Mangle(tc.spec, &login, &realm, &pass)
		if applied != tc.applied || login != tc.wLogin || realm != tc.wRealm || pass != tc.wPw {
			t.Errorf("Mangle(%q) = %q %q %q %v", tc.spec, login, realm, pass, applied)
		}
	}
}

func TestLastAuthFresh(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	stamp := now.Add(-30 * time.Minute).In(time.FixedZone("", 3600)).Format(validate.LastAuthLayout)
	for _, tc := range []struct {
		stored string
		fresh  bool
	}{
		{stamp, true},
		{"2026-03-01 11:30:00.000000+0000", true},
		{"2026-03-01 11:30:00+00:00", true},
		{"2026-03-01T11:30:00.123+00:00", true},
		{"2026-03-01 10:59:59.000000+0000", false},
		{"yesterday", false},
	} {
		if got := validate.LastAuthFresh(tc.stored, time.Hour, now); got != tc.fresh {
			t.Errorf("LastAuthFresh(%q) = %v", tc.stored, got)
		}
	}
}

// FuzzMangle: any policy value and parameters; mangle never panics and
// leaves the parameters alone when it does not apply.
func FuzzMangle(f *testing.F) {
	f.Add(`user/@example\.com$//`, "alice@example.com", "pin123")
	f.Add(`pass/^(..)/\g<1>\1$/`, "a", "pw")
	f.Add(`realm/(/x/`, "a", "b")
	f.Fuzz(func(t *testing.T, spec, login, pass string) {
		l, r, p := login, "realm1", pass
		if !validate.Mangle(spec, &l, &r, &p) && (l != login || r != "realm1" || p != pass) {
			t.Fatalf("not applied, but changed: %q %q %q", l, r, p)
		}
	})
}

// FuzzParseAuthCache: the policy value parser never panics and accepts
// only positive windows.
func FuzzParseAuthCache(f *testing.F) {
	for _, s := range []string{"4h", "4h/5m", "4h/3", "1d12h/0", "/", "9999999999999999999y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		age, idle, uses, ok := validate.ParseAuthCache(v)
		if ok && (age <= 0 || idle < 0 || uses < 0) {
			t.Fatalf("%q: %d %d %d", v, age, idle, uses)
		}
	})
}
