package otp_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/authsrv/authsrv/otp"
)

// RFC 6238 Appendix B, as tabulated in spec §7.2 (step 30 s, T0 = 0, 8 digits).
var rfc6238 = []struct {
	unix                 int64
	step                 uint64
	sha1, sha256, sha512 string
}{
	{59, 0x1, "94287082", "46119246", "90693936"},
	{1111111109, 0x23523EC, "07081804", "68084774", "25091201"},
	{1111111111, 0x23523ED, "14050471", "67062674", "99943326"},
	{1234567890, 0x273EF07, "89005924", "91819424", "93441116"},
	{2000000000, 0x3F940AA, "69279037", "90698825", "38618901"},
	{20000000000, 0x27BC86AA, "65353130", "77737706", "47863826"},
}

var rfc6238Keys = map[otp.Hash][]byte{
	otp.SHA1:   []byte("12345678901234567890"),
	otp.SHA256: []byte("12345678901234567890123456789012"),
	otp.SHA512: []byte("1234567890123456789012345678901234567890123456789012345678901234"),
}

func TestTOTPRFC6238(t *testing.T) {
	for _, tc := range rfc6238 {
		now := time.Unix(tc.unix, 0)
		for h, want := range map[otp.Hash]string{otp.SHA1: tc.sha1, otp.SHA256: tc.sha256, otp.SHA512: tc.sha512} {
			key := rfc6238Keys[h]
			t.Run(fmt.Sprintf("%d/%s", tc.unix, h), func(t *testing.T) {
				if got := otp.TOTPCounter(now, 30, 0); got != tc.step {
					t.Errorf("TOTPCounter = %#x, want %#x", got, tc.step)
				}
				if got := otp.TOTP(key, now, 30, 0, 8, h); got != want {
					t.Errorf("TOTP = %q, want %q", got, want)
				}
				if got := otp.TOTP(key, now, 30, 0, 6, h); got != want[2:] {
					t.Errorf("6-digit TOTP = %q, want %q", got, want[2:])
				}
				m, drift, ok := otp.CheckTOTP(key, want, now, 30, 180, 0, 0, false, 8, h)
				wantDrift := int(int64(tc.step)*30 - tc.unix)
				if !ok || m != tc.step || drift != wantDrift {
					t.Errorf("CheckTOTP = %#x, %d, %v; want %#x, %d, true", m, drift, ok, tc.step, wantDrift)
				}
			})
		}
	}
}

func TestTOTPCounter(t *testing.T) {
	tests := []struct {
		name        string
		unix        int64
		step, shift int
		want        uint64
	}{
		{"start of step", 60, 30, 0, 2},
		{"end of step", 89, 30, 0, 2},
		{"step 60", 119, 60, 0, 1},
		{"positive shift", 59, 30, 1, 2},
		{"negative shift", 60, 30, -1, 1},
		{"before epoch", -1, 30, 0, 0},
		{"shift before epoch", 10, 30, -100, 0},
		{"zero step", 100, 0, 0, 0},
		{"negative step", 100, -30, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := otp.TOTPCounter(time.Unix(tc.unix, 0), tc.step, tc.shift); got != tc.want {
				t.Errorf("TOTPCounter = %d, want %d", got, tc.want)
			}
		})
	}
	// Sub-second parts do not move the step.
	if got := otp.TOTPCounter(time.Unix(59, 999_999_999), 30, 0); got != 1 {
		t.Errorf("TOTPCounter(59.999 s) = %d, want 1", got)
	}
}

