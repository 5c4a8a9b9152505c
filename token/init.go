package token

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// InitRequest enrolls (or re-initialises) a token.
type InitRequest struct {
	Type   string // default hotp
	Serial string // "" generates one
	// Params are all request parameters (with policy defaults injected).
	Params Params
	// Owner, when set, assigns the token; OwnerInfo are the user's user
	// store attributes.
	Owner     *user.User
	OwnerInfo map[string]string
	// Realms are token realms to set (the owner's realm is always added).
	Realms []string
	// EncryptPIN stores the PIN encrypted instead of hashed (encrypt_pin).
	EncryptPIN bool
	// Verify asks for verify-enrollment (verify_enrollment policy): the
	// token stays unusable until a second call proves an OTP.
	Verify bool
	// Kind overrides the tokenkind (imports: hardware).
	Kind string
	// RolloutState, when set, is the rollout state the token gets
	// (clientwait for a token enrolled during an authentication, which
	// stays unusable until its first OTP is proven).
	RolloutState string
	// Info is tokeninfo to set besides the type's own.
	Info map[string]string
}

// errUnknownType is privacyIDEA's ERR1610.
func errUnknownType(t string) error {
	return apierr.New(apierr.TokenAdmin, "init token failed. Unknown token type: "+t).WithNumber(1610)
}

// ErrVerifyFailed is the verify-enrollment failure.
var ErrVerifyFailed = apierr.New(apierr.Parameter, "Verification of the new token failed.")

// Init enrolls a token (or re-initialises one of the same type) and returns
// it with the init detail of the response.
func (s *Service) Init(ctx context.Context, req InitRequest) (*Token, map[string]any, error) {
	typName := strings.ToLower(strings.TrimSpace(req.Type))
	if typName == "" {
		typName = "hotp"
	}
	typ, ok := s.cfg.Types.Get(typName)
	if !ok {
		return nil, nil, errUnknownType(req.Type)
	}
	if req.Params == nil {
		req.Params = Params{}
	}
	serial := req.Serial
	var existing *Token
	if serial != "" {
		if !ValidSerial(serial) {
			return nil, nil, paramErr("Invalid serial number. It must only contain characters, digits, '-' and '_'")
		}
		old, err := s.Get(ctx, serial)
		if err != nil && !apierr.Is(err, apierr.ResourceNotFound) {
			return nil, nil, err
		}
		if old != nil {
			if old.Type != typName {
				return nil, nil, apierr.New(apierr.TokenAdmin, fmt.Sprintf("Token %s already exists with type %s. Can not initialize token with new type %s", serial, old.Type, typName))
			}
			if old.Locked {
				return nil, nil, ErrLocked
			}
			existing = old
		}
	} else {
		var err error
		if serial, err = s.newSerial(ctx, typ); err != nil {
			return nil, nil, err
		}
	}
	now := s.cfg.Now()

	// Second step of verify-enrollment.
	if existing != nil && existing.RolloutState == StateVerify && req.Params.Has("verify") {
		return s.verifyEnrollment(ctx, existing, req.Params.Str("verify"))
	}

	var t *Token
	if existing != nil {
		t = existing.Clone()
	} else {
		t = &Token{Serial: serial, Type: typName, Active: true, OTPLen: s.set.DefaultOtpLen,
			CountWindow: s.set.DefaultCountWindow, SyncWindow: s.set.DefaultSyncWindow,
			MaxFail: s.set.DefaultMaxFailCount, Info: map[string]string{}, Realms: []string{}}
		t.Info[InfoCreationDate] = now.UTC().Format(creationLayout)
		kind := KindSoftware
		if req.Kind != "" {
			kind = req.Kind
		} else if strings.HasPrefix(serial, "UB") {
			kind = KindHardware
		}
		t.Info[InfoTokenKind] = kind
	}
	p := req.Params
	if v, ok := p.Get("description"); ok {
		if len(v) > maxDescriptionLen {
			return nil, nil, paramErr("description is too long (at most %d characters)", maxDescriptionLen)
		}
		t.Description = v
	}
	if v, ok := p.Get("otplen"); ok && v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 128 {
			return nil, nil, paramErr("otplen must be a number from 1 to 128")
		}
		t.OTPLen = n
	}
	if v, ok := p.Get("hashlib"); ok && v != "" {
		h, err := otp.ParseHash(v)
		if err != nil {
			return nil, nil, paramErr("hashlib must be sha1, sha256 or sha512")
		}
		t.Info[InfoHashlib] = string(h)
	}
	for _, k := range []string{InfoValidityStart, InfoValidityEnd} {
		if v, ok := p.Get(k); ok && v != "" {
			tm, err := ParseValidity(v)
			if err != nil {
				return nil, nil, err
			}
			t.Info[k] = FormatValidity(tm)
		}
	}
	prefix := typName + "."
	for k, v := range p {
		if strings.HasPrefix(k, prefix) && len(k) > len(prefix) {
			if len(v) > maxInfoValueLen {
				return nil, nil, paramErr("the value of %s is too long", k)
			}
			t.Info[k] = v
		}
	}

	for k, v := range req.Info {
		t.SetInfo(k, v)
	}

	e := &Enroll{Token: t, New: existing == nil, Params: p, Owner: req.Owner, OwnerInfo: req.OwnerInfo, Now: now, Rand: s.cfg.Rand, Service: s, Detail: map[string]any{}}
	if err := typ.Enroll(ctx, e); err != nil {
		return nil, nil, err
	}
	if t.RolloutState == "" || (existing != nil && t.RolloutState == existing.RolloutState && existing.RolloutState != StateClientWait) {
		if t.RolloutState != StateClientWait {
			t.RolloutState = StateEnrolled
		}
	}
	if req.RolloutState != "" {
		t.RolloutState = req.RolloutState
	}
	if req.Verify && t.RolloutState == StateEnrolled {
		t.RolloutState = StateVerify
		e.Detail["verify"] = map[string]any{"message": "Please enter a valid OTP value of the new token."}
	}
	if len(t.Info) > maxInfoKeys {
		return nil, nil, paramErr("too many tokeninfo entries")
	}

	// Secrets are sealed before the transaction.
	sealed := maps.Clone(t.Sealed)
	if sealed == nil {
		sealed = map[string][]byte{}
	}
	if e.Key != nil {
		c, err := s.seal(serial, FieldKey, e.Key)
		if err != nil {
			return nil, nil, err
		}
		sealed[FieldKey] = c
		if existing != nil {
			t.Count, t.FailCount = 0, 0
			delete(t.Info, InfoFailcounterExceed)
		}
	}
	for f, v := range e.Secrets {
		if v == nil {
			delete(sealed, f)
			continue
		}
		c, err := s.seal(serial, f, v)
		if err != nil {
			return nil, nil, err
		}
		sealed[f] = c
	}
	t.Sealed = sealed
	if pin, ok := p.Get("pin"); ok && !e.KeepPIN {
		if err := s.setPIN(ctx, t, pin, req.EncryptPIN); err != nil {
			return nil, nil, err
		}
	}
	if req.Owner != nil && req.Owner.UID != "" {
		o := *req.Owner
		t.Owner = &o
	}
	realms := slices.Clone(req.Realms)
	if len(realms) > 0 || existing == nil {
		t.Realms = normRealms(realms)
	}
	if t.Owner != nil {
		t.Realms = normRealms(append(t.Realms, t.Owner.Realm))
	}

	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		old, err := load(tx, serial)
		if err != nil {
			return err
		}
		nt := t.Clone()
		switch {
		case existing == nil && old != nil:
			return apierr.New(apierr.TokenAdmin, fmt.Sprintf("Token %s already exists with type %s. Can not initialize token with new type %s", serial, old.Type, typName))
		case existing != nil && old == nil:
			return NotFound(serial)
		case old != nil && old.Type != typName:
			return apierr.New(apierr.TokenAdmin, fmt.Sprintf("Token %s already exists with type %s. Can not initialize token with new type %s", serial, old.Type, typName))
		case old == nil:
			id, err := tx.Bucket(bucketTokens).NextSequence()
			if err != nil {
				return err
			}
			nt.ID = id
		default:
			nt.ID = old.ID
		}
		t.ID = nt.ID
		return save(tx, old, nt)
	})
	if err != nil {
		return nil, nil, err
	}
	e.Detail["serial"] = serial
	e.Detail["rollout_state"] = t.RolloutState
	return t, e.Detail, nil
}

