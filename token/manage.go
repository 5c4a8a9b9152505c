package token

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// ErrAssigned is privacyIDEA's 1103 for a token that already has an owner.
func ErrAssigned(owner *user.User, forUser bool) error {
	if forUser {
		return apierr.New(apierr.TokenAdmin, "Token already assigned to another user.").WithNumber(1103)
	}
	return apierr.New(apierr.TokenAdmin, "Token already assigned to user "+owner.String()).WithNumber(1103)
}

// Assign gives a token to a user. The token joins the user's realm, its
// fail counter is reset, and the PIN is set when pin is not nil. An owned
// token is refused with ErrAssigned. also runs in the transaction of the
// change.
func (s *Service) Assign(ctx context.Context, serial string, owner user.User, pin *string, encryptPIN, forUser bool, also ...func(store.Tx) error) error {
	var t0 *Token
	var err error
	if t0, err = s.Get(ctx, serial); err != nil {
		return err
	}
	var pinHash string
	var pinSealed []byte
	if pin != nil {
		probe := &Token{Serial: t0.Serial}
		if err := s.setPIN(ctx, probe, *pin, encryptPIN); err != nil {
			return err
		}
		pinHash, pinSealed = probe.PIN, probe.PINSealed
	}
	_, err = s.update(ctx, serial, false, func(t *Token) error {
		if t.Assigned() {
			return ErrAssigned(t.Owner, forUser)
		}
		o := owner
		t.Owner = &o
		t.Realms = normRealms(append(t.Realms, owner.Realm))
		t.FailCount = 0
		delete(t.Info, InfoFailcounterExceed)
		if pin != nil {
			t.PIN, t.PINSealed = pinHash, pinSealed
		}
		return nil
	}, also)
	return err
}

// update is Update with hooks that run in its transaction after the
// change.
func (s *Service) update(ctx context.Context, serial string, allowLocked bool, fn func(t *Token) error, also []func(store.Tx) error) (*Token, error) {
	var out *Token
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		t, err := s.editTx(tx, serial, allowLocked, fn)
		if err != nil {
			return err
		}
		out = t
		return store.RunAlso(tx, also)
	})
	return out, err
}

// editTx applies fn to the stored token in tx.
func (s *Service) editTx(tx store.Tx, serial string, allowLocked bool, fn func(t *Token) error) (*Token, error) {
	old, err := s.load(tx, serial)
	if err != nil {
		return nil, err
	}
	if old == nil {
		return nil, NotFound(serial)
	}
	if old.Locked && !allowLocked {
		return nil, ErrLocked
	}
	t := old.Clone()
	if err := fn(t); err != nil {
		return nil, err
	}
	return t, s.save(tx, old, t)
}

// Change is one kind of change to a stored token. Apply makes it on
// several tokens in one transaction, EditHook inside another write's
// transaction; the Service's single-token writes are made of the same
// changes.
type Change struct {
	// err refuses the change before any token is read (an invalid
	// value).
	err         error
	allowLocked bool
	remove      bool
	edit        func(t *Token) (changed bool, err error)
	// revoke marks a revocation: a type that is a Revoker takes part.
	revoke bool
}

// Revoker is implemented by types whose revocation reaches beyond the
// token (certificate: the CA revokes the certificate). RevokeTx runs in
// the transaction that revokes the token, before it is written, and an
// error refuses the revocation; Revoked runs after the commit.
type Revoker interface {
	RevokeTx(tx store.Tx, t *Token) error
	Revoked(ctx context.Context, t *Token)
}

// ActiveChange enables or disables a token; it reports a change when the
// state was another.
func ActiveChange(active bool) Change {
	return Change{edit: func(t *Token) (bool, error) {
		changed := t.Active != active
		t.Active = active
		return changed, nil
	}}
}

// ResetChange sets the fail counter to 0; it reports a change when it was
// not 0.
func ResetChange() Change {
	return Change{edit: func(t *Token) (bool, error) {
		changed := t.FailCount != 0
		t.FailCount = 0
		delete(t.Info, InfoFailcounterExceed)
		return changed, nil
	}}
}

