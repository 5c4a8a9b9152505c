package token

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/authsrv/authsrv/store"
)

// Challenge is one stored challenge of a token.
type Challenge struct {
	TransactionID string    `json:"transaction_id"`
	Serial        string    `json:"serial"`
	Challenge     string    `json:"challenge"`
	Data          []byte    `json:"data,omitempty"` // sealed
	Session       string    `json:"session,omitempty"`
	Created       time.Time `json:"created"`
	Expiration    time.Time `json:"expiration"`
	OTPReceived   bool      `json:"otp_received"`
	ReceivedCount int       `json:"received_count"`
	OTPValid      bool      `json:"otp_valid"`
}

type challengeRecord struct {
	store.Versioned
	Challenge
}

func challengeKey(txid, serial string) []byte { return []byte(txid + "\x00" + serial) }

// NewTransactionID returns 20 random decimal digits.
func (s *Service) NewTransactionID() (string, error) {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(20), nil)
	n, err := randInt(s.cfg.Rand, limit)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%020s", n.String()), nil
}

// OpenChallengeData opens a challenge's sealed data.
func (s *Service) OpenChallengeData(c *Challenge) ([]byte, error) {
	if len(c.Data) == 0 {
		return nil, nil
	}
	p, err := s.cfg.Sealer.Open(c.Data, bucketChallenges, c.TransactionID, c.Serial)
	if err != nil {
		return nil, fmt.Errorf("%w: challenge data: %w", ErrCorrupt, err)
	}
	return p, nil
}

// CreateChallenge asks t's type for a challenge and stores it under txid
// together with the type's token change, in one transaction; then it runs
// the type's Send (e-mail, SMS). When sending fails the challenge is
// removed again and the error returned.
func (s *Service) CreateChallenge(ctx context.Context, t *Token, txid, state string, opts Params, ownerInfo map[string]string) (*ChallengeResult, *Challenge, error) {
	return s.createChallenge(ctx, t, txid, state, "", opts, ownerInfo)
}

// CreateSessionChallenge is CreateChallenge for a challenge that belongs
// to a session (privacyIDEA's challenge session, such as an enrollment
// during authentication), which is stored with it.
func (s *Service) CreateSessionChallenge(ctx context.Context, t *Token, txid, session string, opts Params, ownerInfo map[string]string) (*ChallengeResult, *Challenge, error) {
	return s.createChallenge(ctx, t, txid, "", session, opts, ownerInfo)
}

func (s *Service) createChallenge(ctx context.Context, t *Token, txid, state, session string, opts Params, ownerInfo map[string]string) (*ChallengeResult, *Challenge, error) {
	typ, ok := s.cfg.Types.Get(t.Type)
	if !ok {
		return nil, nil, fmt.Errorf("token: unknown type %q", t.Type)
	}
	ch, ok := typ.(Challenger)
	var res *ChallengeResult
	if ok {
		var err error
		res, err = ch.Challenge(ctx, &ChallengeRequest{Token: t, TransactionID: txid, State: state, Options: opts, OwnerInfo: ownerInfo, Now: s.cfg.Now(), Service: s})
		if err != nil {
			return nil, nil, err
		}
	} else {
		res = &ChallengeResult{Message: "please enter otp: ", ClientMode: "interactive"}
	}
	if res.Validity <= 0 {
		res.Validity = s.challengeValidity(t.Type)
	}
	if res.ClientMode == "" {
		res.ClientMode = "interactive"
	}
	c, err := s.newChallenge(txid, t.Serial, res.Challenge, session, res.Validity, res.Data)
	if err != nil {
		return nil, nil, err
	}
	var committed *Token
	err = s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		committed = nil
		if res.Apply != nil {
			old, err := s.load(tx, t.Serial)
			if err != nil {
				return err
			}
			if old == nil {
				return NotFound(t.Serial)
			}
			nt := old.Clone()
			res.Apply(nt)
			if err := s.save(tx, old, nt); err != nil {
				return err
			}
			committed = nt
		}
		return store.PutJSON(tx.Bucket(bucketChallenges), challengeKey(txid, t.Serial), challengeRecord{store.Versioned{Schema: schema}, *c})
	})
	if err != nil {
		return nil, nil, err
	}
	if committed == nil {
		committed = t
	}
	if res.Send != nil {
		if err := res.Send(ctx, committed); err != nil {
			_ = s.cfg.Store.Update(context.WithoutCancel(ctx), func(tx store.Tx) error {
				return tx.Bucket(bucketChallenges).Delete(challengeKey(txid, t.Serial))
			})
			return res, nil, err
		}
	}
	return res, c, nil
}

