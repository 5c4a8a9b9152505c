package token

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// Buckets of the package.
const (
	bucketTokens     = "tokens"
	bucketOwner      = "tokens.owner"
	bucketRealm      = "tokens.realm"
	bucketType       = "tokens.type"
	bucketChallenges = "challenges"
)

// FieldKey is the sealed field of the seed.
const FieldKey = "otpkey"

// Errors of the package. Messages follow privacyIDEA.
var (
	// ErrReplay means a match was no longer valid when it was committed:
	// the OTP (or a later one) was used meanwhile.
	ErrReplay = errors.New("token: the OTP value was used meanwhile")
	// ErrLocked: the token is revoked (locked) and refuses the change.
	ErrLocked = apierr.New(apierr.TokenAdmin, "This action is not possible, since the token is locked").WithNumber(1007)
	// ErrGenkeyAndOtpkey: both genkey and otpkey were given.
	ErrGenkeyAndOtpkey = apierr.New(apierr.Parameter, "[ParameterError] You may either specify genkey or otpkey, but not both!").WithNumber(344)
	// ErrLostUnassigned: a lost token needs an owner.
	ErrLostUnassigned = apierr.New(apierr.TokenAdmin, "You can only define a lost token for an assigned token.").WithNumber(2012)
	// ErrCorrupt: a sealed secret does not open (corrupt data or another
	// enckey). The token is unusable; nothing is revealed.
	ErrCorrupt = errors.New("token: a sealed token secret could not be opened")
)

// NotFound is privacyIDEA's "No token found for serials" error.
func NotFound(serials ...string) error {
	return apierr.New(apierr.ResourceNotFound, "No token found for serials: "+strings.Join(serials, ", "))
}

func errBadDate(s string) error {
	return apierr.New(apierr.Parameter, fmt.Sprintf("Could not parse the date %q: use YYYY-MM-DDThh:mm+zzzz", s))
}

func paramErr(format string, args ...any) error {
	return apierr.New(apierr.Parameter, fmt.Sprintf(format, args...))
}

// Settings are the system-wide token defaults (privacyIDEA's system
// config). The zero value of a field means its default.
type Settings struct {
	DefaultOtpLen        int           // 6
	DefaultCountWindow   int           // 10
	DefaultSyncWindow    int           // 1000
	DefaultMaxFailCount  int           // 10
	FailcounterClearTime time.Duration // 0 = never clear
	TOTPTimeStep         int           // 30
	TOTPTimeWindow       int           // 180
	ChallengeValidity    time.Duration // 120 s
	// SerialRandom makes generated serials prefix + random characters
	// only (PI_TOKEN_SERIAL_RANDOM).
	SerialRandom bool
	// AutoResync lets an HOTP, paper or TOTP token that fell out of its
	// window resynchronise during authentication: a wrong value inside
	// the sync window is remembered, and the value right after it,
	// within AutoResyncTimeout, is accepted (privacyIDEA's AutoResync,
	// default off).
	AutoResync        bool
	AutoResyncTimeout time.Duration // 300 s
	// HOTPHashlib and TOTPHashlib are the hash algorithms of new HOTP
	// and TOTP tokens enrolled without "hashlib" (hotp.hashlib,
	// totp.hashlib; "" is sha1).
	HOTPHashlib string
	TOTPHashlib string
	// AppendPIN puts the OTP value before the PIN in the password
	// (privacyIDEA's PrependPin set to false; default: PIN first).
	AppendPIN bool
	// NoSplitAtSign keeps "login@realm" whole (splitAtSign false).
	NoSplitAtSign bool
	// NoIncFailCountOnFalsePin leaves the fail counters alone when no
	// PIN matched (IncFailCountOnFalsePin false).
	NoIncFailCountOnFalsePin bool
	// NoAuthCounter leaves count_auth and count_auth_success alone
	// (no_auth_counter).
	NoAuthCounter bool
	// Values are the effective system settings by their privacyIDEA
	// key ("email.identifier", "email.validtime", "sms.identifier", ...)
	// for the token types that read one. Read-only: it is shared.
	Values map[string]string
}

// Value returns the system setting key ("" when unset).
func (s *Settings) Value(key string) string { return s.Values[key] }

