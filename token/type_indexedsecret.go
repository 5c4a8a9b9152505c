package token

import (
	"context"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/internal/secret"
)

// IndexedSecret is the indexed secret token (prefix PIIX): the user knows a
// secret string and answers a challenge with the characters at the
// positions asked for, so the whole secret never crosses the wire.
type IndexedSecret struct{}

var (
	_ Type       = IndexedSecret{}
	_ Challenger = IndexedSecret{}
)

const (
	defaultIndexedSecretLen   = 32
	defaultIndexedSecretCount = 2
	maxIndexedSecretCount     = 100
	indexedSecretValidity     = 120 * time.Second
	defaultIndexedSecretText  = "Please enter the positions {0} from your secret."
)

// Name implements Type.
func (IndexedSecret) Name() string { return "indexedsecret" }

// Prefix implements Type.
func (IndexedSecret) Prefix() string { return "PIIX" }

// Enroll implements Type: otpkey is the secret in plain text, or with
// genkey indexedsecret.length (32) characters from indexedsecret.contents
// ("cn") are generated; both together are refused and neither is a
// missing otpkey. The secret is sealed as the seed; the detail has the
// "otpkey" seed object (its value is the secret in hex).
func (IndexedSecret) Enroll(ctx context.Context, e *Enroll) error {
	p := e.Params
	given := p.Str("otpkey")
	gen := p.Bool("genkey")
	var s string
	switch {
	case given != "" && gen:
		return ErrGenkeyAndOtpkey
	case gen:
		var err error
		if s, err = generateFromParams(e, "indexedsecret", defaultIndexedSecretLen, "cn"); err != nil {
			return err
		}
	case given == "":
		return apierr.MissingParameter("otpkey")
	default:
		if !utf8.ValidString(given) || utf8.RuneCountInString(given) > otp.MaxGenerateLength {
			return paramErr("The otpkey must be valid UTF-8 text of at most %d characters", otp.MaxGenerateLength)
		}
		s = given
	}
	e.Key = []byte(s)
	e.Detail["otpkey"] = e.keyDetail(e.Key, false)
	return nil
}

// Challenge implements Challenger: indexedsecret_count (2) random 1-based
// positions of the secret (repetitions possible); the message comes from
// indexedsecret_challenge_text with {0} replaced by the positions. The
// positions are the challenge text and data, and the attribute
// random_positions. Validity is 120 s.
func (IndexedSecret) Challenge(ctx context.Context, c *ChallengeRequest) (*ChallengeResult, error) {
	key, err := c.Service.Secret(c.Token, FieldKey)
	if err != nil {
		return nil, err
	}
	length := utf8.RuneCount(key)
	if length == 0 {
		return nil, ErrCorrupt
	}
	count, err := intParam(c.Options, "indexedsecret_count", defaultIndexedSecretCount, 1, maxIndexedSecretCount)
	if err != nil {
		return nil, err
	}
	positions := make([]int, count)
	texts := make([]string, count)
	limit := big.NewInt(int64(length))
	for i := range positions {
		n, err := randInt(c.Service.Rand(), limit)
		if err != nil {
			return nil, err
		}
		positions[i] = int(n.Int64()) + 1
		texts[i] = strconv.Itoa(positions[i])
	}
	list := strings.Join(texts, ",")
	msg := c.Options.Str("indexedsecret_challenge_text")
	if msg == "" {
		msg = defaultIndexedSecretText
	}
	return &ChallengeResult{
		Message:    strings.ReplaceAll(msg, "{0}", list),
		Challenge:  list,
		Data:       []byte(list),
		Validity:   indexedSecretValidity,
		Attributes: map[string]any{"random_positions": positions},
	}, nil
}

// Check implements Type: only an answer to a stored, unexpired challenge
// of this token can match; the expected value is the secret's characters
// at the challenge's positions, compared in constant time. The caller
// deletes the challenge on success.
func (IndexedSecret) Check(ctx context.Context, c *Check) (Match, error) {
	ch := c.Challenge
	if ch == nil || ch.Serial != c.Token.Serial || !c.Now.Before(ch.Expiration) {
		return Match{Counter: -1}, nil
	}
	key, err := c.Key()
	if err != nil || key == nil {
		return Match{Counter: -1}, err
	}
	chars := []rune(string(key))
	var want strings.Builder
	for _, f := range strings.Split(ch.Challenge, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > len(chars) {
			return Match{Counter: -1}, nil
		}
		want.WriteRune(chars[n-1])
	}
	return Match{OK: secret.EqualString(want.String(), c.OTP), Counter: -1}, nil
}

// ChallengesOnPIN implements PINChallenger: a correct PIN alone sends a challenge.
func (IndexedSecret) ChallengesOnPIN() bool { return true }
