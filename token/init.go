package token

import (
	"context"
	"errors"
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
	// Limits are the enrollment limits a new token must stay within.
	Limits Limits
	// NoImages leaves the QR code images out of the detail (an import,
	// which discards it).
	NoImages bool
	// ImagesOf, when not nil, names the detail entries whose QR images
	// the caller shows ("otpkey", "googleurl", "oathurl"); the others get
	// none. Each image costs more CPU than the rest of an enrollment.
	ImagesOf []string

	// adopt enrolls a token adopted from another system (Migrated): a
	// type that implements Adopter adopts it instead of enrolling it.
	adopt bool
}

// errUnknownType is privacyIDEA's ERR1610.
func errUnknownType(t string) error {
	return apierr.New(apierr.TokenAdmin, "init token failed. Unknown token type: "+t).WithNumber(1610)
}

// ErrVerifyFailed is the verify-enrollment failure.
var ErrVerifyFailed = apierr.New(apierr.Parameter, "Verification of the new token failed.")

// prepared is a token ready to be written by commit: everything that
// needs no transaction (the type's enrollment, sealing, hashing) is done.
type prepared struct {
	t        *Token
	existing *Token
	typName  string
	detail   map[string]any
	limits   Limits
	// images are drawn into detail after the commit.
	images []pendingImage
}

// Init enrolls a token (or re-initialises one of the same type) and returns
// it with the init detail of the response. also runs in the transaction
// that writes the token (an operation's audit entry).
//
// A serial Init generates (req.Serial "") that another enrollment takes
// before the commit is generated anew, up to serialAttempts times.
func (s *Service) Init(ctx context.Context, req InitRequest, also ...func(store.Tx) error) (*Token, map[string]any, error) {
	for attempt := 1; ; attempt++ {
		t, detail, err := s.init(ctx, req, also)
		if req.Serial == "" && attempt < serialAttempts && errors.Is(err, ErrSerialTaken) {
			continue
		}
		return t, detail, err
	}
}

// serialAttempts bounds the enrollments of a generated serial: the
// privacyIDEA serials (type prefix, token count, 16 random bits) of
// enrollments running at the same time collide now and then.
const serialAttempts = 4

// ErrSerialTaken is the cause (errors.Is) of the refusal of a new token
// whose serial another token took after the serial was chosen: a caller
// that generated it may generate another and try again.
var ErrSerialTaken = errors.New("token: the serial was taken meanwhile")

func (s *Service) init(ctx context.Context, req InitRequest, also []func(store.Tx) error) (*Token, map[string]any, error) {
	pr, t, detail, err := s.prepare(ctx, req, also)
	if err != nil || pr == nil {
		return t, detail, err
	}
	err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		if err := s.commit(tx, pr, false); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	if err != nil {
		return nil, nil, err
	}
	drawImages(pr.images)
	return pr.t, pr.detail, nil
}

