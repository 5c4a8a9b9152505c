package authsrv

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/authsrv/authsrv/internal/secret"
)

// JWTKeysFile is the data directory's JWT key ring. It appears at the
// first rotation; until then the ring is the jwtkey file's one key.
const JWTKeysFile = "jwtkeys"

// Bounds of the key ring file.
const (
	jwtRingFormat  = 1
	maxJWTRingFile = 1 << 20
	maxJWTKeys     = 1000
	jwtKeySize     = 32
)

// ErrJWTUnknownKey is wrapped by ParseJWT's error when a token names a key
// id the ring does not hold (never held, or dropped after its retirement
// window), or has no key id and the ring holds no key for such tokens.
var ErrJWTUnknownKey = errors.New("jwt: the token's key id is unknown")

// ErrJWTKeyGiven refuses a rotation when the embedding program gave the
// key (WithJWTKey): it is the program's to rotate.
var ErrJWTKeyGiven = errors.New("the JWT key was given by the program (WithJWTKey): rotate it there")

// JWTKey describes one key of the ring, never its secret.
type JWTKey struct {
	// KID is the key id that tokens signed with the key carry.
	KID     string    `json:"kid"`
	Created time.Time `json:"created"`
	// Current is the key that signs new tokens; the others only verify.
	Current bool `json:"current"`
	// Legacy is the data directory's first key (the jwtkey file): it also
	// verifies tokens without a key id, issued before the ring existed.
	Legacy bool `json:"legacy,omitempty"`
	// Retired is when another key became current (zero for the current).
	Retired time.Time `json:"retired,omitzero"`
	// VerifyUntil is when a retired key is dropped: the expiry of the last
	// token it could have signed.
	VerifyUntil time.Time `json:"verify_until,omitzero"`
}

// ringKey is one key as the ring file holds it.
type ringKey struct {
	KID     string    `json:"kid"`
	Key     []byte    `json:"key"`
	Created time.Time `json:"created"`
	Legacy  bool      `json:"legacy,omitempty"`
	Retired time.Time `json:"retired,omitzero"`
	// VerifyUntil: see JWTKey.
	VerifyUntil time.Time `json:"verify_until,omitzero"`
	// SignedUntil is the latest expiry of a token the key signed that
	// outlives a session (an API key), so that retiring the key keeps it
	// for as long as such a token is valid.
	SignedUntil time.Time `json:"signed_until,omitzero"`
}

type ringFile struct {
	Format int       `json:"format"`
	Keys   []ringKey `json:"keys"`
}

// keyRing holds the JWT keys. Readers take the immutable key list from an
// atomic pointer; writers serialise on mu, write the file first (when the
// ring has one) and then publish the new list.
type keyRing struct {
	mu   sync.Mutex
	keys atomic.Pointer[[]ringKey]
	// dir is the data directory; "" when the key was given by option
	// (the ring then lives in memory and does not rotate).
	dir string
	// file reports whether dir holds a ring file (else only jwtkey).
	file bool
}

// jwtKID derives a key's id from the key: it tells nothing about the key
// and is the same wherever the key is.
func jwtKID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("authsrv jwt key id"))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// newLegacyRing is the ring of one key that verifies tokens without a key
// id as well.
func newLegacyRing(dir string, key []byte, created time.Time) *keyRing {
	r := &keyRing{dir: dir}
	keys := []ringKey{{KID: jwtKID(key), Key: slices.Clone(key), Created: created.UTC(), Legacy: true}}
	r.keys.Store(&keys)
	return r
}

// loadRing reads dir's ring file; ok is false when there is none.
func loadRing(dir string) (*keyRing, bool, error) {
	path := filepath.Join(dir, JWTKeysFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("jwt key ring: %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("jwt key ring: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, false, fmt.Errorf("jwt key ring %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, false, fmt.Errorf("jwt key ring %s has mode %04o, so group or others may access it; "+
			"refusing to use it: run chmod 0600 %s and rotate the key (authsrv jwt rotate)", path, perm, path)
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxJWTRingFile+1))
	if err != nil {
		return nil, false, fmt.Errorf("jwt key ring: %w", err)
	}
	keys, err := parseRing(raw)
	if err != nil {
		return nil, false, fmt.Errorf("jwt key ring %s: %w", path, err)
	}
	r := &keyRing{dir: dir, file: true}
	r.keys.Store(&keys)
	return r, true, nil
}

