package otp

import (
	"crypto/md5"
	"crypto/subtle"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// MOTPLength is the length of a Mobile-OTP value.
const MOTPLength = 6

// motpStep is the Mobile-OTP time step in seconds.
const motpStep = 10

// MOTP returns the Mobile-OTP value at t: the first six hex digits of
// md5(decimal(unix(t)/10) + secret + pin), where secret is the init-secret
// string as the app shows it (hex) and pin the app PIN. Instants before the
// epoch count as step 0.
func MOTP(secret, pin string, t time.Time) string {
	return motpAt(secret, pin, TOTPCounter(t, motpStep, 0))
}

func motpAt(secret, pin string, step uint64) string {
	sum := md5.Sum([]byte(strconv.FormatUint(step, 10) + secret + pin))
	return hex.EncodeToString(sum[:])[:MOTPLength]
}

// CheckMOTP looks for otp among the 10-second steps T-w … T+w (symmetric,
// inclusive) with T = unix(now)/10 and w = windowSeconds/10, and returns the
// lowest matching step. When hasLast is set, a match at or below lastUsed is
// rejected as a replay; the caller stores the returned step. Hex case in otp
// is ignored. MD5 is the Mobile-OTP algorithm, not our choice.
func CheckMOTP(secret, pin, otp string, now time.Time, windowSeconds int, lastUsed uint64, hasLast bool) (step uint64, ok bool) {
	if len(otp) != MOTPLength {
		return 0, false
	}
	want := []byte(strings.ToLower(otp))
	w := uint64(max(windowSeconds/motpStep, 0))
	t := TOTPCounter(now, motpStep, 0)
	var found int
	var matched uint64
	for c := t - min(t, w); c <= t+w; c++ {
		eq := subtle.ConstantTimeCompare([]byte(motpAt(secret, pin, c)), want)
		take := eq &^ found
		mask := -uint64(take)
		matched = c&mask | matched&^mask
		found |= eq
	}
	if found == 0 || hasLast && matched <= lastUsed {
		return 0, false
	}
	return matched, true
}
