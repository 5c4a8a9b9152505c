package token

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
)

// MOTP is the Mobile-OTP token (prefix PIMO): six hex digits from
// md5(time step + secret + mOTP PIN), computed by an app that knows both.
type MOTP struct{}

var _ Type = MOTP{}

// FieldMOTPPIN is the sealed field of the mOTP PIN (the app's PIN, not the
// token PIN checked by the server).
const FieldMOTPPIN = "motppin"

const (
	defaultMOTPWindow  = 180
	defaultMOTPKeySize = 16
	maxMOTPSecret      = 256
)

// Name implements Type.
func (MOTP) Name() string { return "motp" }

// Prefix implements Type.
func (MOTP) Prefix() string { return "PIMO" }

// Enroll implements Type: otpkey is the init secret as the app shows it
// (hex characters, sealed as given) or, with genkey, keysize (16) random
// bytes in hex, returned in the "otpkey" detail; giving both is refused.
// motppin is required and sealed. timeWindow (seconds, 0..3600) is
// optional; otplen is always 6.
func (MOTP) Enroll(ctx context.Context, e *Enroll) error {
	p, t := e.Params, e.Token
	given := strings.TrimSpace(p.Str("otpkey"))
	gen := p.Bool("genkey")
	var secretText string
	switch {
	case given != "" && gen:
		return ErrGenkeyAndOtpkey
	case gen:
		n, err := intParam(p, "keysize", defaultMOTPKeySize, 8, 64)
		if err != nil {
			return err
		}
		raw, err := e.Service.RandomBytes(n)
		if err != nil {
			return err
		}
		secretText = hex.EncodeToString(raw)
		e.Detail["otpkey"] = e.keyDetail(raw, false)
	case given == "":
		return apierr.MissingParameter("otpkey")
	default:
		if len(given) > maxMOTPSecret || !isHexText(given) {
			return paramErr("The otpkey is not valid: the mOTP secret must be hex (at most %d characters)", maxMOTPSecret)
		}
		secretText = given
	}
	pin, ok := p.Get("motppin")
	if !ok || pin == "" {
		return apierr.MissingParameter("motppin")
	}
	if v := p.Str(InfoTimeWindow); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > 3600 {
			return paramErr("timeWindow must be a number of seconds from 0 to 3600")
		}
		t.SetInfo(InfoTimeWindow, strconv.Itoa(n))
	}
	e.Key = []byte(secretText)
	e.SetSecret(FieldMOTPPIN, []byte(pin))
	t.OTPLen = otp.MOTPLength
	return nil
}

func isHexText(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// Check implements Type: the 10-second steps within ±timeWindow (180 s)
// of now; a step at or below the last used one (stored in Count) is a
// replay. Success stores the step.
func (MOTP) Check(ctx context.Context, c *Check) (Match, error) {
	key, err := c.Key()
	if err != nil || key == nil {
		return Match{Counter: -1}, err
	}
	pin, err := c.Service.Secret(c.Token, FieldMOTPPIN)
	if err != nil || pin == nil {
		return Match{Counter: -1}, err
	}
	t := c.Token
	window := t.InfoInt(InfoTimeWindow, defaultMOTPWindow)
	step, ok := otp.CheckMOTP(string(key), string(pin), c.OTP, c.Now, window, t.Count, t.Count != 0)
	if !ok {
		m := Match{Counter: -1}
		if t.Count != 0 {
			if _, old := otp.CheckMOTP(string(key), string(pin), c.OTP, c.Now, window, 0, false); old {
				m.Message = MsgReplayed
			}
		}
		return m, nil
	}
	return Match{OK: true, Counter: int64(step), Apply: func(nt *Token) bool {
		if nt.Count != 0 && step <= nt.Count {
			return false
		}
		nt.Count = step
		return true
	}}, nil
}
