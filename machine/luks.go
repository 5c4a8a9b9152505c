package machine

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"io"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/token"
)

// LUKSName is the luks application's name.
const LUKSName = "luks"

// luksSerialPrefix is the serial prefix of the challenge-response
// (Yubikey) tokens the luks application serves.
const luksSerialPrefix = "UBOM"

// luksChallengeLen is the size of a generated challenge (a Yubikey
// answers up to 64 bytes, but HMAC implementations differ beyond 32).
const luksChallengeLen = 32

// maxLUKSChallenge bounds a client's challenge (hex digits).
const maxLUKSChallenge = 128

// SecretOpener opens a token's sealed secrets (the token service).
type SecretOpener interface {
	Secret(t *token.Token, field string) ([]byte, error)
}

var _ SecretOpener = (*token.Service)(nil)

// LUKS is the luks application: for a TOTP token whose serial starts with
// UBOM (a Yubikey in challenge-response mode) it returns a challenge and
// the HMAC response the key computes for it, which unlocks a LUKS slot.
type LUKS struct {
	secrets SecretOpener
	rand    io.Reader
}

var _ App = (*LUKS)(nil)

// NewLUKS returns the luks application; secrets opens the token keys and
// rand makes the challenges.
func NewLUKS(secrets SecretOpener, rand io.Reader) *LUKS { return &LUKS{secrets: secrets, rand: rand} }

// Name implements App.
func (*LUKS) Name() string { return LUKSName }

// Options implements App: totp tokens take the key slot and the
// partition.
func (*LUKS) Options(ctx context.Context) (map[string]map[string]OptionSpec, error) {
	return map[string]map[string]OptionSpec{
		"totp": {
			"slot":      {Type: OptionInt, Value: []int{0, 1, 2, 3, 4, 5, 6, 7}},
			"partition": {Type: OptionStr},
		},
	}, nil
}

// AuthItem implements App: "challenge" (req.Challenge, hex, or 32 random
// bytes) and "response", the hex HMAC of the challenge bytes under the
// token's key with its hash (SHA-1 unless the token says otherwise).
// Tokens that are not active UBOM TOTP tokens give none.
func (a *LUKS) AuthItem(ctx context.Context, b Binding, t *token.Token, req AuthItemRequest) (map[string]any, bool, error) {
	if t.Type != "totp" || !strings.HasPrefix(t.Serial, luksSerialPrefix) || !t.Active || t.Revoked {
		return nil, false, nil
	}
	var challenge []byte
	if req.Challenge != "" {
		c, err := hex.DecodeString(req.Challenge)
		if err != nil || len(req.Challenge) > maxLUKSChallenge {
			return nil, false, apierr.Newf(apierr.Parameter, "The challenge must be hexadecimal, at most %d digits.", maxLUKSChallenge)
		}
		challenge = c
	} else {
		challenge = make([]byte, luksChallengeLen)
		if _, err := io.ReadFull(a.rand, challenge); err != nil {
			return nil, false, err
		}
	}
	key, err := a.secrets.Secret(t, token.FieldKey)
	if err != nil {
		return nil, false, err
	}
	if key == nil {
		return nil, false, nil
	}
	mac := hmac.New(hashOf(t.Hash()), key)
	mac.Write(challenge)
	return map[string]any{
		"challenge": hex.EncodeToString(challenge),
		"response":  hex.EncodeToString(mac.Sum(nil)),
	}, true, nil
}

// hashOf maps a token hash to its constructor.
func hashOf(h otp.Hash) func() hash.Hash {
	switch h {
	case otp.SHA256:
		return sha256.New
	case otp.SHA512:
		return sha512.New
	default:
		return sha1.New
	}
}
