package secret

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/sync/semaphore"
)

var (
	// ErrBusy means a key derivation waited longer than MaxWait (or its
	// context ended) for room in the memory budget: the server is
	// overloaded and the request may be retried later.
	ErrBusy = errors.New("secret: too many password hashes in progress, try again later")

	// ErrParamsTooHigh means a hash costs more than the Caps allow, or needs
	// more memory than the whole budget, and is refused without computing it.
	ErrParamsTooHigh = errors.New("secret: password hash parameters above the configured limits")
)

// Caps bound the parameters a hash may have to be verified, so an imported
// or planted hash cannot stall the server. MaxMemory is in KiB.
type Caps struct {
	MaxTime    uint32
	MaxMemory  uint32 // KiB
	MaxThreads uint8
	MaxKeyLen  uint32
}

// DefaultCaps admit privacyIDEA's hashes (t=9, up to 100 MiB, p=8) with room
// to spare.
var DefaultCaps = Caps{MaxTime: 20, MaxMemory: 256 * 1024, MaxThreads: 16, MaxKeyLen: 128}

const (
	defaultBudgetBytes = 512 << 20
	defaultMaxWait     = 10 * time.Second

	// Floors for our own new hashes (imported ones only need RFC 9106's).
	minOwnKeyLen  = 16
	minOwnSaltLen = 16
)

// HasherConfig configures [NewHasher]. Zero fields take their defaults.
type HasherConfig struct {
	Params      Params        // of new hashes; zero means DefaultParams
	Caps        Caps          // zero means DefaultCaps
	BudgetBytes int64         // memory of concurrent key derivations; 0 means 512 MiB
	MaxWait     time.Duration // longest wait for the budget; 0 means 10s
	// MaxParallel bounds the Argon2 lanes computing at once; 0 means
	// GOMAXPROCS. More derivations than CPUs do not finish sooner: they
	// share the cores, each holds its memory longer, and the garbage they
	// leave outpaces the collector.
	MaxParallel int
	Rand        io.Reader // salts; nil means crypto/rand.Reader
	// OnWait, when set, is told how long each key derivation waited for
	// the budget and a CPU lane (0 when it did not wait; also when the
	// wait ended in ErrBusy). It is called on the request's path and must
	// not block.
	OnWait func(time.Duration)
}

// Hasher hashes and verifies PINs and passwords with Argon2. Every key
// derivation first takes its memory, in KiB, from a weighted semaphore
// sized by the budget, so parallel requests queue instead of exhausting
// memory, and a request that waits too long fails with [ErrBusy]. A
// derivation that has started runs to its end; ctx bounds only the wait.
// A Hasher is safe for concurrent use.
type Hasher struct {
	params    Params
	caps      Caps
	budgetKiB int64
	maxWait   time.Duration
	sem       *semaphore.Weighted
	lanes     *semaphore.Weighted // CPU lanes (MaxParallel)
	maxLanes  int64
	dummySalt []byte

	rndMu sync.Mutex
	rnd   io.Reader

	kdfHook func() // tests: called inside the budget, before each derivation
	onWait  func(time.Duration)
}