func (s *Service) verifyEnrollment(ctx context.Context, t *Token, value string) (*Token, map[string]any, error) {
	probe := t.Clone()
	probe.RolloutState = StateEnrolled
	m, err := s.Verify(ctx, probe, value, nil, nil)
	if err != nil || !m.OK {
		return nil, nil, ErrVerifyFailed
	}
	nt, err := s.Update(ctx, t.Serial, false, func(x *Token) error {
		if x.RolloutState != StateVerify {
			return ErrVerifyFailed
		}
		x.RolloutState = StateEnrolled
		if m.Apply != nil && !m.Apply(x) {
			return ErrVerifyFailed
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return nt, map[string]any{"serial": nt.Serial, "rollout_state": nt.RolloutState}, nil
}

// setPIN stores pin on t (hashed, or sealed with encrypt).
func (s *Service) setPIN(ctx context.Context, t *Token, pin string, encrypt bool) error {
	if encrypt && pin != "" {
		c, err := s.seal(t.Serial, "pin", []byte(pin))
		if err != nil {
			return err
		}
		t.PIN, t.PINSealed = "", c
		return nil
	}
	h, err := s.HashPIN(ctx, pin)
	if err != nil {
		return err
	}
	t.PIN, t.PINSealed = h, nil
	return nil
}

func normRealms(in []string) []string {
	out := make([]string, 0, len(in))
	for _, r := range in {
		r = strings.ToLower(strings.TrimSpace(r))
		if r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}