// parseRing decodes and checks a ring file: known format, 1 to maxJWTKeys
// keys of 32 bytes or more with distinct ids that match the keys, exactly
// one current key (the last) and at most one legacy key.
func parseRing(raw []byte) ([]ringKey, error) {
	if len(raw) > maxJWTRingFile {
		return nil, errors.New("too large")
	}
	var rf ringFile
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, fmt.Errorf("not readable: %w", err)
	}
	if rf.Format != jwtRingFormat {
		return nil, fmt.Errorf("format %d, want %d", rf.Format, jwtRingFormat)
	}
	if len(rf.Keys) == 0 || len(rf.Keys) > maxJWTKeys {
		return nil, fmt.Errorf("%d keys, want 1 to %d", len(rf.Keys), maxJWTKeys)
	}
	seen := map[string]bool{}
	legacy := 0
	for i, k := range rf.Keys {
		if len(k.Key) < jwtKeySize {
			return nil, fmt.Errorf("key %d has %d bytes, want at least %d", i, len(k.Key), jwtKeySize)
		}
		if k.KID != jwtKID(k.Key) || seen[k.KID] {
			return nil, fmt.Errorf("key %d: its id %q does not match its key or is not unique", i, k.KID)
		}
		seen[k.KID] = true
		last := i == len(rf.Keys)-1
		if last != k.Retired.IsZero() {
			return nil, errors.New("the current key must be the last one, and the only one not retired")
		}
		if !last && k.VerifyUntil.IsZero() {
			return nil, fmt.Errorf("retired key %s has no verify_until", k.KID)
		}
		if k.Legacy {
			legacy++
		}
	}
	if legacy > 1 {
		return nil, errors.New("more than one legacy key")
	}
	return rf.Keys, nil
}

// marshal is the ring file's content for keys.
func marshalRing(keys []ringKey) ([]byte, error) {
	return json.MarshalIndent(ringFile{Format: jwtRingFormat, Keys: keys}, "", "  ")
}

// current is the key that signs.
func (r *keyRing) current() ringKey {
	keys := *r.keys.Load()
	return keys[len(keys)-1]
}

// verifier returns the key that verifies a token with key id kid (""
// when the token has none) at now.
func (r *keyRing) verifier(kid string, now time.Time) ([]byte, error) {
	for _, k := range *r.keys.Load() {
		if (kid != "" && k.KID == kid) || (kid == "" && k.Legacy) {
			if !k.Retired.IsZero() && !now.Before(k.VerifyUntil) {
				break
			}
			return k.Key, nil
		}
	}
	return nil, ErrJWTUnknownKey
}

// list describes the ring.
func (r *keyRing) list() []JWTKey {
	keys := *r.keys.Load()
	out := make([]JWTKey, len(keys))
	for i, k := range keys {
		out[i] = JWTKey{KID: k.KID, Created: k.Created, Current: i == len(keys)-1, Legacy: k.Legacy,
			Retired: k.Retired, VerifyUntil: k.VerifyUntil}
	}
	return out
}

// update computes a new key list from the current one under the writers'
// lock, writes the ring file (creating it when the ring had none) and
// publishes the list. fn returns false when nothing changes. A failing
// write leaves the ring as it was.
func (r *keyRing) update(fn func(keys []ringKey) ([]ringKey, bool, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, changed, err := fn(slices.Clone(*r.keys.Load()))
	if err != nil || !changed {
		return err
	}
	if r.dir != "" {
		if err := r.write(next); err != nil {
			return err
		}
	}
	r.keys.Store(&next)
	return nil
}

// write replaces the ring file atomically (a synced temporary file renamed
// over it, mode 0600). Once the legacy key is gone from the ring, the
// jwtkey file that held it is removed as well.
func (r *keyRing) write(keys []ringKey) error {
	raw, err := marshalRing(keys)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(r.dir, JWTKeysFile), raw); err != nil {
		return fmt.Errorf("jwt key ring: %w", err)
	}
	r.file = true
	if !slices.ContainsFunc(keys, func(k ringKey) bool { return k.Legacy }) {
		if err := os.Remove(filepath.Join(r.dir, JWTKeyFile)); err == nil {
			_ = syncDir(r.dir)
		}
	}
	return nil
}

// writeFileAtomic writes data to path through a synced temporary file in
// the same directory renamed over path, with mode 0600, and syncs the
// directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return syncDir(dir)
}

