package token

import (
	"context"
	"errors"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// ErrTaken means the token got an owner between the decision to assign
// it on use and the commit.
var ErrTaken = errors.New("token: the token was assigned meanwhile")

// ErrOwnerChanged means the tokens of the would-be owner changed between
// the decision to assign a token on use and its commit (another request
// gave the user a token meanwhile).
var ErrOwnerChanged = errors.New("token: the owner's tokens changed meanwhile")

// Unassigned returns the tokens that have no owner and whose token realms
// include realm, ordered by serial: the tokens an administrator put into a
// realm for its users to claim (autoassignment, passthru_assign). A token
// keeps its realms when it is unassigned, so a token given back by its
// former owner is among them; a token in no realm never is.
//
// It walks the smaller of the realm's index and the index of unassigned
// tokens, checks the other by key lookups, and decodes only the tokens it
// returns, without the decode cache (a realm of a million assigned tokens
// costs no decoding and evicts nothing that authentications keep).
func (s *Service) Unassigned(ctx context.Context, realm string) ([]*Token, error) {
	realm = strings.ToLower(strings.TrimSpace(realm))
	if realm == "" {
		return nil, nil
	}
	var out []*Token
	err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		realmPrefix := []byte(realm + "\x00")
		keep := func(serial []byte) error {
			t, err := loadUncached(tx, string(serial))
			if err != nil || t == nil || t.Assigned() {
				return err
			}
			out = append(out, t)
			return nil
		}
		if !indexesComplete(tx) {
			return tx.Bucket(bucketRealm).ForEach(realmPrefix, func(k, _ []byte) error { return keep(k[len(realmPrefix):]) })
		}
		counts := tx.Bucket(bucketCounts)
		free := colKey(colAssigned, []byte{0}, "")
		if readCounter(counts, counterKey(cntAssigned, "\x00")) <= readCounter(counts, counterKey(cntRealm, realm)) {
			inRealm := getter(tx, bucketRealm)
			return tx.Bucket(bucketCol).ForEach(free, func(k, _ []byte) error {
				if serial := k[len(free):]; inRealm(realmPrefix, serial) {
					return keep(serial)
				}
				return nil
			})
		}
		isFree := getter(tx, bucketCol)
		return tx.Bucket(bucketRealm).ForEach(realmPrefix, func(k, _ []byte) error {
			if serial := k[len(realmPrefix):]; isFree(free, serial) {
				return keep(serial)
			}
			return nil
		})
	})
	return out, err
}

// Claim is the assignment that a successful OTP match makes (see
// CommitAssign).
type Claim struct {
	// Owner becomes the token's owner; its realm joins the token realms.
	Owner user.User
	// PIN becomes the token PIN when not nil ("" is an empty PIN); nil
	// leaves the PIN as it is.
	PIN *string
	// EncryptPIN stores the PIN encrypted instead of hashed.
	EncryptPIN bool
	// Owned is the number of tokens Owner had when the caller decided to
	// assign; the commit goes ahead only if that is still the number.
	Owned int
}

// CommitAssign commits a successful match as Commit does (the OTP is used
// up, the usage counters advance, the fail counter is reset) and, in the
// same transaction, gives the token to c.Owner: the token must still have
// no owner (else ErrTaken) and the owner must still hold c.Owned tokens
// (else ErrOwnerChanged). Of several requests that race for one token, or
// for several tokens for one user, exactly one commits; a match that was
// used meanwhile gives ErrReplay. The PIN is hashed (or sealed) before the
// transaction.
func (s *Service) CommitAssign(ctx context.Context, serial string, m Match, c Claim) (*Token, error) {
	if c.Owner.UID == "" {
		return nil, apierr.New(apierr.TokenAdmin, "A token can only be assigned to an existing user.")
	}
	if m.Delete {
		// A token that removes itself when used (registration) cannot
		// be claimed by its use.
		return nil, apierr.New(apierr.TokenAdmin, "This token cannot be assigned by its use.")
	}
	var pinHash string
	var pinSealed []byte
	if c.PIN != nil {
		probe := &Token{Serial: serial}
		if err := s.setPIN(ctx, probe, *c.PIN, c.EncryptPIN); err != nil {
			return nil, err
		}
		pinHash, pinSealed = probe.PIN, probe.PINSealed
	}
	var taken bool
	inner, also := m.Apply, m.Also
	m.Apply = func(t *Token) bool {
		taken = t.Assigned()
		if taken {
			return false
		}
		if inner != nil && !inner(t) {
			return false
		}
		o := c.Owner
		t.Owner = &o
		t.Realms = normRealms(append(t.Realms, o.Realm))
		if c.PIN != nil {
			t.PIN, t.PINSealed = pinHash, pinSealed
		}
		return true
	}
	m.Also = func(tx store.Tx, t *Token) error {
		// The token is saved with its new owner: it is one of them.
		n := 0
		if err := tx.Bucket(bucketOwner).ForEach(ownerKey(&c.Owner), func(_, _ []byte) error { n++; return nil }); err != nil {
			return err
		}
		if n != c.Owned+1 {
			return ErrOwnerChanged
		}
		if also != nil {
			return also(tx, t)
		}
		return nil
	}
	t, err := s.Commit(ctx, serial, m)
	if errors.Is(err, ErrReplay) && taken {
		return nil, ErrTaken
	}
	return t, err
}