func (s Settings) withDefaults() Settings {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&s.DefaultOtpLen, 6)
	def(&s.DefaultCountWindow, 10)
	def(&s.DefaultSyncWindow, 1000)
	def(&s.DefaultMaxFailCount, 10)
	def(&s.TOTPTimeStep, 30)
	def(&s.TOTPTimeWindow, 180)
	if s.ChallengeValidity <= 0 {
		s.ChallengeValidity = 120 * time.Second
	}
	if s.AutoResyncTimeout <= 0 {
		s.AutoResyncTimeout = 300 * time.Second
	}
	return s
}

// Sealer seals and opens the token secrets (seeds, encrypted PINs,
// challenge data) with AES-256-GCM and additional data binding each
// ciphertext to its record. The root passes its key set; the interface
// keeps the internal implementation out of this package's API.
type Sealer interface {
	Seal(plaintext []byte, ad ...string) ([]byte, error)
	Open(ciphertext []byte, ad ...string) ([]byte, error)
}

var _ Sealer = (*secret.Sealer)(nil)

// Hasher hashes and verifies token PINs (Argon2id through the root's KDF
// limiter). The interface keeps the internal implementation out of this
// package's API. A Hasher that also has Dummy(ctx, password), costing one
// hash and deciding nothing, runs [Service.DummyPIN]; without it DummyPIN
// hashes.
type Hasher interface {
	Hash(ctx context.Context, password string) (string, error)
	Verify(ctx context.Context, encoded, password string) (ok, rehash bool, err error)
}

var _ Hasher = (*secret.Hasher)(nil)

// Config wires the service.
type Config struct {
	Store  store.Store
	Sealer Sealer
	Hasher Hasher
	// Notify sends e-mail and SMS challenges and RADIUS forwards; may be
	// nil when no type needs it.
	Notify *notify.Service
	// Types is the type registry; nil means DefaultRegistry().
	Types    *Registry
	Settings Settings
	// Source, when set, gives the effective settings at each use (the
	// system configuration, shared by the nodes and changed at run
	// time); it returns settings with their defaults applied
	// (WithDefaults) and must be cheap. Settings is used when it returns
	// nil.
	Source func() *Settings
	Now    func() time.Time
	Rand   io.Reader
	// DecodeCacheBytes bounds the memory of the cache of decoded token
	// records that authentications read (0: DefaultDecodeCacheBytes, 16 MiB; negative: no cache).
	DecodeCacheBytes int64
}

// Service manages tokens.
type Service struct {
	cfg Config
	set Settings
	// decoded is this Service's cache of decoded token records (load,
	// save and remove are its methods).
	decoded *decodeCache
	// buildMu serialises BuildIndexes; indexed: the list indexes were
	// seen complete.
	buildMu sync.Mutex
	indexed atomic.Bool
	// listCap bounds the records one list decodes (and the candidates a
	// sort by a changing column or getserial considers).
	listCap int
	// lset is the in-memory list set (listset.go) of the generation it
	// holds; listSetMu serialises its builds; listSetUsed is the time of
	// its last use (Unix ns); setMinWork is the walk above which a list
	// uses it.
	lset      atomic.Pointer[listSet]
	listSetMu sync.Mutex
	// spareSet is a set no list reads any more, whose memory the next
	// patch or build fills again (listset.go, recycle).
	spareSet    atomic.Pointer[listSet]
	listSetUsed atomic.Int64
	setMinWork  int
	// onRemove runs in every transaction that removes a token (OnRemove).
	onRemove []func(tx store.Tx, serial string) error
}

// OnRemove registers fn to run in every transaction that removes a token
// (a delete, a used-up single-use token, a cancelled rollout), after the
// token's own records are gone, so that a subsystem drops what it keeps
// of the token (the machine tokens) in the same commit. Register before
// the service is used; it is not safe to call concurrently with token
// writes.
func (s *Service) OnRemove(fn func(tx store.Tx, serial string) error) {
	s.onRemove = append(s.onRemove, fn)
}

