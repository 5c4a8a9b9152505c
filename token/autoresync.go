package token

import (
	"strconv"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
)

// Tokeninfo keys of AutoResync: the counter (HOTP) or time step (TOTP) of a
// remembered first value and the Unix time until which the second value
// may follow. The OTP value itself is never stored.
const (
	InfoOTP1C   = "otp1c"
	InfoDueDate = "dueDate"
)

// pendingResync returns the remembered first value of t, if any.
func pendingResync(t *Token) (counter uint64, due time.Time, ok bool) {
	cs, ok1 := t.Info[InfoOTP1C]
	ds, ok2 := t.Info[InfoDueDate]
	if !ok1 || !ok2 {
		return 0, time.Time{}, false
	}
	c, err := strconv.ParseUint(cs, 10, 64)
	if err != nil {
		return 0, time.Time{}, false
	}
	d, err := strconv.ParseInt(ds, 10, 64)
	if err != nil {
		return 0, time.Time{}, false
	}
	return c, time.Unix(d, 0), true
}

func clearResync(t *Token) {
	delete(t.Info, InfoOTP1C)
	delete(t.Info, InfoDueDate)
}

// syncWindow is the token's sync_window, or the system default.
func (s *Service) syncWindow(t *Token) int {
	if t.SyncWindow > 0 {
		return t.SyncWindow
	}
	return s.settings().DefaultSyncWindow
}

// autoResync turns a value found at counter n of the sync window into a
// Match (privacyIDEA's AutoResync, spec 5.4). When n directly follows a
// remembered first value whose due date has not passed, the Match is a
// success whose Apply checks again, on the fresh token, that the first
// value is still remembered and still unused, forgets it and advances the
// token with advance. Otherwise the Match is a failure whose Remember
// stores n as the first value, if n is still unused then. unused reports
// whether counter c of the fresh token was never accepted.
func (s *Service) autoResync(c *Check, n uint64, unused func(t *Token, c uint64) bool, advance func(t *Token) bool) Match {
	now := c.Now
	if prev, due, ok := pendingResync(c.Token); ok && n == prev+1 && now.Before(due) && unused(c.Token, prev) {
		return Match{OK: true, Counter: int64(n), Apply: func(t *Token) bool {
			p, d, ok := pendingResync(t)
			if !ok || p+1 != n || !now.Before(d) || !unused(t, p) {
				return false
			}
			clearResync(t)
			return advance(t)
		}}
	}
	due := strconv.FormatInt(now.Add(s.settings().AutoResyncTimeout).Unix(), 10)
	return Match{Counter: -1, Remember: func(t *Token) {
		if unused(t, n) {
			t.SetInfo(InfoOTP1C, strconv.FormatUint(n, 10))
			t.SetInfo(InfoDueDate, due)
		}
	}}
}

// hotpAutoResync looks for the OTP in the sync window after the count
// window missed: HOTP counters count … count+sync_window-1. A value is
// unused while the stored next-expected counter has not passed it; the
// success stores c+1 as for a normal match.
func (s *Service) hotpAutoResync(c *Check, key []byte) (Match, bool) {
	t := c.Token
	n, ok := otp.CheckHOTP(key, c.OTP, t.Count, s.syncWindow(t), t.OTPLen, t.Hash())
	if !ok {
		return Match{}, false
	}
	unused := func(t *Token, c uint64) bool { return t.Count <= c }
	return s.autoResync(c, n, unused, advanceTo(n)), true
}

// totpAutoResync looks for the OTP in sync_window steps either side of
// now (without the stored timeShift, as /token/resync does), only among
// steps newer than the last used one: an old value never takes part. The
// success stores the step and the new timeShift as a normal match does.
func (s *Service) totpAutoResync(c *Check, key []byte, step int) (Match, bool) {
	t := c.Token
	sync := uint64(s.syncWindow(t))
	center := otp.TOTPCounter(c.Now, step, 0)
	from, end := center-min(center, sync), center+sync
	if t.Count != 0 && from <= t.Count {
		from = t.Count + 1
	}
	if from >= end {
		return Match{}, false
	}
	n, ok := otp.CheckHOTP(key, c.OTP, from, int(end-from), t.OTPLen, t.Hash())
	if !ok {
		return Match{}, false
	}
	unused := func(t *Token, c uint64) bool { return t.Count == 0 || c > t.Count }
	drift := int(int64(n)*int64(step) - c.Now.Unix())
	return s.autoResync(c, n, unused, totpAdvance(n, drift)), true
}