// RevokeChange revokes a token: revoked, locked, disabled for good.
func RevokeChange() Change {
	return Change{revoke: true, edit: func(t *Token) (bool, error) {
		t.Revoked, t.Locked, t.Active = true, true, false
		return true, nil
	}}
}

// UnassignChange removes the owner, the PIN and the fail count; the token
// keeps its realms.
func UnassignChange() Change {
	return Change{edit: func(t *Token) (bool, error) {
		t.Owner = nil
		t.PIN, t.PINSealed = "", nil
		t.FailCount = 0
		delete(t.Info, InfoFailcounterExceed)
		return true, nil
	}}
}

// DeleteChange removes a token with its indexes and challenges (a revoked
// one too).
func DeleteChange() Change { return Change{allowLocked: true, remove: true} }

// DescriptionChange sets the description.
func DescriptionChange(desc string) Change {
	ch := Change{edit: func(t *Token) (bool, error) {
		t.Description = desc
		return true, nil
	}}
	if len(desc) > maxDescriptionLen {
		ch.err = paramErr("description is too long (at most %d characters)", maxDescriptionLen)
	}
	return ch
}

// FieldsChange applies /token/set fields.
func FieldsChange(f Fields) Change {
	return Change{edit: func(t *Token) (bool, error) { f.apply(t); return true, nil }}
}

// RealmsChange replaces the token realms (the owner's realm stays).
func RealmsChange(realms []string) Change {
	ch := Change{edit: func(t *Token) (bool, error) {
		r := normRealms(realms)
		if t.Owner != nil {
			r = normRealms(append(r, t.Owner.Realm))
		}
		t.Realms = r
		return true, nil
	}}
	if len(realms) > maxRealmsPerToken {
		ch.err = paramErr("too many realms")
	}
	return ch
}

// InfoChange sets one tokeninfo value.
func InfoChange(key, value string) Change {
	ch := Change{edit: func(t *Token) (bool, error) {
		if _, ok := t.Info[key]; !ok && len(t.Info) >= maxInfoKeys {
			return false, paramErr("too many tokeninfo entries")
		}
		t.SetInfo(key, value)
		return true, nil
	}}
	switch {
	case key == "" || len(key) > 255 || strings.ContainsAny(key, "\x00\r\n"):
		ch.err = paramErr("invalid tokeninfo key")
	case protectedInfo[key] || strings.HasPrefix(key, "tan.tan"):
		ch.err = paramErr("the tokeninfo key %s cannot be set", key)
	case len(value) > maxInfoValueLen:
		ch.err = paramErr("the tokeninfo value is too long")
	}
	return ch
}

// InfoDeleteChange removes one tokeninfo value.
func InfoDeleteChange(key string) Change {
	ch := Change{edit: func(t *Token) (bool, error) {
		_, had := t.Info[key]
		delete(t.Info, key)
		return had, nil
	}}
	if protectedInfo[key] || strings.HasPrefix(key, "tan.tan") {
		ch.err = paramErr("the tokeninfo key %s cannot be deleted", key)
	}
	return ch
}

// Outcome is what Apply did to one token.
type Outcome struct {
	Serial  string
	Changed bool
	// Err is why the token kept its state (not found, locked, refused).
	Err error
}

// applyTx makes ch on serial in tx.
func (s *Service) applyTx(tx store.Tx, serial string, ch Change) (bool, error) {
	return s.applyTxAfter(tx, serial, ch, nil)
}

// applyTxAfter is applyTx that adds to after what must run once the
// transaction committed (a Revoker's Revoked).
func (s *Service) applyTxAfter(tx store.Tx, serial string, ch Change, after *[]func(context.Context)) (bool, error) {
	if ch.err != nil {
		return false, ch.err
	}
	if ch.remove {
		t, err := s.load(tx, serial)
		if err != nil {
			return false, err
		}
		if t == nil {
			return false, NotFound(serial)
		}
		return true, s.remove(tx, t)
	}
	changed := false
	_, err := s.editTx(tx, serial, ch.allowLocked, func(t *Token) error {
		var err error
		if changed, err = ch.edit(t); err != nil || !ch.revoke {
			return err
		}
		typ, _ := s.cfg.Types.Get(t.Type)
		rv, ok := typ.(Revoker)
		if !ok {
			return nil
		}
		if err := rv.RevokeTx(tx, t); err != nil {
			return err
		}
		if after != nil {
			*after = append(*after, func(ctx context.Context) { rv.Revoked(ctx, t) })
		}
		return nil
	})
	return changed, err
}

