package machine

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
)

// The offline application: HOTP values handed out in advance as salted
// hashes, for a machine (pam_privacyidea, the credential provider) that
// must let its user in while it cannot reach the server.
const (
	// OfflineName is the offline application's name.
	OfflineName = "offline"
	// OfflineDefaultCount is the number of values handed out when the
	// binding sets no "count".
	OfflineDefaultCount = 100
	// OfflineMaxCount bounds "count".
	OfflineMaxCount = 1000
	// OfflineDefaultRounds is privacyIDEA's PBKDF2 rounds when the
	// binding sets no "rounds".
	OfflineDefaultRounds = 6549
	// InfoRefillToken is the tokeninfo key of the refill token.
	InfoRefillToken = "refilltoken"
	// refillTokenLen is the refill token's random bytes (80 hex digits).
	refillTokenLen = 40
	// offlineAttempts bounds the retries when the token's counter moved
	// (an online authentication) between reading it and writing it.
	offlineAttempts = 3
)

// The errors of an offline refill, as privacyIDEA words them.
var (
	ErrRefillNoToken  = apierr.New(apierr.Parameter, "The token does not exist")
	ErrRefillInvalid  = apierr.New(apierr.Parameter, "The token is not valid.")
	ErrRefillRefused  = apierr.New(apierr.Parameter, "Token is not an offline token or refill token is incorrect")
	ErrRefillWrongOTP = apierr.New(apierr.Validate, "You provided a wrong OTP value.")
	// ErrOfflineType: the token is not an HOTP token.
	ErrOfflineType = apierr.New(apierr.Parameter, "The offline application serves HOTP tokens only.")
	// ErrOfflineBusy: the token's counter kept moving while the values
	// were made.
	ErrOfflineBusy = apierr.New(apierr.Busy, "The token is in use, please try again.")
	// errOfflineKey: the token has no usable HOTP key or counter.
	errOfflineKey = apierr.New(apierr.TokenAdmin, "The token cannot hand out offline values.")
	// errCounterMoved makes a write start over.
	errCounterMoved = errors.New("token counter moved")
)

// OfflineOptions are the options of an offline binding.
type OfflineOptions struct {
	// Count is how many values are handed out (1..OfflineMaxCount).
	Count int
	// Rounds are the PBKDF2 rounds of each hash.
	Rounds int
}

