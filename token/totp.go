package token

import (
	"context"
	"strconv"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
)

// TOTP is the RFC 6238 time-based token (prefix TOTP).
type TOTP struct{}

// Name implements Type.
func (TOTP) Name() string { return "totp" }

// Prefix implements Type.
func (TOTP) Prefix() string { return "TOTP" }

// Enroll implements Type: as HOTP plus timeStep (30 or 60), timeWindow and
// timeShift.
func (TOTP) Enroll(ctx context.Context, e *Enroll) error {
	t, p := e.Token, e.Params
	set := e.Service.settings()
	step := set.TOTPTimeStep
	if v := p.Str("timeStep"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || (n != 30 && n != 60) {
			return paramErr("timeStep must be 30 or 60")
		}
		step = n
	} else if e.New || t.Info[InfoTimeStep] == "" {
		step = set.TOTPTimeStep
	} else {
		step = t.InfoInt(InfoTimeStep, step)
	}
	t.SetInfo(InfoTimeStep, strconv.Itoa(step))
	if v := p.Str("timeWindow"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 3600 {
			return paramErr("timeWindow must be a number of seconds from 0 to 3600")
		}
		t.SetInfo(InfoTimeWindow, strconv.Itoa(n))
	} else if t.Info[InfoTimeWindow] == "" {
		t.SetInfo(InfoTimeWindow, strconv.Itoa(set.TOTPTimeWindow))
	}
	if v := p.Str("timeShift"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < -86400 || f > 86400 {
			return paramErr("timeShift must be a number of seconds from -86400 to 86400")
		}
		t.SetInfo(InfoTimeShift, strconv.Itoa(int(f)))
	} else if t.Info[InfoTimeShift] == "" {
		t.SetInfo(InfoTimeShift, "0")
	}
	return enrollOATH(e, "totp", step)
}

func (s *Service) totpParams(t *Token) (step, window, shift int) {
	set := s.settings()
	step = t.InfoInt(InfoTimeStep, set.TOTPTimeStep)
	if step <= 0 {
		step = set.TOTPTimeStep
	}
	window = t.InfoInt(InfoTimeWindow, set.TOTPTimeWindow)
	shift = t.InfoInt(InfoTimeShift, 0)
	return step, window, shift
}

// Check implements Type: the asymmetric window around now+timeShift; a
// step at or below the last used one is refused; success stores the step
// and the new timeShift. With AutoResync a miss is looked for in the sync
// window.
func (TOTP) Check(ctx context.Context, c *Check) (Match, error) {
	key, err := c.Key()
	if err != nil || key == nil {
		return Match{Counter: -1}, err
	}
	t := c.Token
	step, window, shift := c.Service.totpParams(t)
	n, drift, ok := otp.FindTOTP(key, c.OTP, c.Now, step, window, shift, t.OTPLen, t.Hash())
	if !ok {
		if c.Service.settings().AutoResync {
			if rm, found := c.Service.totpAutoResync(c, key, step); found {
				return rm, nil
			}
		}
		return Match{Counter: -1}, nil
	}
	if t.Count != 0 && n <= t.Count {
		return Match{Counter: int64(n), Message: MsgReplayed}, nil
	}
	return Match{OK: true, Counter: int64(n), Apply: totpAdvance(n, drift)}, nil
}

func totpAdvance(n uint64, drift int) func(*Token) bool {
	return func(t *Token) bool {
		if t.Count != 0 && n <= t.Count {
			return false
		}
		t.Count = n
		t.SetInfo(InfoTimeShift, strconv.Itoa(drift))
		return true
	}
}

// Resync implements Resyncer: both values searched ±sync_window steps
// around now, consecutive and newer than the stored step.
func (TOTP) Resync(ctx context.Context, s *Service, t *Token, otp1, otp2 string, now time.Time) (func(*Token) bool, bool, error) {
	key, err := s.Secret(t, FieldKey)
	if err != nil || key == nil {
		return nil, false, err
	}
	step, _, _ := s.totpParams(t)
	sync := t.SyncWindow
	if sync <= 0 {
		sync = s.settings().DefaultSyncWindow
	}
	center := otp.TOTPCounter(now, step, 0)
	from := center - min(center, uint64(sync))
	c1, ok := otp.CheckHOTP(key, otp1, from, 2*sync, t.OTPLen, t.Hash())
	if !ok || (t.Count != 0 && c1 <= t.Count) {
		return nil, false, nil
	}
	if _, ok := otp.CheckHOTP(key, otp2, c1+1, 1, t.OTPLen, t.Hash()); !ok {
		return nil, false, nil
	}
	c2 := c1 + 1
	drift := int(int64(c2)*int64(step) - now.Unix())
	return totpAdvance(c2, drift), true, nil
}
