package token

import (
	"context"
	"errors"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// Failure messages of the check, as privacyIDEA words them.
const (
	MsgWrongOTP     = "wrong otp value"
	MsgReplayed     = "wrong otp value. previous otp used again"
	MsgDisabled     = "Token is disabled"
	MsgRevoked      = "Token is revoked"
	MsgFailcounter  = "Failcounter exceeded"
	MsgValidity     = "Outside validity period"
	MsgAuthCounter  = "Authentication counter exceeded"
	MsgNotEnrolled  = "Token is not yet enrolled"
	MsgUnknownType  = "The token type is not available"
	MsgSecretBroken = "The token secret is not usable"
)

// UnusableError tells why a token cannot authenticate now.
type UnusableError struct{ Reason string }

func (e *UnusableError) Error() string { return e.Reason }

// clearFailcounter applies the failcounter clear timeout: a token at
// maxfail whose failcounter_exceeded is older than the timeout starts
// again at 0. It reports whether t changed.
func (s *Service) clearFailcounter(t *Token, now time.Time) bool {
	if t.MaxFail <= 0 || t.FailCount < t.MaxFail {
		return false
	}
	after := s.settings().FailcounterClearTime
	if after <= 0 {
		return false
	}
	at, err := ParseValidity(t.Info[InfoFailcounterExceed])
	if err != nil || now.Sub(at) < after {
		return false
	}
	t.FailCount = 0
	delete(t.Info, InfoFailcounterExceed)
	return true
}

// Unusable returns why t cannot authenticate at now, or "" when it can.
// The failcounter clear timeout is taken into account (on a copy).
func (s *Service) Unusable(t *Token, now time.Time) string {
	if t.Revoked {
		return MsgRevoked
	}
	if t.RolloutState == StateClientWait || t.RolloutState == StateVerify {
		return MsgNotEnrolled
	}
	if !t.Active {
		return MsgDisabled
	}
	if t.MaxFail > 0 && t.FailCount >= t.MaxFail {
		c := t.Clone()
		if !s.clearFailcounter(c, now) {
			return MsgFailcounter
		}
	}
	if !t.InValidity(now) {
		return MsgValidity
	}
	if t.AuthCountExceeded() {
		return MsgAuthCounter
	}
	return ""
}

// Verify checks the OTP part of a password against a snapshot of t with
// its type. It does not change anything.
func (s *Service) Verify(ctx context.Context, t *Token, otp string, opts Params, ch *Challenge) (Match, error) {
	typ, ok := s.cfg.Types.Get(t.Type)
	if !ok {
		return Match{Counter: -1, Message: MsgUnknownType}, nil
	}
	m, err := typ.Check(ctx, &Check{Token: t, OTP: otp, Options: opts, Challenge: ch, Now: s.cfg.Now(), Service: s})
	if errors.Is(err, ErrCorrupt) {
		return Match{Counter: -1, Message: MsgSecretBroken}, err
	}
	return m, err
}

// Commit applies a successful match in one transaction: the token is read
// again, must still be usable, and m.Apply must accept it (else ErrReplay);
// then the fail counter is reset and the usage counters advance (not
// under the setting NoAuthCounter). It returns the committed token.
func (s *Service) Commit(ctx context.Context, serial string, m Match) (*Token, error) {
	var out *Token
	count := !s.settings().NoAuthCounter
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		old, err := s.loadShared(tx, serial)
		if err != nil {
			return err
		}
		if old == nil {
			return NotFound(serial)
		}
		t := old.Clone()
		now := s.cfg.Now()
		if m.Rollout && t.RolloutState == StateClientWait {
			t.RolloutState = StateEnrolled
		}
		s.clearFailcounter(t, now)
		if why := s.Unusable(t, now); why != "" {
			return &UnusableError{why}
		}
		if m.Apply != nil && !m.Apply(t) {
			return ErrReplay
		}
		t.FailCount = 0
		delete(t.Info, InfoFailcounterExceed)
		if count {
			t.incInfo(InfoCountAuth)
			t.incInfo(InfoCountAuthSuccess)
		}
		out = t
		if m.Delete {
			err = s.remove(tx, old)
		} else {
			err = s.save(tx, old, t)
		}
		if err == nil && m.Also != nil {
			err = m.Also(tx, t)
		}
		return err
	})
	return out, err
}