// New returns the service.
func New(cfg Config) *Service {
	if cfg.Types == nil {
		cfg.Types = DefaultRegistry()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	return &Service{cfg: cfg, set: cfg.Settings.withDefaults(), decoded: newDecodeCache(cfg.DecodeCacheBytes), listCap: DefaultListCap, setMinWork: setMinWork}
}

// Types returns the type registry.
func (s *Service) Types() *Registry { return s.cfg.Types }

// Settings returns the effective settings.
func (s *Service) Settings() Settings { return *s.settings() }

// settings returns the effective settings: Config.Source's when it is set
// (the system configuration, which may change at any time), else the
// fixed ones. Read it once per decision.
func (s *Service) settings() *Settings {
	if s.cfg.Source != nil {
		if set := s.cfg.Source(); set != nil {
			return set
		}
	}
	return &s.set
}

// WithDefaults returns set with every unset number given its default.
func (set Settings) WithDefaults() Settings { return set.withDefaults() }

// Notify returns the notification service (may be nil).
func (s *Service) Notify() *notify.Service { return s.cfg.Notify }

// Now returns the service clock's time.
func (s *Service) Now() time.Time { return s.cfg.Now() }

// Rand returns the random source.
func (s *Service) Rand() io.Reader { return s.cfg.Rand }

// Secret opens the sealed field of t. A missing field gives nil, nil.
func (s *Service) Secret(t *Token, field string) ([]byte, error) {
	c, ok := t.Sealed[field]
	if !ok {
		return nil, nil
	}
	p, err := s.cfg.Sealer.Open(c, bucketTokens, t.Serial, field)
	if err != nil {
		return nil, fmt.Errorf("%w (serial %s, field %s): %w", ErrCorrupt, t.Serial, field, err)
	}
	return p, nil
}

// seal seals a value for t's field.
func (s *Service) seal(serial, field string, v []byte) ([]byte, error) {
	return s.cfg.Sealer.Seal(v, bucketTokens, serial, field)
}

// Seal seals v as t's field (for types that keep extra secrets outside
// enrollment, e.g. challenge data).
func (s *Service) Seal(t *Token, field string, v []byte) error {
	c, err := s.seal(t.Serial, field, v)
	if err != nil {
		return err
	}
	if t.Sealed == nil {
		t.Sealed = map[string][]byte{}
	}
	t.Sealed[field] = c
	return nil
}

// HashPIN turns a PIN into its stored form ("" stays "").
func (s *Service) HashPIN(ctx context.Context, pin string) (string, error) {
	if pin == "" {
		return "", nil
	}
	return s.cfg.Hasher.Hash(ctx, pin)
}

// CheckPIN compares pin with the token's PIN (hashed or encrypted). It
// costs one KDF call for hashed PINs.
func (s *Service) CheckPIN(ctx context.Context, t *Token, pin string) (bool, error) {
	ok, _, err := s.checkPIN(ctx, t, pin, false)
	return ok, err
}

// CheckPINUpgrade is CheckPIN that also returns, when pin matched a hash
// made with other parameters than the configured ones (a PIN hash brought
// over from privacyIDEA, at its far higher cost), a hash of pin with the
// configured parameters, else "". The caller stores it with the token's
// next write, in place of t.PIN if that is still the hash it checked
// (UpgradePIN), so that only the first login pays the old cost.
func (s *Service) CheckPINUpgrade(ctx context.Context, t *Token, pin string) (bool, string, error) {
	return s.checkPIN(ctx, t, pin, true)
}

// UpgradePIN replaces t's PIN hash old with upgraded (CheckPINUpgrade),
// unless the PIN was changed meanwhile.
func UpgradePIN(t *Token, old, upgraded string) {
	if upgraded != "" && len(t.PINSealed) == 0 && t.PIN == old {
		t.PIN = upgraded
	}
}

func (s *Service) checkPIN(ctx context.Context, t *Token, pin string, upgrade bool) (bool, string, error) {
	if len(t.PINSealed) > 0 {
		p, err := s.Secret(&Token{Serial: t.Serial, Sealed: map[string][]byte{"pin": t.PINSealed}}, "pin")
		if err != nil {
			return false, "", err
		}
		return secret.EqualString(string(p), pin), "", nil
	}
	if t.PIN == "" {
		return pin == "", "", nil
	}
	ok, rehash, err := s.cfg.Hasher.Verify(ctx, t.PIN, pin)
	if err != nil || !ok || !rehash || !upgrade {
		return ok, "", err
	}
	h, err := s.cfg.Hasher.Hash(ctx, pin)
	if err != nil {
		// The PIN is right; the upgrade waits for the next login.
		return true, "", nil
	}
	return true, h, nil
}

// DummyPIN costs one PIN verification at the configured KDF cost and
// decides nothing: a rejection that checked no hashed PIN runs it, so
// that its time does not tell whether the user exists or has a PIN.
func (s *Service) DummyPIN(ctx context.Context, pin string) {
	switch h := s.cfg.Hasher.(type) {
	case nil:
	case interface{ Dummy(context.Context, string) }:
		h.Dummy(ctx, pin)
	default:
		_, _ = h.Hash(ctx, pin)
	}
}

// ExistsTx reports whether token serial exists as tx sees it: another
// subsystem's write that must not outlive the token (a machine binding)
// checks it in its own transaction, where a deletion cannot slip in
// between.
func (s *Service) ExistsTx(tx store.Tx, serial string) bool {
	return tx.Bucket(bucketTokens).Get([]byte(serial)) != nil
}

// ---- store helpers ----

func (s *Service) load(tx store.Tx, serial string) (*Token, error) {
	raw := tx.Bucket(bucketTokens).Get([]byte(serial))
	if raw == nil {
		return nil, nil
	}
	cache := s.decoded
	if t, ok := cache.get(serial, raw); ok {
		return t, nil
	}
	t, err := decodeRecord(serial, raw)
	if err != nil {
		return nil, err
	}
	cache.put(serial, raw, t)
	return t, nil
}

// loadShared is load for a caller that only reads the token and clones it
// before any change (Update, Commit, FailAll): it returns the cached
// decoding itself, which nobody may change, and saves load's copy.
func (s *Service) loadShared(tx store.Tx, serial string) (*Token, error) {
	raw := tx.Bucket(bucketTokens).Get([]byte(serial))
	if raw == nil {
		return nil, nil
	}
	if t, ok := s.decoded.peek(serial, raw); ok {
		return t, nil
	}
	t, err := decodeRecord(serial, raw)
	if err != nil {
		return nil, err
	}
	s.decoded.keep(serial, bytes.Clone(raw), t)
	return t, nil
}

// loadUncached reads a token without the decode cache: lists and scans
// neither use nor evict what authentications keep there.
func loadUncached(tx store.Tx, serial string) (*Token, error) {
	raw := tx.Bucket(bucketTokens).Get([]byte(serial))
	if raw == nil {
		return nil, nil
	}
	return decodeRecord(serial, raw)
}

func ownerKey(o *user.User) []byte {
	return []byte(strings.ToLower(o.Realm) + "\x00" + o.Resolver + "\x00" + o.UID + "\x00")
}

func indexKeys(t *Token) map[string][][]byte {
	out := map[string][][]byte{
		bucketType: {[]byte(t.Type + "\x00" + t.Serial)},
	}
	if t.Assigned() {
		out[bucketOwner] = [][]byte{append(ownerKey(t.Owner), t.Serial...)}
	}
	for _, r := range t.Realms {
		out[bucketRealm] = append(out[bucketRealm], []byte(strings.ToLower(r)+"\x00"+t.Serial))
	}
	return out
}

// save writes t and moves its index entries from old (nil for a new
// token).
func (s *Service) save(tx store.Tx, old, t *Token) error {
	return s.write(tx, old, t, true)
}

// write is save; cache false leaves the decode cache as it is (an import
// writes tokens that no authentication has asked for).
func (s *Service) write(tx store.Tx, old, t *Token, cache bool) error {
	// Only the index entries that differ are touched: a counter update
	// (the common write) leaves every indexed field as it was and writes
	// the record only.
	if old == nil || !sameListAttrs(old, t) {
		if err := s.saveIndexes(tx, old, t); err != nil {
			return err
		}
	}
	raw := encodeRecord(t)
	if err := tx.Bucket(bucketTokens).Put([]byte(t.Serial), raw); err != nil {
		return err
	}
	if cache {
		// raw is this write's own buffer, never changed after the Put.
		s.decoded.keep(t.Serial, raw, t.Clone())
	} else {
		s.decoded.forget(t.Serial)
	}
	return nil
}

// saveIndexes moves t's index entries from old (nil for a new token).
func (s *Service) saveIndexes(tx store.Tx, old, t *Token) error {
	if err := saveListIndexes(tx, old, t); err != nil {
		return err
	}
	var oldKeys map[string][][]byte
	if old != nil {
		oldKeys = indexKeys(old)
	}
	newKeys := indexKeys(t)
	for b, keys := range oldKeys {
		for _, k := range keys {
			if slices.ContainsFunc(newKeys[b], func(n []byte) bool { return bytes.Equal(n, k) }) {
				continue
			}
			if err := tx.Bucket(b).Delete(k); err != nil {
				return err
			}
		}
	}
	for b, keys := range newKeys {
		for _, k := range keys {
			if slices.ContainsFunc(oldKeys[b], func(o []byte) bool { return bytes.Equal(o, k) }) {
				continue
			}
			if err := tx.Bucket(b).Put(k, []byte{}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Service) remove(tx store.Tx, t *Token) error {
	if err := saveListIndexes(tx, t, nil); err != nil {
		return err
	}
	for b, keys := range indexKeys(t) {
		for _, k := range keys {
			if err := tx.Bucket(b).Delete(k); err != nil {
				return err
			}
		}
	}
	if err := deleteChallengesOf(tx, t.Serial); err != nil {
		return err
	}
	s.decoded.forget(t.Serial)
	if err := tx.Bucket(bucketTokens).Delete([]byte(t.Serial)); err != nil {
		return err
	}
	for _, fn := range s.onRemove {
		if err := fn(tx, t.Serial); err != nil {
			return err
		}
	}
	return nil
}

// Get returns a token by serial, or NotFound.
func (s *Service) Get(ctx context.Context, serial string) (*Token, error) {
	var t *Token
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		var err error
		t, err = s.load(tx, serial)
		return err
	})
	if err == nil && t == nil {
		err = NotFound(serial)
	}
	return t, err
}

// stored reports whether a record of serial exists, without decoding it.
func (s *Service) stored(ctx context.Context, serial string) (bool, error) {
	ok := false
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		ok = tx.Bucket(bucketTokens).Get([]byte(serial)) != nil
		return nil
	})
	return ok, err
}