// tokenError reports whether err is about one token (it keeps its state)
// rather than about the store.
func tokenError(err error) bool {
	_, ok := errors.AsType[*apierr.Error](err)
	return ok
}

// Apply makes ch on every token of serials in one store transaction,
// together with also (an operation's audit entry). A token that refuses
// the change (unknown, locked, invalid value) keeps its state and its
// error is in its Outcome; a store error fails the whole transaction.
func (s *Service) Apply(ctx context.Context, serials []string, ch Change, also ...func(store.Tx) error) ([]Outcome, error) {
	var out []Outcome
	var after []func(context.Context)
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		out, after = make([]Outcome, 0, len(serials)), nil
		for _, serial := range serials {
			changed, err := s.applyTxAfter(tx, serial, ch, &after)
			if err != nil && !tokenError(err) {
				return err
			}
			out = append(out, Outcome{Serial: serial, Changed: changed && err == nil, Err: err})
		}
		return store.RunAlso(tx, also)
	})
	runAfter(ctx, err, after)
	return out, err
}

// runAfter runs what a committed change left to do.
func runAfter(ctx context.Context, err error, after []func(context.Context)) {
	if err != nil {
		return
	}
	for _, fn := range after {
		fn(context.WithoutCancel(ctx))
	}
}

// apply1 makes ch on one token with also in one transaction; a refusal
// fails the transaction.
func (s *Service) apply1(ctx context.Context, serial string, ch Change, also []func(store.Tx) error) (bool, error) {
	changed := false
	var after []func(context.Context)
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		after = nil
		if changed, err = s.applyTxAfter(tx, serial, ch, &after); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	runAfter(ctx, err, after)
	return changed, err
}

// EditHook is ch on the token serial as a hook of another write: it runs
// in that write's transaction (e.g. the due date of a PIN change written
// with the PIN). A refusal fails the transaction.
func (s *Service) EditHook(serial string, ch Change) func(store.Tx) error {
	return func(tx store.Tx) error {
		_, err := s.applyTx(tx, serial, ch)
		return err
	}
}

// Unassign removes the owner, the PIN and the fail count of a token; the
// token keeps its realms.
func (s *Service) Unassign(ctx context.Context, serial string, also ...func(store.Tx) error) error {
	_, err := s.apply1(ctx, serial, UnassignChange(), also)
	return err
}

// SetActive enables or disables a token; it reports whether the state
// changed.
func (s *Service) SetActive(ctx context.Context, serial string, active bool, also ...func(store.Tx) error) (bool, error) {
	return s.apply1(ctx, serial, ActiveChange(active), also)
}

// Delete removes a token with its indexes and challenges.
func (s *Service) Delete(ctx context.Context, serial string, also ...func(store.Tx) error) error {
	_, err := s.apply1(ctx, serial, DeleteChange(), also)
	return err
}

// Reset sets the fail counter to 0; it reports whether it was not 0.
func (s *Service) Reset(ctx context.Context, serial string, also ...func(store.Tx) error) (bool, error) {
	return s.apply1(ctx, serial, ResetChange(), also)
}

// Revoke revokes a token: revoked, locked, disabled for good.
func (s *Service) Revoke(ctx context.Context, serial string, also ...func(store.Tx) error) error {
	_, err := s.apply1(ctx, serial, RevokeChange(), also)
	return err
}

// SetPIN sets the token PIN (hashed; encrypted with encrypt).
func (s *Service) SetPIN(ctx context.Context, serial, pin string, encrypt bool, also ...func(store.Tx) error) error {
	t0, err := s.Get(ctx, serial)
	if err != nil {
		return err
	}
	probe := &Token{Serial: t0.Serial}
	if err := s.setPIN(ctx, probe, pin, encrypt); err != nil {
		return err
	}
	_, err = s.update(ctx, serial, false, func(t *Token) error {
		t.PIN, t.PINSealed = probe.PIN, probe.PINSealed
		return nil
	}, also)
	return err
}

