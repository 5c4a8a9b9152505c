package token

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/store"
)

// Kinds of the generic challenges that any token can carry, stored as the
// challenge text (privacyIDEA's names): a resync asks for the OTP value
// after a remembered one, a PIN reset for a new PIN and then for it again.
const (
	ChallengeResync   = "generic_resync"
	ChallengePINReset = "generic_pin_reset"
)

// CreateGenericChallenge stores a challenge of kind for t under txid,
// valid for the default challenge validity, with data sealed to it.
func (s *Service) CreateGenericChallenge(ctx context.Context, t *Token, txid, kind string, data []byte) (*Challenge, error) {
	c, err := s.newChallenge(txid, t.Serial, kind, "", s.settings().ChallengeValidity, data)
	if err != nil {
		return nil, err
	}
	err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		return store.PutJSON(tx.Bucket(bucketChallenges), challengeKey(txid, t.Serial), challengeRecord{store.Versioned{Schema: schema}, *c})
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// PINChangeDue reads tokeninfo next_pin_change: the stored value, whether
// there is one, and whether the change is due at now (an unreadable date is
// due).
func PINChangeDue(t *Token, now time.Time) (value string, set, due bool) {
	v, ok := t.Info[InfoNextPinChange]
	if !ok || v == "" {
		return "", false, false
	}
	at, err := ParseValidity(v)
	return v, true, err != nil || now.After(at)
}

// FinishPINChange answers the PIN reset challenge of txid for serial in
// one transaction: the challenge must still be there and unexpired; it is
// removed with its transaction, the token's PIN becomes pinHash (a hash
// from HashPIN) and next_pin_change becomes next (or is removed when next
// is zero). ok is false when the challenge was gone (answered meanwhile or
// expired); nothing changes then.
func (s *Service) FinishPINChange(ctx context.Context, txid, serial, pinHash string, next time.Time) (ok bool, err error) {
	err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		ok = false
		r, live, err := s.liveChallenge(tx, txid, serial)
		if err != nil || !live || r.Challenge.Challenge != ChallengePINReset {
			return err
		}
		old, err := s.load(tx, serial)
		if err != nil {
			return err
		}
		if old == nil {
			return NotFound(serial)
		}
		if old.Locked {
			return ErrLocked
		}
		if _, err := deleteChallengesTx(tx, []byte(txid+"\x00"), func(_, _ []byte) bool { return true }); err != nil {
			return err
		}
		t := old.Clone()
		t.PIN, t.PINSealed = pinHash, nil
		if next.IsZero() {
			delete(t.Info, InfoNextPinChange)
		} else {
			t.SetInfo(InfoNextPinChange, FormatValidity(next))
		}
		ok = true
		return s.save(tx, old, t)
	})
	return ok, err
}

// ParsePINChangeEvery reads the ENROLL change_pin_every value: a number of
// days ("90d", or "90" alone, as privacyIDEA reads it), or of hours,
// weeks or years with the unit h, w or y. ok is false for anything else.
func ParsePINChangeEvery(v string) (d time.Duration, ok bool) {
	v = strings.ToLower(strings.TrimSpace(v))
	unit := 24 * time.Hour
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'd':
			v = v[:n-1]
		case 'h':
			v, unit = v[:n-1], time.Hour
		case 'w':
			v, unit = v[:n-1], 7*24*time.Hour
		case 'y':
			v, unit = v[:n-1], 365*24*time.Hour
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 100*365*24 || time.Duration(n)*unit > 100*365*24*time.Hour {
		return 0, false
	}
	return time.Duration(n) * unit, true
}