func TestCheckTOTP(t *testing.T) {
	const step = 30
	now := time.Unix(1767225600, 0) // 2026-01-01T00:00:00Z, a multiple of 30 and 60
	T := otp.TOTPCounter(now, step, 0)
	at := func(c uint64) string { return otp.HOTP(rfcKey, c, 6, otp.SHA1) }
	tests := []struct {
		name      string
		otp       string
		step      int
		window    int
		shift     int
		lastUsed  uint64
		hasLast   bool
		want      uint64
		wantDrift int
		wantOK    bool
	}{
		{"current step", at(T), step, 180, 0, 0, false, T, 0, true},
		{"oldest step T-w", at(T - 6), step, 180, 0, 0, false, T - 6, -180, true},
		{"newest step T+w-1", at(T + 5), step, 180, 0, 0, false, T + 5, 150, true},
		{"T-w-1 outside", at(T - 7), step, 180, 0, 0, false, 0, 0, false},
		{"T+w outside (asymmetric)", at(T + 6), step, 180, 0, 0, false, 0, 0, false},
		{"window 60 s: T-2", at(T - 2), step, 60, 0, 0, false, T - 2, -60, true},
		{"window 60 s: T+2 outside", at(T + 2), step, 60, 0, 0, false, 0, 0, false},
		{"window below a step still checks T-1", at(T - 1), step, 10, 0, 0, false, T - 1, -30, true},
		{"window below a step still checks T", at(T), step, 0, 0, 0, false, T, 0, true},
		{"window below a step: T+1 outside", at(T + 1), step, 10, 0, 0, false, 0, 0, false},
		{"replay of last used step", at(T), step, 180, 0, T, true, 0, 0, false},
		{"older than last used step", at(T - 1), step, 180, 0, T, true, 0, 0, false},
		{"newer than last used step", at(T + 1), step, 180, 0, T, true, T + 1, 30, true},
		{"lastUsed ignored without hasLast", at(T), step, 180, 0, T, false, T, 0, true},
		{"token ahead: positive drift", at(T + 3), step, 180, 0, 0, false, T + 3, 90, true},
		{"token behind: negative drift", at(T - 3), step, 180, 0, 0, false, T - 3, -90, true},
		{"shift re-centres the window", at(T + 10), step, 180, 300, 0, false, T + 10, 300, true},
		{"without shift out of window", at(T + 10), step, 180, 0, 0, false, 0, 0, false},
		{"negative shift", at(T - 10), step, 180, -300, 0, false, T - 10, -300, true},
		{"step 60", at(T/2 - 1), 60, 180, 0, 0, false, T/2 - 1, -60, true},
		{"wrong otp", "000000", step, 180, 0, 0, false, 0, 0, false},
		{"wrong length", otp.HOTP(rfcKey, T, 8, otp.SHA1), step, 180, 0, 0, false, 0, 0, false},
		{"zero step", at(T), 0, 180, 0, 0, false, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, drift, ok := otp.CheckTOTP(rfcKey, tc.otp, now, tc.step, tc.window, tc.shift, tc.lastUsed, tc.hasLast, 6, otp.SHA1)
			if m != tc.want || drift != tc.wantDrift || ok != tc.wantOK {
				t.Errorf("CheckTOTP = %d, %d, %v; want %d, %d, %v", m, drift, ok, tc.want, tc.wantDrift, tc.wantOK)
			}
		})
	}
}

func TestCheckTOTPDriftWithinStep(t *testing.T) {
	// privacyIDEA stores matched*step − now, so a synchronised token seen 20 s
	// into its step gets timeShift −20.
	now := time.Unix(1767225620, 0)
	v := otp.TOTP(rfcKey, now, 30, 0, 6, otp.SHA1)
	m, drift, ok := otp.CheckTOTP(rfcKey, v, now, 30, 180, 0, 0, false, 6, otp.SHA1)
	if !ok || m != 1767225600/30 || drift != -20 {
		t.Errorf("CheckTOTP = %d, %d, %v; want %d, -20, true", m, drift, ok, 1767225600/30)
	}
}

func TestCheckTOTPNearEpoch(t *testing.T) {
	// The window is clipped at step 0 instead of wrapping.
	now := time.Unix(45, 0) // T = 1
	v := otp.HOTP(rfcKey, 0, 6, otp.SHA1)
	m, drift, ok := otp.CheckTOTP(rfcKey, v, now, 30, 180, 0, 0, false, 6, otp.SHA1)
	if !ok || m != 0 || drift != -45 {
		t.Errorf("CheckTOTP = %d, %d, %v; want 0, -45, true", m, drift, ok)
	}
}

func TestFindTOTPReportsReplay(t *testing.T) {
	now := time.Unix(1767225600, 0)
	T := otp.TOTPCounter(now, 30, 0)
	v := otp.HOTP(rfcKey, T, 6, otp.SHA1)
	if _, _, ok := otp.CheckTOTP(rfcKey, v, now, 30, 180, 0, T, true, 6, otp.SHA1); ok {
		t.Fatal("CheckTOTP accepted a replay")
	}
	m, _, ok := otp.FindTOTP(rfcKey, v, now, 30, 180, 0, 6, otp.SHA1)
	if !ok || m != T {
		t.Errorf("FindTOTP = %d, %v; want %d, true (the caller sees the replay)", m, ok, T)
	}
}

func TestDayPassword(t *testing.T) {
	const day = otp.DefaultDayPasswordStep
	start := time.Unix(1767225600, 0) // midnight UTC, a multiple of 86400
	D := uint64(1767225600 / day)
	v := otp.DayPassword(rfcKey, start, day, 6, otp.SHA1)
	if want := otp.HOTP(rfcKey, D, 6, otp.SHA1); v != want {
		t.Fatalf("DayPassword = %q, want HOTP at day %d = %q", v, D, want)
	}
	tests := []struct {
		name   string
		now    time.Time
		step   int
		want   uint64
		wantOK bool
	}{
		{"start of the day", start, day, D, true},
		{"end of the day", start.Add(day*time.Second - time.Nanosecond), day, D, true},
		{"reusable within the day", start.Add(12 * time.Hour), day, D, true},
		{"next day", start.Add(day * time.Second), day, 0, false},
		{"previous day", start.Add(-time.Second), day, 0, false},
		{"zero step", start, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := otp.CheckDayPassword(rfcKey, v, tc.now, tc.step, 6, otp.SHA1)
			if m != tc.want || ok != tc.wantOK {
				t.Errorf("CheckDayPassword = %d, %v; want %d, %v", m, ok, tc.want, tc.wantOK)
			}
		})
	}
	if got := otp.DayPassword(rfcKey, start, 0, 6, otp.SHA1); got != "" {
		t.Errorf("DayPassword with step 0 = %q, want empty", got)
	}
}
