package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

const (
	formatV1   = 0x01
	headerSize = 2 // version, key id
	nonceSize  = 12
	tagSize    = 16
	overhead   = headerSize + nonceSize + tagSize
)

var (
	// ErrDecrypt is the one error of [Sealer.Open], whatever went wrong
	// (unknown key, wrong additional data, tampering, truncation), so a
	// caller cannot be used as an oracle.
	ErrDecrypt = errors.New("secret: cannot decrypt")

	// ErrWrongKey means the configured key does not open the canary stored
	// with the data, so the server must not start: it would fail to read
	// every secret and seal new ones under a key the old data does not use.
	ErrWrongKey = errors.New("secret: wrong encryption key: it does not open the canary stored with the data " +
		"(check the enckey file or the key option)")
)

// canaryPlaintext is what a canary holds; it is not secret.
const canaryPlaintext = "authsrv enckey canary v1"

// canaryAD binds a canary so that no other sealed value passes as one.
var canaryAD = []string{"authsrv", "enckey-canary"}

// Sealer encrypts stored secrets with AES-256-GCM. The first key seals;
// all keys open, so keys can be rotated by adding a new first key and
// re-sealing. A Sealer is safe for concurrent use and holds no raw key
// bytes: printing it shows only key ids.
type Sealer struct {
	primary byte
	ids     []byte // key ids in the order given, for String
	aeads   map[byte]cipher.AEAD

	rndMu sync.Mutex
	rnd   io.Reader
}

// keyID is the first byte of SHA-256 of key. It is derived from the key so
// that it needs no bookkeeping; two keys with the same id are refused.
func keyID(key []byte) byte {
	sum := sha256.Sum256(key)
	return sum[0]
}

// NewSealer returns a Sealer that seals with keys[0] and opens with any of
// keys. Each key must be [KeySize] bytes. Two keys whose ids collide (the
// same key given twice, or a 1-in-256 accident) are refused: generate
// another key. rnd supplies nonces; nil means crypto/rand.Reader. The keys
// are not retained.
func NewSealer(rnd io.Reader, keys ...[]byte) (*Sealer, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	if len(keys) == 0 {
		return nil, errors.New("secret: sealer: no key given")
	}
	s := &Sealer{rnd: rnd, aeads: make(map[byte]cipher.AEAD, len(keys))}
	var errs []error
	index := make(map[byte]int, len(keys))
	for i, k := range keys {
		if len(k) != KeySize {
			errs = append(errs, fmt.Errorf("secret: sealer: key %d has %d bytes, want %d", i, len(k), KeySize))
			continue
		}
		id := keyID(k)
		if j, dup := index[id]; dup {
			errs = append(errs, fmt.Errorf("secret: sealer: keys %d and %d have the same key id 0x%02x "+
				"(the same key twice, or a key id collision: generate a new key)", j, i, id))
			continue
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("secret: sealer: key %d: %w", i, err))
			continue
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			errs = append(errs, fmt.Errorf("secret: sealer: key %d: %w", i, err))
			continue
		}
		index[id] = i
		s.ids = append(s.ids, id)
		s.aeads[id] = aead
		if i == 0 {
			s.primary = id
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}

// Seal encrypts plaintext with the primary key and binds it to ad, which
// names the record the value belongs to (bucket, record key, field), so the
// ciphertext cannot be moved to another record. The same ad parts, in the
// same order, must be given to [Sealer.Open].
func (s *Sealer) Seal(plaintext []byte, ad ...string) ([]byte, error) {
	out := make([]byte, headerSize+nonceSize, overhead+len(plaintext))
	out[0] = formatV1
	out[1] = s.primary
	if err := s.readRand(out[headerSize:]); err != nil {
		return nil, fmt.Errorf("secret: seal: reading nonce: %w", err)
	}
	aead := s.aeads[s.primary]
	return aead.Seal(out, out[headerSize:], plaintext, additionalData(out[:headerSize], ad)), nil
}

func (s *Sealer) readRand(p []byte) error {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	_, err := io.ReadFull(s.rnd, p)
	return err
}

// Open decrypts a value made by [Sealer.Seal] with the same ad. Every
// failure returns [ErrDecrypt] and nothing else, so that callers leak no
// detail about why a value did not open.
func (s *Sealer) Open(ciphertext []byte, ad ...string) ([]byte, error) {
	if len(ciphertext) < overhead || ciphertext[0] != formatV1 {
		return nil, ErrDecrypt
	}
	aead, ok := s.aeads[ciphertext[1]]
	if !ok {
		return nil, ErrDecrypt
	}
	nonce := ciphertext[headerSize : headerSize+nonceSize]
	body := ciphertext[headerSize+nonceSize:]
	out := make([]byte, 0, len(body)-tagSize)
	out, err := aead.Open(out, nonce, body, additionalData(ciphertext[:headerSize], ad))
	if err != nil {
		return nil, ErrDecrypt
	}
	return out, nil
}

// additionalData encodes the header and the parts without ambiguity: the
// part count, then each part prefixed by its length, so ("ab", "c"),
// ("a", "bc") and ("abc") all differ.
func additionalData(header []byte, parts []string) []byte {
	n := len(header) + binary.MaxVarintLen64
	for _, p := range parts {
		n += binary.MaxVarintLen64 + len(p)
	}
	b := make([]byte, 0, n)
	b = append(b, header...)
	b = binary.AppendUvarint(b, uint64(len(parts)))
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// NewCanary seals a fixed, known plaintext with the primary key. Stored
// beside the data at first start, it lets [Sealer.CheckCanary] detect a
// wrong key before any secret is read or written.
func (s *Sealer) NewCanary() ([]byte, error) {
	return s.Seal([]byte(canaryPlaintext), canaryAD...)
}

// CheckCanary returns an error wrapping [ErrWrongKey] unless canary, made by
// [Sealer.NewCanary], opens with one of the keys. After a rotation that
// drops the old key, re-seal the canary first.
func (s *Sealer) CheckCanary(canary []byte) error {
	pt, err := s.Open(canary, canaryAD...)
	if err == nil && EqualString(string(pt), canaryPlaintext) {
		return nil
	}
	if len(canary) >= headerSize && canary[0] == formatV1 {
		return fmt.Errorf("%w; the canary was sealed with key id 0x%02x, the configured key ids are %s",
			ErrWrongKey, canary[1], s.idList())
	}
	return fmt.Errorf("%w; the canary is not in a known format", ErrWrongKey)
}

func (s *Sealer) idList() string {
	var b strings.Builder
	for i, id := range s.ids {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "0x%02x", id)
	}
	return b.String()
}

// String describes the Sealer by key ids only; it never shows key material.
func (s *Sealer) String() string {
	if s == nil {
		return "secret.Sealer(nil)"
	}
	return fmt.Sprintf("secret.Sealer(AES-256-GCM, seals with key id 0x%02x, opens key ids %s)", s.primary, s.idList())
}

// GoString is [Sealer.String], so %#v redacts too.
func (s *Sealer) GoString() string { return s.String() }