// NewHasher checks cfg and returns a Hasher. All problems are reported
// together: parameters below the floors (t, p >= 1, m >= 8*p, key and salt
// of at least 16 bytes) or above the caps, and a budget that does not fit
// one hash with the parameters.
func NewHasher(cfg HasherConfig) (*Hasher, error) {
	if cfg.Params == (Params{}) {
		cfg.Params = DefaultParams
	}
	if cfg.Caps == (Caps{}) {
		cfg.Caps = DefaultCaps
	}
	if cfg.BudgetBytes == 0 {
		cfg.BudgetBytes = defaultBudgetBytes
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = defaultMaxWait
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}

	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("secret: hasher config: "+format, args...))
	}
	p, c := cfg.Params, cfg.Caps
	if p.Time < 1 {
		bad("Params.Time must be at least 1")
	}
	if p.Threads < 1 {
		bad("Params.Threads must be at least 1")
	}
	if uint64(p.Memory) < 8*uint64(p.Threads) || p.Memory < 8 {
		bad("Params.Memory (%d KiB) must be at least 8 KiB per thread", p.Memory)
	}
	if p.KeyLen < minOwnKeyLen || p.KeyLen > maxHashLen {
		bad("Params.KeyLen (%d) must be %d to %d bytes", p.KeyLen, minOwnKeyLen, maxHashLen)
	}
	if p.SaltLen < minOwnSaltLen || p.SaltLen > maxSaltLen {
		bad("Params.SaltLen (%d) must be %d to %d bytes", p.SaltLen, minOwnSaltLen, maxSaltLen)
	}
	if c.MaxTime < 1 || c.MaxMemory < 8 || c.MaxThreads < 1 || c.MaxKeyLen < minHashLen {
		bad("every Caps field must be set (MaxTime >= 1, MaxMemory >= 8 KiB, MaxThreads >= 1, MaxKeyLen >= %d)", minHashLen)
	}
	if err := checkCaps(p, c); err != nil {
		bad("Params exceed Caps: %v", err)
	}
	if cfg.BudgetBytes < 0 {
		bad("BudgetBytes must not be negative")
	} else if budgetKiB := cfg.BudgetBytes / 1024; budgetKiB < int64(p.Memory) {
		bad("BudgetBytes (%d) does not fit one hash of Params.Memory %d KiB", cfg.BudgetBytes, p.Memory)
	}
	if cfg.MaxWait < 0 {
		bad("MaxWait must not be negative")
	}
	if cfg.MaxParallel < 0 {
		bad("MaxParallel must not be negative")
	}
	if cfg.MaxParallel == 0 {
		cfg.MaxParallel = runtime.GOMAXPROCS(0)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	h := &Hasher{
		params:    p,
		caps:      c,
		budgetKiB: cfg.BudgetBytes / 1024,
		maxWait:   cfg.MaxWait,
		dummySalt: make([]byte, p.SaltLen),
		rnd:       cfg.Rand,
		onWait:    cfg.OnWait,
	}
	h.sem = semaphore.NewWeighted(h.budgetKiB)
	h.maxLanes = int64(cfg.MaxParallel)
	h.lanes = semaphore.NewWeighted(h.maxLanes)
	return h, nil
}

// checkCaps says which parameter of p is above c, if any.
func checkCaps(p Params, c Caps) error {
	var errs []error
	if p.Time > c.MaxTime {
		errs = append(errs, fmt.Errorf("t=%d above %d", p.Time, c.MaxTime))
	}
	if p.Memory > c.MaxMemory {
		errs = append(errs, fmt.Errorf("m=%d KiB above %d KiB", p.Memory, c.MaxMemory))
	}
	if p.Threads > c.MaxThreads {
		errs = append(errs, fmt.Errorf("p=%d above %d", p.Threads, c.MaxThreads))
	}
	if p.KeyLen > c.MaxKeyLen {
		errs = append(errs, fmt.Errorf("hash length %d above %d bytes", p.KeyLen, c.MaxKeyLen))
	}
	return errors.Join(errs...)
}

// Params returns the parameters of new hashes.
func (h *Hasher) Params() Params { return h.params }

// Hash returns an Argon2id PHC string of password with h.Params() and a
// fresh salt. It fails with [ErrBusy] when the budget stays full.
func (h *Hasher) Hash(ctx context.Context, password string) (string, error) {
	salt := make([]byte, h.params.SaltLen)
	if err := h.readRand(salt); err != nil {
		return "", fmt.Errorf("secret: hash: reading salt: %w", err)
	}
	sum, err := h.derive(ctx, variantID, password, salt, h.params)
	if err != nil {
		return "", err
	}
	return PHC{Variant: variantID, Version: version13, Params: h.params, Salt: salt, Hash: sum}.String(), nil
}