// Exists reports whether a serial is taken.
func (s *Service) Exists(ctx context.Context, serial string) (bool, error) {
	_, err := s.Get(ctx, serial)
	if apierr.Is(err, apierr.ResourceNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Update applies fn to the stored token in one transaction and returns
// the new state. fn may run more than once; it must only change the token.
// A revoked (locked) token refuses changes unless allowLocked.
func (s *Service) Update(ctx context.Context, serial string, allowLocked bool, fn func(t *Token) error, also ...func(store.Tx) error) (*Token, error) {
	var out *Token
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		old, err := s.loadShared(tx, serial)
		if err != nil {
			return err
		}
		if old == nil {
			return NotFound(serial)
		}
		if old.Locked && !allowLocked {
			return ErrLocked
		}
		t := old.Clone()
		if err := fn(t); err != nil {
			return err
		}
		out = t
		if err := s.save(tx, old, t); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return out, err
}

// ByOwner returns the tokens of a user (realm, resolver and uid must be
// set), ordered by serial.
func (s *Service) ByOwner(ctx context.Context, u user.User) ([]*Token, error) {
	var out []*Token
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		prefix := ownerKey(&u)
		return tx.Bucket(bucketOwner).ForEach(prefix, func(k, _ []byte) error {
			t, err := s.load(tx, string(k[len(prefix):]))
			if err != nil || t == nil {
				return err
			}
			out = append(out, t)
			return nil
		})
	})
	return out, err
}