// newChallenge is a challenge made now, valid for validity, with data
// sealed to its transaction and serial.
func (s *Service) newChallenge(txid, serial, challenge, session string, validity time.Duration, data []byte) (*Challenge, error) {
	now := s.cfg.Now()
	c := &Challenge{TransactionID: txid, Serial: serial, Challenge: challenge, Session: session, Created: now.UTC(), Expiration: now.Add(validity).UTC()}
	if len(data) > 0 {
		sealed, err := s.cfg.Sealer.Seal(data, bucketChallenges, txid, serial)
		if err != nil {
			return nil, err
		}
		c.Data = sealed
	}
	return c, nil
}

// liveChallenge reads the challenge of txid for serial in tx; ok is false
// when there is none or it has expired.
func (s *Service) liveChallenge(tx store.Tx, txid, serial string) (r challengeRecord, ok bool, err error) {
	switch err := store.GetJSON(tx.Bucket(bucketChallenges), challengeKey(txid, serial), &r); {
	case err == store.ErrNotFound:
		return r, false, nil
	case err != nil:
		return r, false, err
	}
	return r, s.cfg.Now().Before(r.Expiration), nil
}

// ChallengeFilter selects challenges.
type ChallengeFilter struct {
	Serial        string
	TransactionID string
	// Serials restricts to these serials (nil: no restriction).
	Serials []string
	// IncludeExpired lists expired challenges too.
	IncludeExpired bool
}

// Challenges lists stored challenges, newest first.
func (s *Service) Challenges(ctx context.Context, f ChallengeFilter) ([]Challenge, error) {
	var out []Challenge
	now := s.cfg.Now()
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		prefix := []byte(nil)
		if f.TransactionID != "" {
			prefix = []byte(f.TransactionID + "\x00")
		}
		return tx.Bucket(bucketChallenges).ForEach(prefix, func(_, v []byte) error {
			var r challengeRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			c := r.Challenge
			switch {
			case f.Serial != "" && c.Serial != f.Serial,
				f.Serials != nil && !slices.Contains(f.Serials, c.Serial),
				!f.IncludeExpired && !now.Before(c.Expiration):
				return nil
			}
			out = append(out, c)
			return nil
		})
	})
	slices.SortStableFunc(out, func(a, b Challenge) int { return b.Created.Compare(a.Created) })
	return out, err
}

// ChallengeAnswered records a wrong or right answer on a challenge
// (received_count, otp_received, otp_valid).
func (s *Service) ChallengeAnswered(ctx context.Context, txid, serial string, valid bool) error {
	return s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucketChallenges)
		var r challengeRecord
		if err := store.GetJSON(b, challengeKey(txid, serial), &r); err != nil {
			if err == store.ErrNotFound {
				return nil
			}
			return err
		}
		r.OTPReceived = true
		r.ReceivedCount++
		r.OTPValid = r.OTPValid || valid
		return store.PutJSON(b, challengeKey(txid, serial), r)
	})
}

// DeleteTransaction removes every challenge of a transaction and returns
// how many there were.
func (s *Service) DeleteTransaction(ctx context.Context, txid string) (int, error) {
	return s.deleteChallenges(ctx, []byte(txid+"\x00"), func(_, _ []byte) bool { return true })
}

// CleanupChallenges removes expired challenges and returns how many.
func (s *Service) CleanupChallenges(ctx context.Context) (int, error) {
	now := s.cfg.Now()
	return s.deleteChallenges(ctx, nil, func(_, v []byte) bool {
		var r challengeRecord
		return json.Unmarshal(v, &r) != nil || !now.Before(r.Expiration)
	})
}

func (s *Service) deleteChallenges(ctx context.Context, prefix []byte, drop func(k, v []byte) bool) (int, error) {
	n := 0
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		n, err = deleteChallengesTx(tx, prefix, drop)
		return err
	})
	return n, err
}

// deleteChallengesTx deletes the challenges under prefix that drop selects.
func deleteChallengesTx(tx store.Tx, prefix []byte, drop func(k, v []byte) bool) (int, error) {
	return store.DeleteWhere(tx.Bucket(bucketChallenges), prefix, drop)
}

func deleteChallengesOf(tx store.Tx, serial string) error {
	_, err := deleteChallengesTx(tx, nil, func(k, _ []byte) bool { return strings.HasSuffix(string(k), "\x00"+serial) })
	return err
}

// challengeValidity is how long a challenge of a token of type typ is
// valid: the system setting "<Type>ChallengeValidityTime" (seconds; the
// type's name with a capital first letter, e.g. HotpChallengeValidityTime)
// when set, else DefaultChallengeValidityTime.
func (s *Service) challengeValidity(typ string) time.Duration {
	set := s.settings()
	name := strings.ToLower(typ)
	if r, n := utf8.DecodeRuneInString(name); n > 0 {
		name = string(unicode.ToUpper(r)) + name[n:]
	}
	if v, err := strconv.Atoi(set.Value(name + "ChallengeValidityTime")); err == nil && v > 0 {
		return time.Duration(v) * time.Second
	}
	return set.ChallengeValidity
}