func (h *Hasher) readRand(p []byte) error {
	h.rndMu.Lock()
	defer h.rndMu.Unlock()
	_, err := io.ReadFull(h.rnd, p)
	return err
}

// Verify reports whether password matches encoded, reading the parameters
// from the string, so hashes imported from privacyIDEA verify. A wrong
// password is ok == false with a nil error. Strings that cannot be read or
// verified give [ErrMalformed]; parameters above the caps or the budget give
// [ErrParamsTooHigh], both without any derivation. rehash reports that the
// password matched but the hash should be replaced by a new [Hasher.Hash],
// because its variant, version or parameters differ from ours.
func (h *Hasher) Verify(ctx context.Context, encoded, password string) (ok, rehash bool, err error) {
	p, err := ParsePHC(encoded)
	if err != nil {
		return false, false, err
	}
	if p.Version != version13 {
		return false, false, malformed("argon2 version %d cannot be verified (golang.org/x/crypto implements version 19 only)", p.Version)
	}
	if err := checkCaps(p.Params, h.caps); err != nil {
		return false, false, fmt.Errorf("%w: %w", ErrParamsTooHigh, err)
	}
	sum, err := h.derive(ctx, p.Variant, password, p.Salt, p.Params)
	if err != nil {
		return false, false, err
	}
	ok = subtle.ConstantTimeCompare(sum, p.Hash) == 1
	rehash = ok && (p.Variant != variantID || p.Params != h.params)
	return ok, rehash, nil
}

// Dummy costs what one [Hasher.Hash] costs and returns nothing. Call it when
// the user or token is unknown, so the response time does not tell that it
// does not exist.
func (h *Hasher) Dummy(ctx context.Context, password string) {
	_, _ = h.derive(ctx, variantID, password, h.dummySalt, h.params)
}

// derive runs one key derivation inside the memory budget.
func (h *Hasher) derive(ctx context.Context, variant, password string, salt []byte, p Params) ([]byte, error) {
	release, err := h.acquire(ctx, p.Memory, int64(p.Threads))
	if err != nil {
		return nil, err
	}
	defer release()
	if h.kdfHook != nil {
		h.kdfHook()
	}
	if variant == variantI {
		return argon2.Key([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen), nil
	}
	return argon2.IDKey([]byte(password), salt, p.Time, p.Memory, p.Threads, p.KeyLen), nil
}

// acquire takes kib from the memory budget, then threads CPU lanes,
// waiting at most maxWait in all and while ctx lasts. x/crypto allocates
// at most m KiB (it rounds m down to a multiple of 4*p, and m >= 8*p is
// checked), so m is the weight.
func (h *Hasher) acquire(ctx context.Context, kib uint32, threads int64) (release func(), err error) {
	w := int64(kib)
	if w > h.budgetKiB {
		return nil, fmt.Errorf("%w: the hash needs %d KiB, more than the whole budget of %d KiB", ErrParamsTooHigh, w, h.budgetKiB)
	}
	lanes := min(max(threads, 1), h.maxLanes)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if h.sem.TryAcquire(w) {
		if h.lanes.TryAcquire(lanes) {
			if h.onWait != nil {
				h.onWait(0)
			}
			return func() { h.lanes.Release(lanes); h.sem.Release(w) }, nil
		}
		h.sem.Release(w)
	}
	if h.onWait != nil {
		start := time.Now()
		defer func() { h.onWait(time.Since(start)) }()
	}
	wctx, cancel := context.WithTimeout(ctx, h.maxWait)
	defer cancel()
	busy := func(what string) error {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%w: %w", ErrBusy, cerr)
		}
		return fmt.Errorf("%w: no %s free within %v", ErrBusy, what, h.maxWait)
	}
	if err := h.sem.Acquire(wctx, w); err != nil {
		return nil, busy("memory")
	}
	if err := h.lanes.Acquire(wctx, lanes); err != nil {
		h.sem.Release(w)
		return nil, busy("CPU")
	}
	return func() { h.lanes.Release(lanes); h.sem.Release(w) }, nil
}