// ParseOfflineOptions reads "count" and "rounds" of a binding's options
// (decimal text; missing: the defaults) and checks their bounds: count
// 1..OfflineMaxCount, rounds PBKDF2MinRounds..PBKDF2MaxRounds and count ×
// rounds at most PBKDF2MaxWork.
func ParseOfflineOptions(opts map[string]string) (OfflineOptions, error) {
	o := OfflineOptions{Count: OfflineDefaultCount, Rounds: OfflineDefaultRounds}
	num := func(key string, dst *int, lo, hi int) error {
		s, ok := opts[key]
		if !ok || strings.TrimSpace(s) == "" {
			return nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < lo || n > hi {
			return apierr.Newf(apierr.Parameter, "The offline option %s must be a number from %d to %d.", key, lo, hi)
		}
		*dst = n
		return nil
	}
	if err := num("count", &o.Count, 1, OfflineMaxCount); err != nil {
		return o, err
	}
	if err := num("rounds", &o.Rounds, PBKDF2MinRounds, PBKDF2MaxRounds); err != nil {
		return o, err
	}
	if o.Count*o.Rounds > PBKDF2MaxWork {
		return o, apierr.Newf(apierr.Parameter, "The offline options count × rounds must not exceed %d.", PBKDF2MaxWork)
	}
	return o, nil
}

// OfflineItem is what the offline application hands out for one token.
type OfflineItem struct {
	Serial string
	// User is the owner's login ("" for a token without owner).
	User string
	// RefillToken is the new refill token (80 hex digits).
	RefillToken string
	// Response maps each counter (decimal) to the hash of PIN and OTP
	// value at that counter.
	Response map[string]string
}

// Map is the item as GET /machine/authitem and /validate/check answer
// it: user and username (with an owner), refilltoken and response. The
// caller adds the binding's options and the serial.
func (it OfflineItem) Map() map[string]any {
	m := map[string]any{"refilltoken": it.RefillToken, "response": it.Response}
	if it.User != "" {
		m["user"], m["username"] = it.User, it.User
	}
	return m
}

// OfflineConfig holds the dependencies of Offline.
type OfflineConfig struct {
	// Tokens reads and changes the tokens.
	Tokens *token.Service
	// Rand makes the salts and refill tokens (crypto/rand.Reader in
	// production).
	Rand io.Reader
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// PINAfterOTP hashes OTP+PIN instead of PIN+OTP (privacyIDEA's
	// PrependPin set to false); the password of a refill is split the
	// same way. The token settings' AppendPIN (the system setting, read
	// at each use) does the same.
	PINAfterOTP bool
	// CheckPIN checks the PIN part of a refill's password; nil: the
	// token's own PIN (Tokens.CheckPIN).
	CheckPIN func(ctx context.Context, t *token.Token, pin string) (bool, error)
}

// Offline is the offline application. It implements App for GET
// /machine/authitem/offline, and gives the validator and the refill
// operation their values.
type Offline struct {
	cfg OfflineConfig
	// rmu serialises the reads of cfg.Rand, which need not be safe for
	// concurrent use.
	rmu sync.Mutex
}

var _ App = (*Offline)(nil)

// NewOffline returns the offline application.
func NewOffline(cfg OfflineConfig) *Offline {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.CheckPIN == nil {
		cfg.CheckPIN = cfg.Tokens.CheckPIN
	}
	return &Offline{cfg: cfg}
}

// Name implements App.
func (*Offline) Name() string { return OfflineName }

// Options implements App: hotp tokens take count and rounds; webauthn
// and passkey are listed as privacyIDEA lists them, without options.
func (*Offline) Options(context.Context) (map[string]map[string]OptionSpec, error) {
	return map[string]map[string]OptionSpec{
		"hotp":     {"count": {Type: OptionStr}, "rounds": {Type: OptionStr}},
		"webauthn": {},
		"passkey":  {},
	}, nil
}

// AuthItem implements App: the next count values of a usable HOTP token
// with the PIN split from req.Challenge (none without), the token's
// counter moved past them and a new refill token stored, in one write.
// Other token types (this server has no offline WebAuthn) and unusable
// tokens give none.
func (o *Offline) AuthItem(ctx context.Context, b Binding, t *token.Token, req AuthItemRequest) (map[string]any, bool, error) {
	if t.Type != "hotp" || o.cfg.Tokens.Unusable(t, o.cfg.Now()) != "" {
		return nil, false, nil
	}
	opts, err := ParseOfflineOptions(b.Options)
	if err != nil {
		return nil, false, err
	}
	pin := ""
	if req.Challenge != "" {
		pin, _, _ = o.split(t, req.Challenge)
	}
	it, err := o.Issue(ctx, t.Serial, pin, opts, req.Also...)
	if err != nil {
		return nil, false, err
	}
	return it.Map(), true, nil
}

// split divides pass into PIN and OTP value by the token's OTP length,
// on the side PINAfterOTP says; ok is false when pass is shorter than an
// OTP value.
func (o *Offline) split(t *token.Token, pass string) (pin, otpValue string, ok bool) {
	r := []rune(pass)
	n := t.OTPLen
	if n <= 0 || len(r) < n {
		return "", "", false
	}
	if o.pinAfterOTP() {
		return string(r[n:]), string(r[:n]), true
	}
	return string(r[:len(r)-n]), string(r[len(r)-n:]), true
}

// Issue hands out the next opts.Count values of the HOTP token serial,
// each hashed with pin: the counter moves past them and a new refill
// token is stored in one store write, with also in its transaction. The
// hashes are made before that write; when the counter moved meanwhile
// (the token was used), Issue starts over, and the counter never moves
// backwards.
func (o *Offline) Issue(ctx context.Context, serial, pin string, opts OfflineOptions, also ...func(store.Tx) error) (OfflineItem, error) {
	for range offlineAttempts {
		t, err := o.cfg.Tokens.Get(ctx, serial)
		if err != nil {
			return OfflineItem{}, err
		}
		if t.Type != "hotp" {
			return OfflineItem{}, ErrOfflineType
		}
		it, err := o.advance(ctx, t, pin, uint64(opts.Count), opts.Rounds, "", also)
		if errors.Is(err, errCounterMoved) {
			continue
		}
		return it, err
	}
	return OfflineItem{}, ErrOfflineBusy
}

// RefillRequest is one offline refill.
type RefillRequest struct {
	Serial      string
	RefillToken string
	// Pass is the last PIN and OTP value the user entered offline.
	Pass string
	// Attached tells whether the token is attached to the offline
	// application; Options are that binding's options.
	Attached bool
	Options  OfflineOptions
}

// Refill answers an offline refill (privacyIDEA's /validate/offlinerefill):
// the token must exist (ErrRefillNoToken) and be usable
// (ErrRefillInvalid), be an HOTP token attached to the offline
// application whose stored refill token equals req.RefillToken
// (ErrRefillRefused), and the OTP part of req.Pass must be one of the
// values handed out last (the req.Options.Count counters before the
// token's counter) and its PIN part the token's PIN (ErrRefillWrongOTP
// for either). It then hands out as many new values as the client used
// (up to and including the one it names), from the token's counter, and
// rotates the refill token, with also in the same write. The refill
// token is checked again inside that write, so of two refills with the
// same refill token exactly one succeeds; a refused refill changes
// nothing.
func (o *Offline) Refill(ctx context.Context, req RefillRequest, also ...func(store.Tx) error) (OfflineItem, error) {
	for range offlineAttempts {
		it, err := o.refill(ctx, req, also)
		if errors.Is(err, errCounterMoved) {
			continue
		}
		return it, err
	}
	return OfflineItem{}, ErrOfflineBusy
}

func (o *Offline) refill(ctx context.Context, req RefillRequest, also []func(store.Tx) error) (OfflineItem, error) {
	t, err := o.cfg.Tokens.Get(ctx, req.Serial)
	if apierr.Is(err, apierr.ResourceNotFound) {
		return OfflineItem{}, ErrRefillNoToken
	}
	if err != nil {
		return OfflineItem{}, err
	}
	if o.cfg.Tokens.Unusable(t, o.cfg.Now()) != "" {
		return OfflineItem{}, ErrRefillInvalid
	}
	if !req.Attached || t.Type != "hotp" || !refillEqual(t.Info[InfoRefillToken], req.RefillToken) {
		return OfflineItem{}, ErrRefillRefused
	}
	pin, otpValue, ok := o.split(t, req.Pass)
	if !ok {
		return OfflineItem{}, ErrRefillWrongOTP
	}
	key, err := o.cfg.Tokens.Secret(t, token.FieldKey)
	if err != nil {
		return OfflineItem{}, err
	}
	if key == nil {
		return OfflineItem{}, ErrRefillRefused
	}
	// The values handed out last end right before the counter; only
	// those are searched (never values not handed out yet).
	cur := t.Count
	first := cur - min(cur, uint64(req.Options.Count))
	m, found := otp.CheckHOTP(key, otpValue, first, int(cur-first), t.OTPLen, t.Hash())
	if !found {
		return OfflineItem{}, ErrRefillWrongOTP
	}
	if ok, err := o.cfg.CheckPIN(ctx, t, pin); err != nil {
		return OfflineItem{}, err
	} else if !ok {
		return OfflineItem{}, ErrRefillWrongOTP
	}
	return o.advance(ctx, t, pin, m-first+1, req.Options.Rounds, req.RefillToken, also)
}

// refillEqual compares a stored refill token with a presented one in
// constant time; an empty stored token matches nothing.
func refillEqual(stored, presented string) bool {
	return stored != "" && subtle.ConstantTimeCompare([]byte(stored), []byte(presented)) == 1
}

// advance makes n hashes of pin with the values of t from its counter,
// then in one write moves the counter past them and stores a new refill
// token, when the stored token still has that counter (errCounterMoved
// otherwise) and, when expect is set, still has that refill token
// (ErrRefillRefused otherwise).
func (o *Offline) advance(ctx context.Context, t *token.Token, pin string, n uint64, rounds int, expect string, also []func(store.Tx) error) (OfflineItem, error) {
	start := t.Count
	if n == 0 || start > math.MaxUint64-n {
		return OfflineItem{}, errOfflineKey
	}
	key, err := o.cfg.Tokens.Secret(t, token.FieldKey)
	if err != nil {
		return OfflineItem{}, err
	}
	if key == nil || otp.HOTP(key, start, t.OTPLen, t.Hash()) == "" {
		return OfflineItem{}, errOfflineKey
	}
	resp, err := o.hashes(ctx, key, t, start, n, rounds, pin)
	if err != nil {
		return OfflineItem{}, err
	}
	refill, err := o.random(refillTokenLen)
	if err != nil {
		return OfflineItem{}, err
	}
	refillHex := hex.EncodeToString(refill)
	_, err = o.cfg.Tokens.Update(ctx, t.Serial, false, func(cur *token.Token) error {
		if expect != "" && !refillEqual(cur.Info[InfoRefillToken], expect) {
			return ErrRefillRefused
		}
		if cur.Count != start {
			return errCounterMoved
		}
		cur.Count = start + n
		cur.SetInfo(InfoRefillToken, refillHex)
		return nil
	}, also...)
	if err != nil {
		return OfflineItem{}, err
	}
	it := OfflineItem{Serial: t.Serial, RefillToken: refillHex, Response: resp}
	if t.Owner != nil {
		it.User = t.Owner.Login
	}
	return it, nil
}

// pinAfterOTP reports whether passwords are OTP+PIN: PINAfterOTP, or
// the token settings' AppendPIN.
func (o *Offline) pinAfterOTP() bool {
	return o.cfg.PINAfterOTP || o.cfg.Tokens.Settings().AppendPIN
}

// random reads n bytes of the configured source.
func (o *Offline) random(n int) ([]byte, error) {
	b := make([]byte, n)
	o.rmu.Lock()
	defer o.rmu.Unlock()
	if _, err := io.ReadFull(o.cfg.Rand, b); err != nil {
		return nil, err
	}
	return b, nil
}

// hashes makes the n hashes of pin with the OTP values at counters
// start…start+n-1, keyed by counter, on all cores.
func (o *Offline) hashes(ctx context.Context, key []byte, t *token.Token, start, n uint64, rounds int, pin string) (map[string]string, error) {
	salts, err := o.random(int(n) * pbkdf2SaltLen)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	after := o.pinAfterOTP()
	workers := min(runtime.GOMAXPROCS(0), int(n))
	var next sync.Mutex
	i := uint64(0)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				next.Lock()
				j := i
				i++
				next.Unlock()
				if j >= n || ctx.Err() != nil {
					return
				}
				v := otp.HOTP(key, start+j, t.OTPLen, t.Hash())
				pw := pin + v
				if after {
					pw = v + pin
				}
				out[j] = pbkdf2Encode(pw, rounds, salts[j*pbkdf2SaltLen:(j+1)*pbkdf2SaltLen])
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	resp := make(map[string]string, n)
	for j, h := range out {
		resp[strconv.FormatUint(start+uint64(j), 10)] = h
	}
	return resp, nil
}