// Fail records a failed attempt on a token: the fail counter rises by one
// (never above maxfail; reaching it stamps failcounter_exceeded), and
// count_auth rises when countAuth is set (the PIN matched) and the
// setting NoAuthCounter is not. Each non-nil
// also changes the token in the same transaction (a Match's Remember).
func (s *Service) Fail(ctx context.Context, serial string, countAuth bool, also ...func(*Token)) error {
	change := func(t *Token) {
		for _, f := range also {
			if f != nil {
				f(t)
			}
		}
	}
	return s.FailAll(ctx, []Failure{{Serial: serial, Change: change}}, countAuth, nil)
}

// Failure is one token's failed attempt for FailAll.
type Failure struct {
	Serial string
	// Change, when not nil, also changes the token (a Match's Remember).
	Change func(*Token)
}

// FailAll records a failed attempt on each token of fails, as Fail does,
// in one transaction, and runs record (when not nil) in that transaction:
// the write that records the failure commits with it. Tokens that no
// longer exist are passed over.
func (s *Service) FailAll(ctx context.Context, fails []Failure, countAuth bool, record func(store.Tx) error) error {
	countAuth = countAuth && !s.settings().NoAuthCounter
	return s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		now := s.cfg.Now()
		for _, f := range fails {
			old, err := s.loadShared(tx, f.Serial)
			if err != nil {
				return err
			}
			if old == nil {
				continue
			}
			t := old.Clone()
			s.failLocked(t, now)
			if countAuth {
				t.incInfo(InfoCountAuth)
			}
			if f.Change != nil {
				f.Change(t)
			}
			if err := s.save(tx, old, t); err != nil {
				return err
			}
		}
		if record != nil {
			return record(tx)
		}
		return nil
	})
}

func (s *Service) failLocked(t *Token, now time.Time) {
	s.clearFailcounter(t, now)
	if t.MaxFail > 0 && t.FailCount >= t.MaxFail {
		return
	}
	t.FailCount++
	if t.MaxFail > 0 && t.FailCount >= t.MaxFail {
		if _, ok := t.Info[InfoFailcounterExceed]; !ok {
			t.SetInfo(InfoFailcounterExceed, FormatValidity(now))
		}
	}
}

// Result is the outcome of CheckOTP.
type Result struct {
	OK      bool
	Message string
	Token   *Token
}

// CheckOTP checks an OTP value (without PIN) for a token and records the
// outcome: success advances the counter atomically (a value is accepted
// once, however many requests race), failure raises the fail counter. It
// is the token-level building block of /validate/check.
func (s *Service) CheckOTP(ctx context.Context, serial, otp string, opts Params) (Result, error) {
	t, err := s.Get(ctx, serial)
	if err != nil {
		return Result{}, err
	}
	now := s.cfg.Now()
	if why := s.Unusable(t, now); why != "" {
		if why == MsgFailcounter || why == MsgRevoked || why == MsgDisabled {
			return Result{Message: why, Token: t}, nil
		}
		return Result{Message: why, Token: t}, s.Fail(ctx, serial, true)
	}
	m, err := s.Verify(ctx, t, otp, opts, nil)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return Result{}, err
	}
	if !m.OK {
		msg := m.Message
		if msg == "" {
			msg = MsgWrongOTP
		}
		return Result{Message: msg, Token: t}, s.Fail(ctx, serial, true, m.Remember)
	}
	ct, err := s.Commit(ctx, serial, m)
	var ue *UnusableError
	switch {
	case errors.Is(err, ErrReplay):
		return Result{Message: MsgReplayed, Token: t}, s.Fail(ctx, serial, true)
	case errors.As(err, &ue):
		return Result{Message: ue.Reason, Token: t}, nil
	case apierr.Is(err, apierr.ResourceNotFound):
		return Result{Message: MsgWrongOTP}, nil
	case err != nil:
		return Result{}, err
	}
	return Result{OK: true, Token: ct}, nil
}