// prepare does the work of Init that needs no transaction. The second
// step of a verify-enrollment is done at once (its token and detail are
// returned with a nil prepared).
func (s *Service) prepare(ctx context.Context, req InitRequest, also []func(store.Tx) error) (*prepared, *Token, map[string]any, error) {
	typName := strings.ToLower(strings.TrimSpace(req.Type))
	if typName == "" {
		typName = "hotp"
	}
	typ, ok := s.cfg.Types.Get(typName)
	if !ok {
		return nil, nil, nil, errUnknownType(req.Type)
	}
	if req.Params == nil {
		req.Params = Params{}
	}
	serial := req.Serial
	var existing *Token
	if serial != "" {
		if !ValidSerial(serial) {
			return nil, nil, nil, paramErr("Invalid serial number. It must only contain characters, digits, '-' and '_'")
		}
		old, err := s.Get(ctx, serial)
		if err != nil && !apierr.Is(err, apierr.ResourceNotFound) {
			return nil, nil, nil, err
		}
		if old != nil {
			if old.Type != typName {
				return nil, nil, nil, errExists(serial, old.Type, typName)
			}
			if old.Locked {
				return nil, nil, nil, ErrLocked
			}
			existing = old
		}
	} else {
		var err error
		if serial, err = s.newSerial(ctx, typ); err != nil {
			return nil, nil, nil, err
		}
	}
	now := s.cfg.Now()

	// Second step of verify-enrollment.
	if existing != nil && existing.RolloutState == StateVerify && req.Params.Has("verify") {
		t, d, err := s.verifyEnrollment(ctx, existing, req.Params.Str("verify"), req.Info, also)
		return nil, t, d, err
	}

	var t *Token
	if existing != nil {
		t = existing.Clone()
	} else {
		set := s.settings()
		t = &Token{Serial: serial, Type: typName, Active: true, OTPLen: set.DefaultOtpLen,
			CountWindow: set.DefaultCountWindow, SyncWindow: set.DefaultSyncWindow,
			MaxFail: set.DefaultMaxFailCount, Info: map[string]string{}, Realms: []string{}}
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
			return nil, nil, nil, paramErr("description is too long (at most %d characters)", maxDescriptionLen)
		}
		t.Description = v
	}
	if v, ok := p.Get("otplen"); ok && v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 128 {
			return nil, nil, nil, paramErr("otplen must be a number from 1 to 128")
		}
		t.OTPLen = n
	}
	if v, ok := p.Get("hashlib"); ok && v != "" {
		h, err := otp.ParseHash(v)
		if err != nil {
			return nil, nil, nil, paramErr("hashlib must be sha1, sha256 or sha512")
		}
		t.Info[InfoHashlib] = string(h)
	}
	for _, k := range []string{InfoValidityStart, InfoValidityEnd} {
		if v, ok := p.Get(k); ok && v != "" {
			tm, err := ParseValidity(v)
			if err != nil {
				return nil, nil, nil, err
			}
			t.Info[k] = FormatValidity(tm)
		}
	}
	prefix := typName + "."
	for k, v := range p {
		if strings.HasPrefix(k, prefix) && len(k) > len(prefix) {
			if len(v) > maxInfoValueLen {
				return nil, nil, nil, paramErr("the value of %s is too long", k)
			}
			t.Info[k] = v
		}
	}

	for k, v := range req.Info {
		t.SetInfo(k, v)
	}

	e := &Enroll{Token: t, New: existing == nil, Params: p, Owner: req.Owner, OwnerInfo: req.OwnerInfo, Now: now, Rand: s.cfg.Rand, Service: s, Detail: map[string]any{}, NoImages: req.NoImages, imagesOf: req.ImagesOf}
	enroll := typ.Enroll
	if a, ok := typ.(Adopter); ok && req.adopt {
		enroll = a.Adopt
	}
	if err := enroll(ctx, e); err != nil {
		return nil, nil, nil, err
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
		return nil, nil, nil, paramErr("too many tokeninfo entries")
	}

	// Secrets are sealed before the transaction.
	sealed := maps.Clone(t.Sealed)
	if sealed == nil {
		sealed = map[string][]byte{}
	}
	if e.Key != nil {
		c, err := s.seal(serial, FieldKey, e.Key)
		if err != nil {
			return nil, nil, nil, err
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
			return nil, nil, nil, err
		}
		sealed[f] = c
	}
	t.Sealed = sealed
	if pin, ok := p.Get("pin"); ok && !e.KeepPIN {
		if err := s.setPIN(ctx, t, pin, req.EncryptPIN); err != nil {
			return nil, nil, nil, err
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

	e.Detail["serial"] = serial
	e.Detail["rollout_state"] = t.RolloutState
	return &prepared{t: t, existing: existing, typName: typName, detail: e.Detail, limits: req.Limits, images: e.images}, nil, nil, nil
}

// errExists is the refusal of a serial that is taken by another type.
func errExists(serial, have, want string) *apierr.Error {
	return apierr.New(apierr.TokenAdmin, fmt.Sprintf("Token %s already exists with type %s. Can not initialize token with new type %s", serial, have, want))
}

// commit writes a prepared token in tx. fresh refuses any stored token
// of the serial (an import never touches an existing token).
func (s *Service) commit(tx store.Tx, pr *prepared, fresh bool) error {
	t, serial := pr.t, pr.t.Serial
	var old *Token
	var err error
	if fresh {
		// An import: nothing decoded or written goes through the decode
		// cache.
		old, err = loadUncached(tx, serial)
	} else {
		old, err = s.load(tx, serial)
	}
	if err != nil {
		return err
	}
	nt := t.Clone()
	switch {
	case fresh && old != nil:
		return errImportExists
	case pr.existing == nil && old != nil:
		return errExists(serial, old.Type, pr.typName).Wrap(ErrSerialTaken)
	case pr.existing != nil && old == nil:
		return NotFound(serial)
	case old != nil && old.Type != pr.typName:
		return errExists(serial, old.Type, pr.typName)
	case old == nil:
		if err := checkLimits(tx, t, pr.limits); err != nil {
			return err
		}
		id, err := tx.Bucket(bucketTokens).NextSequence()
		if err != nil {
			return err
		}
		nt.ID = id
	default:
		nt.ID = old.ID
	}
	t.ID = nt.ID
	return s.write(tx, old, nt, !fresh)
}

// errImportExists refuses an imported serial that is taken.
var errImportExists = apierr.New(apierr.TokenImport, "a token with this serial already exists")

// checkLimits applies the enrollment limits to a new token t: the realm's
// tokens from the counter the list indexes keep (one read), the user's
// from the owner index (a prefix of the user's few tokens).
func checkLimits(tx store.Tx, t *Token, l Limits) error {
	realm := l.Realm
	if t.Assigned() {
		realm = t.Owner.Realm
		if l.PerUser != nil {
			n, err := countOfOwner(tx, t.Owner)
			if err != nil {
				return err
			}
			if n >= *l.PerUser {
				return ErrMaxPerUser
			}
		}
	}
	if realm == "" || l.PerRealm == nil {
		return nil
	}
	n, err := countInRealm(tx, realm)
	if err != nil {
		return err
	}
	if n >= *l.PerRealm {
		return ErrMaxPerRealm
	}
	return nil
}

func (s *Service) verifyEnrollment(ctx context.Context, t *Token, value string, info map[string]string, also []func(store.Tx) error) (*Token, map[string]any, error) {
	probe := t.Clone()
	probe.RolloutState = StateEnrolled
	m, err := s.Verify(ctx, probe, value, nil, nil)
	if err != nil || !m.OK {
		return nil, nil, ErrVerifyFailed
	}
	nt, err := s.update(ctx, t.Serial, false, func(x *Token) error {
		if x.RolloutState != StateVerify {
			return ErrVerifyFailed
		}
		x.RolloutState = StateEnrolled
		if m.Apply != nil && !m.Apply(x) {
			return ErrVerifyFailed
		}
		for k, v := range info {
			x.SetInfo(k, v)
		}
		return nil
	}, also)
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

// ImportBatch is an import prepared for one transaction: the tokens to
// write (every type check, key and PIN done) and the records refused.
type ImportBatch struct {
	items  []*prepared
	Failed []ImportFailure
}

// Serials are the serials the batch writes, in file order.
func (b *ImportBatch) Serials() []string {
	out := make([]string, len(b.items))
	for i, it := range b.items {
		out[i] = it.t.Serial
	}
	return out
}

// add prepares one token for the batch; count is its counter.
func (b *ImportBatch) add(ctx context.Context, s *Service, req InitRequest, count uint64) error {
	pr, err := b.prepareNew(ctx, s, req)
	if err != nil {
		return err
	}
	pr.t.Count = count
	b.items = append(b.items, pr)
	return nil
}

// prepareNew prepares req as a new token: a serial already in the batch
// or stored is refused with errImportExists. The caller adds the result
// to b.items once it has set what req does not carry.
func (b *ImportBatch) prepareNew(ctx context.Context, s *Service, req InitRequest) (*prepared, error) {
	for _, it := range b.items {
		if it.t.Serial == req.Serial {
			return nil, errImportExists
		}
	}
	pr, _, _, err := s.prepare(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	if pr == nil || pr.existing != nil {
		return nil, errImportExists
	}
	return pr, nil
}

// CommitImport writes every token of b in one store transaction with also
// (the import's audit entry): an import is all or nothing, so the audit
// entry names exactly what it committed. A serial taken since the batch
// was prepared fails the whole import.
func (s *Service) CommitImport(ctx context.Context, b *ImportBatch, also ...func(store.Tx) error) error {
	return s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		for _, pr := range b.items {
			if err := s.commit(tx, pr, true); err != nil {
				if errors.Is(err, errImportExists) {
					return apierr.New(apierr.TokenImport, "the token "+pr.t.Serial+" was created during the import")
				}
				return err
			}
		}
		return store.RunAlso(tx, also)
	})
}

// importFailed reports every record of a batch whose transaction failed.
func importFailed(b *ImportBatch, err error) []ImportFailure {
	reason := "the token store failed"
	if e, ok := errors.AsType[*apierr.Error](err); ok {
		reason = e.Error()
	}
	out := b.Failed
	for _, serial := range b.Serials() {
		out = append(out, ImportFailure{serial, reason})
	}
	return out
}