// SetDescription sets the description.
func (s *Service) SetDescription(ctx context.Context, serial, desc string, also ...func(store.Tx) error) error {
	if len(desc) > maxDescriptionLen {
		return paramErr("description is too long (at most %d characters)", maxDescriptionLen)
	}
	_, err := s.apply1(ctx, serial, DescriptionChange(desc), also)
	return err
}

// Fields are the values /token/set changes (nil = unchanged).
type Fields struct {
	Description         *string
	CountWindow         *int
	SyncWindow          *int
	HashLib             *string
	MaxFail             *int
	CountAuthMax        *int
	CountAuthSuccessMax *int
	ValidityStart       *string
	ValidityEnd         *string
}

// ParseFields reads /token/set parameters; it returns the fields and how
// many were given.
func ParseFields(p Params) (Fields, int, error) {
	var f Fields
	n := 0
	num := func(key string, lo, hi int, dst **int) error {
		v, ok := p.Get(key)
		if !ok {
			return nil
		}
		x, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || x < lo || x > hi {
			return paramErr("%s must be a number from %d to %d", key, lo, hi)
		}
		*dst = &x
		n++
		return nil
	}
	for _, c := range []struct {
		key    string
		lo, hi int
		dst    **int
	}{
		{"count_window", 1, 1000, &f.CountWindow}, {"sync_window", 1, 100000, &f.SyncWindow},
		{"max_failcount", 0, 1000000, &f.MaxFail}, {"count_auth_max", 0, 1 << 30, &f.CountAuthMax},
		{"count_auth_success_max", 0, 1 << 30, &f.CountAuthSuccessMax},
	} {
		if err := num(c.key, c.lo, c.hi, c.dst); err != nil {
			return f, 0, err
		}
	}
	if v, ok := p.Get("description"); ok {
		if len(v) > maxDescriptionLen {
			return f, 0, paramErr("description is too long (at most %d characters)", maxDescriptionLen)
		}
		f.Description = &v
		n++
	}
	if v, ok := p.Get("hashlib"); ok {
		h, err := otp.ParseHash(v)
		if err != nil {
			return f, 0, paramErr("hashlib must be sha1, sha256 or sha512")
		}
		hs := string(h)
		f.HashLib = &hs
		n++
	}
	for _, c := range []struct {
		key string
		dst **string
	}{{InfoValidityStart, &f.ValidityStart}, {InfoValidityEnd, &f.ValidityEnd}} {
		if v, ok := p.Get(c.key); ok {
			if v != "" {
				tm, err := ParseValidity(v)
				if err != nil {
					return f, 0, err
				}
				v = FormatValidity(tm)
			}
			*c.dst = &v
			n++
		}
	}
	return f, n, nil
}

// apply sets the fields on t.
func (f Fields) apply(t *Token) {
	if f.Description != nil {
		t.Description = *f.Description
	}
	if f.CountWindow != nil {
		t.CountWindow = *f.CountWindow
	}
	if f.SyncWindow != nil {
		t.SyncWindow = *f.SyncWindow
	}
	if f.MaxFail != nil {
		t.MaxFail = *f.MaxFail
	}
	if f.HashLib != nil {
		t.SetInfo(InfoHashlib, *f.HashLib)
	}
	setOrDelete := func(key string, v *string) {
		if v == nil {
			return
		}
		if *v == "" {
			delete(t.Info, key)
			return
		}
		t.SetInfo(key, *v)
	}
	if f.CountAuthMax != nil {
		s := strconv.Itoa(*f.CountAuthMax)
		setOrDelete(InfoCountAuthMax, &s)
	}
	if f.CountAuthSuccessMax != nil {
		s := strconv.Itoa(*f.CountAuthSuccessMax)
		setOrDelete(InfoCountAuthSuccMax, &s)
	}
	setOrDelete(InfoValidityStart, f.ValidityStart)
	setOrDelete(InfoValidityEnd, f.ValidityEnd)
}

