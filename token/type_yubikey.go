package token

import (
	"context"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
)

// Yubikey is a YubiKey in Yubico OTP (AES) mode, checked locally (prefix
// UBAM). The OTP is the modhex public id followed by 32 modhex characters
// of one AES block; the key is the 16-byte AES key. The combined counter
// (use counter << 8 | session counter) must rise with every OTP: the
// stored Count is the last accepted one.
//
// Tokeninfo: "yubikey.prefix" (the public id, modhex; when set the OTP
// must start with it) and "yubikey.uid" (the private id, 12 hex digits;
// when set the decrypted OTP must carry it).
type Yubikey struct{}

var _ Type = Yubikey{}

// Tokeninfo keys of the yubikey token.
const (
	InfoYubikeyPrefix = "yubikey.prefix"
	InfoYubikeyUID    = "yubikey.uid"

	yubikeyKeyLen       = 16
	defaultYubikeyOTPLn = 44 // 12 modhex characters of public id + 32
)

// Name implements Type.
func (Yubikey) Name() string { return "yubikey" }

// Prefix implements Type.
func (Yubikey) Prefix() string { return "UBAM" }

// Enroll implements Type: otpkey (the AES key, 16 bytes hex; or genkey),
// otplen (32 + length of the public id; default 44, or derived from
// yubikey.prefix), yubikey.prefix and yubikey.uid.
func (Yubikey) Enroll(ctx context.Context, e *Enroll) error {
	t, p := e.Token, e.Params
	keyParam := strings.TrimSpace(p.Str("otpkey"))
	switch {
	case p.Bool("genkey") && keyParam != "":
		return ErrGenkeyAndOtpkey
	case p.Bool("genkey"):
		k, err := e.Service.RandomBytes(yubikeyKeyLen)
		if err != nil {
			return err
		}
		e.Key = k
	case keyParam != "":
		k, err := otp.ParseKey(keyParam, p.Str("otpkeyformat"))
		if err != nil || len(k) != yubikeyKeyLen {
			return paramErr("The otpkey must be the 16-byte AES key of the YubiKey (32 hex digits)")
		}
		e.Key = k
	case e.New || t.Sealed[FieldKey] == nil:
		return apierr.MissingParameter("otpkey")
	}

	if v, ok := p.Get(InfoYubikeyPrefix); ok {
		v = strings.ToLower(strings.TrimSpace(v))
		if v != "" {
			if len(v) > otp.YubicoMaxPublicID {
				return paramErr("The yubikey.prefix is too long (at most %d modhex characters)", otp.YubicoMaxPublicID)
			}
			if _, err := otp.ModhexDecode(v); err != nil {
				return paramErr("The yubikey.prefix must be modhex (an even number of the characters cbdefghijklnrtuv)")
			}
			t.SetInfo(InfoYubikeyPrefix, v)
		} else {
			delete(t.Info, InfoYubikeyPrefix)
		}
	}
	if v, ok := p.Get(InfoYubikeyUID); ok {
		v = strings.ToLower(strings.TrimSpace(v))
		if v != "" {
			if b, err := hex.DecodeString(v); err != nil || len(b) != otp.YubicoPrivateIDLen {
				return paramErr("The yubikey.uid must be the private id of the YubiKey (12 hex digits)")
			}
			t.SetInfo(InfoYubikeyUID, v)
		} else {
			delete(t.Info, InfoYubikeyUID)
		}
	}

	switch v := strings.TrimSpace(p.Str("otplen")); {
	case v != "":
		n, err := strconv.Atoi(v)
		if err != nil || n < otp.YubicoTokenLength || n > otp.YubicoTokenLength+otp.YubicoMaxPublicID {
			return paramErr("otplen of a yubikey must be a number from %d to %d", otp.YubicoTokenLength, otp.YubicoTokenLength+otp.YubicoMaxPublicID)
		}
		t.OTPLen = n
	case t.Info[InfoYubikeyPrefix] != "":
		t.OTPLen = otp.YubicoTokenLength + len(t.Info[InfoYubikeyPrefix])
	case e.New || t.OTPLen < otp.YubicoTokenLength:
		t.OTPLen = defaultYubikeyOTPLn
	}
	if pre := t.Info[InfoYubikeyPrefix]; pre != "" && t.OTPLen != otp.YubicoTokenLength+len(pre) {
		return paramErr("otplen %d does not match the yubikey.prefix (%d characters + %d)", t.OTPLen, len(pre), otp.YubicoTokenLength)
	}
	if e.Key != nil {
		e.Detail["otpkey"] = e.keyDetail(e.Key, false)
	}
	return nil
}

// Check implements Type: the OTP must decrypt with the key (CRC), carry
// the stored public id and private id when they are set, and a counter
// above the stored one. Apply refuses a counter at or below the stored
// one, so a value is accepted once however many requests race.
func (Yubikey) Check(ctx context.Context, c *Check) (Match, error) {
	key, err := c.Key()
	if err != nil || key == nil {
		return Match{Counter: -1}, err
	}
	t := c.Token
	y, err := otp.ParseYubico(strings.TrimSpace(c.OTP), key)
	if err != nil {
		return Match{Counter: -1}, nil
	}
	if pre := t.Info[InfoYubikeyPrefix]; pre != "" && y.PublicID != strings.ToLower(pre) {
		return Match{Counter: -1}, nil
	}
	if uid := t.Info[InfoYubikeyUID]; uid != "" {
		want, err := hex.DecodeString(uid)
		if err != nil || !y.MatchPrivateID(want) {
			return Match{Counter: -1}, nil
		}
	}
	n := uint64(y.Counter)
	if n <= t.Count {
		return Match{Counter: -1, Message: MsgReplayed}, nil
	}
	return Match{OK: true, Counter: int64(n), Apply: func(t *Token) bool {
		if n <= t.Count {
			return false
		}
		t.Count = n
		return true
	}}, nil
}