// RealmHasOwners reports whether users of realm own tokens (realm deletion
// is refused then). It runs inside the caller's transaction.
func RealmHasOwners(tx store.Tx, realm string) (bool, error) {
	found := false
	err := tx.Bucket(bucketOwner).ForEach([]byte(strings.ToLower(realm)+"\x00"), func(_, _ []byte) error {
		found = true
		return store.ErrStop
	})
	return found, err
}

// countType returns the number of tokens of a type: from the counters of
// the list indexes, or by counting where they are not built yet.
func countType(tx store.Tx, typ string) (int, error) {
	if indexesComplete(tx) {
		return readCounter(tx.Bucket(bucketCounts), counterKey(cntType, typ)), nil
	}
	n := 0
	err := tx.Bucket(bucketType).ForEach([]byte(typ+"\x00"), func(_, _ []byte) error { n++; return nil })
	return n, err
}

// newSerial generates a serial for a type that is not taken.
func (s *Service) newSerial(ctx context.Context, typ Type) (string, error) {
	for range 20 {
		var n int
		var serial string
		err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
			var err error
			if n, err = countType(tx, strings.ToLower(typ.Name())); err != nil {
				return err
			}
			if s.settings().SerialRandom {
				serial, err = randomSerial(typ.Prefix(), s.cfg.Rand)
			} else {
				serial, err = otpSerial(typ.Prefix(), n, s.cfg.Rand)
			}
			if err != nil {
				return err
			}
			if tx.Bucket(bucketTokens).Get([]byte(serial)) != nil {
				serial = ""
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		if serial != "" {
			return serial, nil
		}
	}
	return "", apierr.New(apierr.TokenAdmin, "could not generate a free serial number")
}
