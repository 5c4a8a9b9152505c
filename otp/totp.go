package otp

import "time"

// Defaults of privacyIDEA's time-based tokens, in seconds.
const (
	DefaultTimeStep        = 30
	DefaultTimeWindow      = 180
	DefaultDayPasswordStep = 86400
)

// TOTPCounter returns the time step of t: floor((unix(t) + shift) / step),
// with T0 = 0 (RFC 6238 §4.2). shift is privacyIDEA's timeShift, which
// re-centres the window on the token's clock. Instants before the epoch and a
// step <= 0 give 0.
func TOTPCounter(t time.Time, step int, shift int) uint64 {
	if step <= 0 {
		return 0
	}
	s := t.Unix() + int64(shift)
	if s < 0 {
		return 0
	}
	return uint64(s) / uint64(step)
}

// TOTP returns the RFC 6238 value of key at t: the HOTP value at
// TOTPCounter(t, step, shift). It returns "" for a step <= 0 or invalid digits
// or hash.
func TOTP(key []byte, t time.Time, step, shift int, digits int, h Hash) string {
	if step <= 0 {
		return ""
	}
	return HOTP(key, TOTPCounter(t, step, shift), digits, h)
}

// FindTOTP looks for otp in privacyIDEA's asymmetric window and ignores
// replay: the candidates are T-w … T+w-1 with T = TOTPCounter(now, step,
// shift) and w = window/step (window in seconds, e.g. 180 s / 30 s = 6 steps,
// 12 candidates). A window shorter than one step still checks T-1 and T.
//
// It returns the lowest matching step and the drift matched*step − now in
// seconds, which privacyIDEA stores as the token's new timeShift. Callers
// that must tell "previous OTP used again" from "wrong OTP" call it after
// CheckTOTP failed.
func FindTOTP(key []byte, otp string, now time.Time, step, window, shift int, digits int, h Hash) (matched uint64, drift int, ok bool) {
	g, valid := newGenerator(key, digits, h)
	if !valid || step <= 0 || len(otp) != digits {
		return 0, 0, false
	}
	w := uint64(max(window/step, 1))
	t := TOTPCounter(now, step, shift)
	lo := t - min(t, w)
	hi := t + w - 1 // inclusive; no overflow for any real time step
	matched, ok = g.search(otp, lo, hi-lo+1)
	if !ok {
		return 0, 0, false
	}
	return matched, int(int64(matched)*int64(step) - now.Unix()), true
}

// CheckTOTP is FindTOTP with RFC 6238 §5.2 replay protection: when hasLast is
// set, a match at or below lastUsed (the step stored after the previous
// success) is rejected, as privacyIDEA rejects res <= stored count. On success
// the caller stores matched as the new last used step (not matched+1) and
// drift as the new timeShift.
func CheckTOTP(key []byte, otp string, now time.Time, step, window, shift int, lastUsed uint64, hasLast bool, digits int, h Hash) (matched uint64, drift int, ok bool) {
	matched, drift, ok = FindTOTP(key, otp, now, step, window, shift, digits, h)
	if !ok || hasLast && matched <= lastUsed {
		return 0, 0, false
	}
	return matched, drift, true
}

// DayPassword returns the value of privacyIDEA's day-password token at t: the
// HOTP value at floor(unix(t)/step), the same during a whole period of step
// seconds (DefaultDayPasswordStep for a day). It returns "" for a step <= 0.
func DayPassword(key []byte, t time.Time, step int, digits int, h Hash) string {
	if step <= 0 {
		return ""
	}
	return HOTP(key, TOTPCounter(t, step, 0), digits, h)
}

// CheckDayPassword reports whether otp is the day password of the current
// period and returns that period's step. The value stays valid for the whole
// period, so there is no replay check: that is the token type's contract.
func CheckDayPassword(key []byte, otp string, now time.Time, step int, digits int, h Hash) (matched uint64, ok bool) {
	if step <= 0 {
		return 0, false
	}
	return CheckHOTP(key, otp, TOTPCounter(now, step, 0), 1, digits, h)
}
