package token

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
)

// DayPassword is privacyIDEA's day-password token (prefix DAYP): the HOTP
// value of the current period (a day by default), valid for the whole
// period and therefore usable more than once, which is the type's
// contract.
type DayPassword struct{}

var _ Type = DayPassword{}

// maxDayPasswordStep bounds timeStep to one year.
const maxDayPasswordStep = 366 * 86400

// Name implements Type.
func (DayPassword) Name() string { return "daypassword" }

// Prefix implements Type.
func (DayPassword) Prefix() string { return "DAYP" }

// Enroll implements Type: as HOTP (otpkey or genkey, otplen, hashlib) plus
// timeStep, the period in seconds (86400 by default; "90", "90s", "30m",
// "24h" and "1d" are accepted). The detail has otpkey, googleurl and
// oathurl with the period.
func (DayPassword) Enroll(ctx context.Context, e *Enroll) error {
	t := e.Token
	step := otp.DefaultDayPasswordStep
	if v, ok := e.Params.Get(InfoTimeStep); ok && strings.TrimSpace(v) != "" {
		n, err := parseDayStep(v)
		if err != nil {
			return err
		}
		step = n
	} else if !e.New && t.InfoInt(InfoTimeStep, 0) > 0 {
		step = t.InfoInt(InfoTimeStep, step)
	}
	t.SetInfo(InfoTimeStep, strconv.Itoa(step))
	return enrollOATH(e, "daypassword", step)
}

// parseDayStep reads a period: whole seconds, or a number with the unit
// s, m, h or d.
func parseDayStep(v string) (int, error) {
	v = strings.ToLower(strings.TrimSpace(v))
	unit := time.Second
	switch {
	case strings.HasSuffix(v, "d"):
		unit, v = 24*time.Hour, strings.TrimSuffix(v, "d")
	case strings.HasSuffix(v, "h"):
		unit, v = time.Hour, strings.TrimSuffix(v, "h")
	case strings.HasSuffix(v, "m"):
		unit, v = time.Minute, strings.TrimSuffix(v, "m")
	case strings.HasSuffix(v, "s"):
		v = strings.TrimSuffix(v, "s")
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 || int64(n) > int64(maxDayPasswordStep)*int64(time.Second)/int64(unit) {
		return 0, paramErr("timeStep must be a positive period of at most a year, in seconds or with a unit (s, m, h, d)")
	}
	return n * int(unit/time.Second), nil
}

// Check implements Type: the OTP must be the value of the current period.
// The matched period is reported as the counter; nothing is advanced, so
// the value can be used again within the period.
func (DayPassword) Check(ctx context.Context, c *Check) (Match, error) {
	key, err := c.Key()
	if err != nil || key == nil {
		return Match{Counter: -1}, err
	}
	t := c.Token
	step := t.InfoInt(InfoTimeStep, otp.DefaultDayPasswordStep)
	if step <= 0 {
		step = otp.DefaultDayPasswordStep
	}
	n, ok := otp.CheckDayPassword(key, c.OTP, c.Now, step, t.OTPLen, t.Hash())
	if !ok {
		return Match{Counter: -1}, nil
	}
	return Match{OK: true, Counter: int64(n)}, nil
}

// EnrollVia implements AuthEnroller: enroll_via_multichallenge can enroll it.
func (DayPassword) EnrollVia() EnrollVia { return EnrollVia{QR: true} }