// SetFields applies /token/set fields.
func (s *Service) SetFields(ctx context.Context, serial string, f Fields, also ...func(store.Tx) error) error {
	_, err := s.apply1(ctx, serial, FieldsChange(f), also)
	return err
}

// SetRealms replaces the token realms (the owner's realm stays).
func (s *Service) SetRealms(ctx context.Context, serial string, realms []string, also ...func(store.Tx) error) error {
	if len(realms) > maxRealmsPerToken {
		return paramErr("too many realms")
	}
	_, err := s.apply1(ctx, serial, RealmsChange(realms), also)
	return err
}

// protectedInfo are tokeninfo keys /token/info may not change: they hold
// the package's own state.
var protectedInfo = map[string]bool{InfoCountAuth: true, InfoCountAuthSuccess: true}

// SetInfo sets one tokeninfo value.
func (s *Service) SetInfo(ctx context.Context, serial, key, value string, also ...func(store.Tx) error) error {
	_, err := s.apply1(ctx, serial, InfoChange(key, value), also)
	return err
}

// DeleteInfo removes one tokeninfo value.
func (s *Service) DeleteInfo(ctx context.Context, serial, key string, also ...func(store.Tx) error) error {
	_, err := s.apply1(ctx, serial, InfoDeleteChange(key), also)
	return err
}

// Resync resynchronises a token's counter with two consecutive values.
func (s *Service) Resync(ctx context.Context, serial, otp1, otp2 string, also ...func(store.Tx) error) (bool, error) {
	t, err := s.Get(ctx, serial)
	if err != nil {
		return false, err
	}
	if t.Locked {
		return false, ErrLocked
	}
	typ, ok := s.cfg.Types.Get(t.Type)
	if !ok {
		return false, nil
	}
	r, ok := typ.(Resyncer)
	if !ok {
		return false, nil
	}
	apply, ok, err := r.Resync(ctx, s, t, otp1, otp2, s.cfg.Now())
	if err != nil || !ok {
		return false, err
	}
	_, err = s.update(ctx, serial, false, func(t *Token) error {
		if !apply(t) {
			return ErrReplay
		}
		t.FailCount = 0
		delete(t.Info, InfoFailcounterExceed)
		return nil
	}, also)
	if err == ErrReplay {
		return false, nil
	}
	return err == nil, err
}

// CopyPIN copies the PIN of one token to another.
func (s *Service) CopyPIN(ctx context.Context, from, to string, also ...func(store.Tx) error) error {
	src, err := s.Get(ctx, from)
	if err != nil {
		return err
	}
	ch, err := s.copyPINChange(src, to)
	if err != nil {
		return err
	}
	_, err = s.apply1(ctx, to, ch, also)
	return err
}

// copyPINChange sets the PIN of src on the token to (an encrypted PIN is
// sealed anew for its new record).
func (s *Service) copyPINChange(src *Token, to string) (Change, error) {
	pinSealed := []byte(nil)
	if len(src.PINSealed) > 0 {
		p, err := s.Secret(&Token{Serial: src.Serial, Sealed: map[string][]byte{"pin": src.PINSealed}}, "pin")
		if err != nil {
			return Change{}, err
		}
		if pinSealed, err = s.seal(to, "pin", p); err != nil {
			return Change{}, err
		}
	}
	return Change{edit: func(t *Token) (bool, error) {
		t.PIN, t.PINSealed = src.PIN, pinSealed
		return true, nil
	}}, nil
}

// CopyUser copies the owner (and the owner's realm) of one token to
// another.
func (s *Service) CopyUser(ctx context.Context, from, to string, also ...func(store.Tx) error) error {
	src, err := s.Get(ctx, from)
	if err != nil {
		return err
	}
	if !src.Assigned() {
		return apierr.New(apierr.TokenAdmin, "The source token has no user.").WithNumber(1016)
	}
	_, err = s.update(ctx, to, false, func(t *Token) error {
		o := *src.Owner
		t.Owner = &o
		t.Realms = normRealms(append(t.Realms, o.Realm))
		return nil
	}, also)
	return err
}

// LostOptions are the policy values of a lost token.
type LostOptions struct {
	PWLength   int           // losttoken_PW_length, default 16
	PWContents string        // losttoken_PW_contents, default "8" (base58)
	Valid      time.Duration // losttoken_valid, default 10 days
}