// prune drops the retired keys whose window ended at now.
func prune(keys []ringKey, now time.Time) ([]ringKey, bool) {
	n := len(keys)
	keys = slices.DeleteFunc(keys, func(k ringKey) bool {
		return !k.Retired.IsZero() && !now.Before(k.VerifyUntil)
	})
	return keys, len(keys) != n
}

// rotate adds a new current key (32 bytes from rnd) and retires the old
// one: it verifies until lifetime after now, or until the last long-lived
// token it signed expires if that is later. Expired keys are dropped;
// with dropOld every older key is, at once.
func (r *keyRing) rotate(rnd io.Reader, now time.Time, lifetime time.Duration, dropOld bool) (JWTKey, error) {
	if r.dir == "" {
		return JWTKey{}, ErrJWTKeyGiven
	}
	now = now.UTC()
	err := r.update(func(keys []ringKey) ([]ringKey, bool, error) {
		key := make([]byte, jwtKeySize)
		if _, err := io.ReadFull(rnd, key); err != nil {
			return nil, false, fmt.Errorf("jwt key: reading random key: %w", err)
		}
		kid := jwtKID(key)
		if slices.ContainsFunc(keys, func(k ringKey) bool { return k.KID == kid }) {
			return nil, false, errors.New("jwt key: the new key's id is taken (the random source repeats itself)")
		}
		cur := &keys[len(keys)-1]
		cur.Retired = now
		cur.VerifyUntil = now.Add(lifetime)
		if cur.SignedUntil.After(cur.VerifyUntil) {
			cur.VerifyUntil = cur.SignedUntil
		}
		if dropOld {
			keys = keys[:0]
		}
		keys = append(keys, ringKey{KID: kid, Key: key, Created: now})
		keys, _ = prune(keys, now)
		if len(keys) > maxJWTKeys {
			return nil, false, fmt.Errorf("jwt key ring: %d keys still verify tokens, at most %d may", len(keys)-1, maxJWTKeys-1)
		}
		return keys, true, nil
	})
	if err != nil {
		return JWTKey{}, err
	}
	l := r.list()
	return l[len(l)-1], nil
}

// prune drops expired keys from the ring (and its file).
func (r *keyRing) prune(now time.Time) error {
	return r.update(func(keys []ringKey) ([]ringKey, bool, error) {
		keys, changed := prune(keys, now)
		return keys, changed && r.file, nil
	})
}

// signedUntil records that the key kid signs a token valid until exp, when
// that is later than what the ring knows of it; a key retired meanwhile
// verifies until exp as well.
func (r *keyRing) signedUntil(kid string, exp time.Time) error {
	return r.update(func(keys []ringKey) ([]ringKey, bool, error) {
		i := slices.IndexFunc(keys, func(k ringKey) bool { return k.KID == kid })
		if i < 0 {
			return nil, false, ErrJWTUnknownKey
		}
		k := &keys[i]
		if !exp.After(k.SignedUntil) {
			return keys, false, nil
		}
		k.SignedUntil = exp.UTC()
		if !k.Retired.IsZero() && exp.After(k.VerifyUntil) {
			k.VerifyUntil = k.SignedUntil
		}
		return keys, true, nil
	})
}

// marshal is the ring file's content as the ring stands.
func (r *keyRing) marshal() ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return marshalRing(*r.keys.Load())
}

// legacyKey is the legacy key while the ring holds it.
func (r *keyRing) legacyKey() ([]byte, bool) {
	for _, k := range *r.keys.Load() {
		if k.Legacy {
			return k.Key, true
		}
	}
	return nil, false
}

// openJWTKeys loads the data directory's ring, or makes the ring of its
// jwtkey file (created at first start) when it has none, and drops the
// keys whose window ended.
func (s *Server) openJWTKeys() error {
	dir := s.cfg.dataDir
	r, ok, err := loadRing(dir)
	if err != nil {
		return err
	}
	if !ok {
		path := filepath.Join(dir, JWTKeyFile)
		key, _, err := secret.LoadOrCreateKeyFile(path, s.cfg.rand)
		if err != nil {
			return err
		}
		created := s.cfg.now()
		if fi, err := os.Stat(path); err == nil {
			created = fi.ModTime()
		}
		r = newLegacyRing(dir, key, created)
	}
	if err := r.prune(s.cfg.now()); err != nil {
		// The expired keys verify nothing anyway; the next rotation or
		// retention run drops them from the file.
		s.cfg.log.Warn().Err(err).Str("component", "jwt").Msg("dropping expired JWT keys failed")
	}
	s.jwtKeys = r
	return nil
}