// LostResult is the value of /token/lost.
type LostResult struct {
	Serial   string
	Password string
	EndDate  string
}

// Lost creates a temporary pw token "lost<serial>" for the owner of a lost
// token, copies the owner and the PIN, and disables the old token, all in
// one transaction with also.
func (s *Service) Lost(ctx context.Context, serial string, o LostOptions, also ...func(store.Tx) error) (LostResult, error) {
	old, err := s.Get(ctx, serial)
	if err != nil {
		return LostResult{}, err
	}
	if !old.Assigned() {
		return LostResult{}, ErrLostUnassigned
	}
	if o.PWLength <= 0 {
		o.PWLength = 16
	}
	if o.PWContents == "" {
		o.PWContents = "8"
	}
	if o.Valid <= 0 {
		o.Valid = 10 * 24 * time.Hour
	}
	pw, err := s.RandomString(o.PWLength, o.PWContents)
	if err != nil {
		return LostResult{}, paramErr("losttoken_PW_contents: %v", err)
	}
	end := FormatValidity(s.cfg.Now().Add(o.Valid))
	newSerial := "lost" + serial
	if len(newSerial) > maxSerialLen {
		return LostResult{}, paramErr("the serial is too long for a lost token")
	}
	if _, ok := s.cfg.Types.Get("pw"); !ok {
		return LostResult{}, errUnknownType("pw")
	}
	pin, err := s.copyPINChange(old, newSerial)
	if err != nil {
		return LostResult{}, err
	}
	hooks := append([]func(store.Tx) error{s.EditHook(newSerial, pin), s.EditHook(serial, ActiveChange(false))}, also...)
	if _, _, err := s.Init(ctx, InitRequest{Type: "pw", Serial: newSerial, Owner: old.Owner, Realms: old.Realms, NoImages: true,
		Params: Params{"otpkey": pw, InfoValidityEnd: end, "description": "temporary replacement for " + serial}}, hooks...); err != nil {
		return LostResult{}, err
	}
	return LostResult{Serial: newSerial, Password: pw, EndDate: end}, nil
}

// GetSerialFilter narrows /token/getserial.
type GetSerialFilter struct {
	Type     string
	Serial   string // substring
	Assigned *bool
	Window   int // default 10
}

// getSerialWork bounds the OTP values one getserial computes: it tries at
// most getSerialWork/window tokens (and at most the list cap).
const getSerialWork = 200000

// getSerialTypes are the types whose values getserial computes.
var getSerialTypes = []string{"email", "hotp", "paper", "sms", "totp"}

// GetSerial finds the token whose OTP value (within window values of its
// counter) is otp. It changes nothing; it returns "" when none matches and
// the number of tokens looked at. The candidates (tokens of the types
// with computable values, narrowed by f) come from the indexes; when more
// than getSerialWork/window of them would be tried it refuses with a
// parameter error instead.
func (s *Service) GetSerial(ctx context.Context, otpValue string, f GetSerialFilter) (string, int, error) {
	if f.Window <= 0 {
		f.Window = 10
	}
	if err := s.ensureIndexes(ctx); err != nil {
		return "", 0, err
	}
	limit := max(1, min(s.listCap, getSerialWork/f.Window))
	lf := Filter{Types: getSerialTypes, Assigned: f.Assigned}
	if f.Type != "" {
		lf.Types = nil
		for _, t := range getSerialTypes {
			if strings.EqualFold(t, f.Type) {
				lf.Types = []string{t}
			}
		}
		if lf.Types == nil {
			return "", 0, nil
		}
	}
	var cands []*Token
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		cands = cands[:0]
		srcs, err := sources(tx, &lf)
		if err != nil {
			return err
		}
		src, c, _ := plan(tx, srcs, lf, s.listCap)
		var serials []string
		sub := []byte(f.Serial)
		it := src.open(false)
		for serial, ok := it.next(); ok; serial, ok = it.next() {
			if len(sub) > 0 && !bytes.Contains(serial, sub) {
				continue
			}
			pass, err := c.ok(serial)
			if err != nil {
				return err
			}
			if !pass {
				continue
			}
			if len(serials) == limit {
				return apierr.New(apierr.Parameter, fmt.Sprintf(
					"[ParameterError] getserial would try more than %d tokens with a window of %d: narrow it with type, serial, assigned or unassigned, or a smaller window", limit, f.Window))
			}
			serials = append(serials, string(serial))
		}
		for _, serial := range serials {
			t, err := loadUncached(tx, serial)
			if err != nil {
				return err
			}
			if t != nil {
				cands = append(cands, t)
			}
		}
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	for _, t := range cands {
		probe := t.Clone()
		probe.CountWindow = f.Window
		m, err := s.Verify(ctx, probe, otpValue, nil, nil)
		if err == nil && m.OK {
			return t.Serial, len(cands), nil
		}
	}
	return "", len(cands), nil
}

// RollForward protects restored data against replay: every TOTP-like
// token's last used step is set to the current step (and motp's to the
// current 10-second step), and every HOTP-like counter (hotp, email, sms,
// paper) advances by its count window. OTP values used after the backup
// was taken can then not be used again. It returns how many tokens
// changed.
func RollForward(ctx context.Context, st store.Store, now time.Time, set Settings) (int, error) {
	set = set.withDefaults()
	// No Service runs on these data yet: records are decoded without a
	// cache.
	s := &Service{}
	n := 0
	err := st.Update(ctx, func(tx store.Tx) error {
		n = 0
		var serials []string
		if err := tx.Bucket(bucketTokens).ForEach(nil, func(k, _ []byte) error {
			serials = append(serials, string(k))
			return nil
		}); err != nil {
			return err
		}
		for _, serial := range serials {
			old, err := s.load(tx, serial)
			if err != nil || old == nil {
				return err
			}
			t := old.Clone()
			switch t.Type {
			case "totp":
				step := t.InfoInt(InfoTimeStep, set.TOTPTimeStep)
				if step <= 0 {
					step = set.TOTPTimeStep
				}
				cur := otp.TOTPCounter(now, step, t.InfoInt(InfoTimeShift, 0))
				if cur > t.Count {
					t.Count = cur
				}
			case "motp":
				if cur := otp.TOTPCounter(now, 10, 0); cur > t.Count {
					t.Count = cur
				}
			case "hotp", "email", "sms", "paper":
				t.Count += uint64(max(t.CountWindow, 1))
			default:
				continue
			}
			if t.Count == old.Count {
				continue
			}
			if err := s.save(tx, old, t); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// CancelChallenges deletes the challenges of a transaction, with also in
// the same transaction; it returns how many it deleted.
func (s *Service) CancelChallenges(ctx context.Context, txid string, also ...func(store.Tx) error) (int, error) {
	n := 0
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		if n, err = deleteChallengesTx(tx, []byte(txid+"\x00"), func(_, _ []byte) bool { return true }); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return n, err
}

// NewSerial generates a free serial for a token of type typ, so that an
// operation can name the token in its audit entry before enrolling it.
func (s *Service) NewSerial(ctx context.Context, typ string) (string, error) {
	t, ok := s.cfg.Types.Get(strings.ToLower(strings.TrimSpace(typ)))
	if !ok {
		return "", errUnknownType(typ)
	}
	return s.newSerial(ctx, t)
}

// ApplyOne makes ch on one token in one transaction with also; a refusal
// fails the transaction. It reports whether the token changed.
func (s *Service) ApplyOne(ctx context.Context, serial string, ch Change, also ...func(store.Tx) error) (bool, error) {
	return s.apply1(ctx, serial, ch, also)
}

// Len is the number of fields f sets.
func (f Fields) Len() int {
	n := 0
	for _, set := range []bool{f.Description != nil, f.CountWindow != nil, f.SyncWindow != nil, f.HashLib != nil,
		f.MaxFail != nil, f.CountAuthMax != nil, f.CountAuthSuccessMax != nil, f.ValidityStart != nil, f.ValidityEnd != nil} {
		if set {
			n++
		}
	}
	return n
}

// Refused is a change that every token refuses with err (a value found
// invalid before any token was read).
func Refused(err error) Change { return Change{err: err} }
