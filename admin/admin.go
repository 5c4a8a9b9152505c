// Package admin owns the local administrator accounts: names and Argon2id
// password hashes kept in the store. Accounts brought over from another
// system may carry that system's hash and pepper until their first login
// (see Service.Adopt). Realm users who log in as admins
// (superuser realms) are not stored here; they come from their resolvers.
//
// Package admin sits on floor 2: it imports store, apierr and
// internal/secret, and nothing that knows HTTP.
package admin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/store"
)

// bucket holds one JSON record per administrator, keyed by name.
const bucket = "admins"

const schema = 1

// Limits on names and passwords.
const (
	MaxNameLen     = 64
	MaxPasswordLen = 1024
)

// Errors of this package.
var (
	ErrNotFound  = apierr.New(apierr.ResourceNotFound, "The requested administrator could not be found.")
	ErrExists    = apierr.New(apierr.ConfigAdmin, "An administrator with this name already exists.")
	ErrBadName   = apierr.New(apierr.Parameter, "The administrator name must be 1 to 64 printable characters without spaces.")
	ErrBadPass   = apierr.New(apierr.Parameter, "The password must be 1 to 1024 bytes long.")
	ErrBusy      = apierr.New(apierr.Busy, "The server is busy, please try again later.")
	ErrBadHash   = apierr.New(apierr.Parameter, "The password hash must be an Argon2 PHC string ($argon2id$v=19$m=...,t=...,p=...$salt$hash).")
	ErrBadPepper = apierr.New(apierr.Parameter, "The pepper must be at most 1024 bytes long.")
)

// MaxPepperLen bounds the pepper of an adopted hash.
const MaxPepperLen = 1024

// newStamp is a fresh session stamp (128 random bits). It is no secret: a
// token needs the JWT key's signature besides.
func newStamp() string { return rand.Text() }

// Admin is the public view of an account: never the hash.
type Admin struct {
	Name            string    `json:"username"`
	Created         time.Time `json:"created"`
	PasswordChanged time.Time `json:"password_changed"`
	Disabled        bool      `json:"disabled"`
}

type record struct {
	store.Versioned
	Name    string    `json:"name"`
	Hash    string    `json:"hash"`
	Created time.Time `json:"created"`
	Changed time.Time `json:"changed"`
	// Stamp names the account's current sessions: a session token carries
	// the stamp of its login and is valid only while the account has it.
	// A new one comes with the account, each password change and each
	// disabling. Accounts from before stamps have none (and so do their
	// tokens) until their first change.
	Stamp    string `json:"stamp,omitempty"`
	Disabled bool   `json:"disabled,omitempty"`
	// Pepper is the secret another system put before the password when
	// it made Hash (privacyIDEA's PI_PEPPER): an adopted hash verifies
	// only with it. It is kept only until the account's first login,
	// which replaces Hash with one of this package's own, made from the
	// password alone, and drops the pepper (as does a password change).
	// It never leaves the record: List and Admin do not show it.
	Pepper []byte `json:"pepper,omitempty"`
}

// Service manages the accounts.
type Service struct {
	st     store.Store
	hasher Hasher
	now    func() time.Time
}

// Hasher hashes and verifies the accounts' passwords (Argon2id through the
// root's KDF limiter). The interface keeps the internal implementation out
// of this package's API.
type Hasher interface {
	Hash(ctx context.Context, password string) (string, error)
	Verify(ctx context.Context, encoded, password string) (ok, rehash bool, err error)
	// Dummy costs what one Hash costs (an unknown account).
	Dummy(ctx context.Context, password string)
}

var _ Hasher = (*secret.Hasher)(nil)

// New returns the service. now is the injected clock.
func New(st store.Store, hasher Hasher, now func() time.Time) *Service {
	return &Service{st: st, hasher: hasher, now: now}
}

// ValidName reports whether name can be an administrator name.
func ValidName(name string) bool {
	if name == "" || len(name) > MaxNameLen || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func validPassword(pw string) bool { return pw != "" && len(pw) <= MaxPasswordLen }

// hash turns the KDF's errors into API errors.
func (s *Service) hash(ctx context.Context, password string) (string, error) {
	h, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return "", kdfError(err)
	}
	return h, nil
}

func kdfError(err error) error {
	if errors.Is(err, secret.ErrBusy) {
		return ErrBusy.Wrap(err)
	}
	return err
}

// Add creates an administrator. It fails with ErrExists when the name is
// taken. Each of also runs in the transaction after the write (the
// caller's audit entry).
func (s *Service) Add(ctx context.Context, name, password string, also ...func(store.Tx) error) error {
	if !ValidName(name) {
		return ErrBadName
	}
	if !validPassword(password) {
		return ErrBadPass
	}
	h, err := s.hash(ctx, password)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	return s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		if b.Get([]byte(name)) != nil {
			return fmt.Errorf("admin %s: %w", name, ErrExists)
		}
		if err := store.PutJSON(b, []byte(name), record{
			Versioned: store.Versioned{Schema: schema},
			Name:      name, Hash: h, Created: now, Changed: now, Stamp: newStamp(),
		}); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
}

// Adopt creates an administrator from a password hash made by another
// system, so that the account keeps its password: phc is the Argon2 PHC
// string of pepper followed by the password (privacyIDEA hashes its local
// administrators' passwords with its PI_PEPPER in front). The pepper is
// stored in the account's record because the hash cannot be checked
// without it; the first successful login hashes the password anew
// without it and drops it from the record. It fails with ErrExists when
// the name is taken. Also as in Add.
func (s *Service) Adopt(ctx context.Context, name, phc string, pepper []byte, also ...func(store.Tx) error) error {
	if !ValidName(name) {
		return ErrBadName
	}
	if _, err := secret.ParsePHC(phc); err != nil || !strings.HasPrefix(phc, "$argon2") {
		return fmt.Errorf("admin %s: %w", name, ErrBadHash)
	}
	if len(pepper) > MaxPepperLen {
		return ErrBadPepper
	}
	now := s.now().UTC()
	rec := record{
		Versioned: store.Versioned{Schema: schema},
		Name:      name, Hash: phc, Created: now, Changed: now, Stamp: newStamp(),
	}
	if len(pepper) > 0 {
		rec.Pepper = slices.Clone(pepper)
	}
	return s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		if b.Get([]byte(name)) != nil {
			return fmt.Errorf("admin %s: %w", name, ErrExists)
		}
		if err := store.PutJSON(b, []byte(name), rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
}

// SetPassword replaces an administrator's password and ends its sessions
// (also as in Add).
func (s *Service) SetPassword(ctx context.Context, name, password string, also ...func(store.Tx) error) error {
	if !validPassword(password) {
		return ErrBadPass
	}
	h, err := s.hash(ctx, password)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	return s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		var rec record
		if err := store.GetJSON(b, []byte(name), &rec); err != nil {
			return notFound(name, err)
		}
		rec.Hash, rec.Changed, rec.Stamp, rec.Pepper = h, now, newStamp(), nil
		if err := store.PutJSON(b, []byte(name), rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
}

// Delete removes an administrator (also as in Add).
func (s *Service) Delete(ctx context.Context, name string, also ...func(store.Tx) error) error {
	return s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		if b.Get([]byte(name)) == nil {
			return fmt.Errorf("admin %s: %w", name, ErrNotFound)
		}
		if err := b.Delete([]byte(name)); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
}

// SetDisabled disables an administrator (its logins fail and its sessions
// end at once) or enables it again (its sessions from before the disabling
// stay ended). Also as in Add.
func (s *Service) SetDisabled(ctx context.Context, name string, disabled bool, also ...func(store.Tx) error) error {
	return s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		var rec record
		if err := store.GetJSON(b, []byte(name), &rec); err != nil {
			return notFound(name, err)
		}
		if disabled {
			rec.Stamp = newStamp()
		}
		rec.Disabled = disabled
		if err := store.PutJSON(b, []byte(name), rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
}

// Session reports whether a session token of name issued with stamp is
// still valid: the account exists, is enabled and still has that stamp
// (no password change or disabling since). One store read.
func (s *Service) Session(ctx context.Context, name, stamp string) (bool, error) {
	// Only the two fields it needs: decoding the hash as well would
	// double the check's cost.
	var rec struct {
		Stamp    string `json:"stamp"`
		Disabled bool   `json:"disabled"`
	}
	found := false
	err := s.st.View(ctx, func(tx store.Tx) error {
		err := store.GetJSON(tx.Bucket(bucket), []byte(name), &rec)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil || !found || rec.Disabled {
		return false, err
	}
	return subtle.ConstantTimeCompare([]byte(rec.Stamp), []byte(stamp)) == 1, nil
}

// List returns all administrators ordered by name.
func (s *Service) List(ctx context.Context) ([]Admin, error) {
	var out []Admin
	err := s.st.View(ctx, func(tx store.Tx) error {
		out = out[:0]
		return tx.Bucket(bucket).ForEach(nil, func(k, v []byte) error {
			var rec record
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("admin %s: decode: %w", k, err)
			}
			out = append(out, Admin{Name: rec.Name, Created: rec.Created, PasswordChanged: rec.Changed, Disabled: rec.Disabled})
			return nil
		})
	})
	slices.SortFunc(out, func(a, b Admin) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// Exists reports whether an administrator with that name exists.
func (s *Service) Exists(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := s.st.View(ctx, func(tx store.Tx) error {
		ok = tx.Bucket(bucket).Get([]byte(name)) != nil
		return nil
	})
	return ok, err
}

// Count returns the number of administrators.
func (s *Service) Count(ctx context.Context) (int, error) {
	n := 0
	err := s.st.View(ctx, func(tx store.Tx) error {
		n = 0
		return tx.Bucket(bucket).ForEach(nil, func(_, _ []byte) error { n++; return nil })
	})
	return n, err
}

// Check verifies name and password. A wrong password, an unknown name or
// a disabled account is a result (false, nil), not an error; an unknown
// name still costs one hash and a disabled account's password is still
// verified, so timing does not tell which names exist. A hash made with
// other parameters than the configured ones, or an adopted one that needs a
// pepper, is replaced after it verifies.
func (s *Service) Check(ctx context.Context, name, password string) (bool, error) {
	_, ok, err := s.Login(ctx, name, password)
	return ok, err
}

// Login is Check that also returns the account's session stamp for the
// session token when the login succeeds (see Session).
func (s *Service) Login(ctx context.Context, name, password string) (stamp string, ok bool, err error) {
	var rec record
	found := false
	if ValidName(name) {
		err := s.st.View(ctx, func(tx store.Tx) error {
			err := store.GetJSON(tx.Bucket(bucket), []byte(name), &rec)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			found = err == nil
			return err
		})
		if err != nil {
			return "", false, err
		}
	}
	if !found || len(password) > MaxPasswordLen {
		s.hasher.Dummy(ctx, password)
		return "", false, nil
	}
	ok, rehash, err := s.hasher.Verify(ctx, rec.Hash, string(rec.Pepper)+password)
	if err != nil {
		return "", false, kdfError(err)
	}
	if !ok || rec.Disabled {
		return "", false, nil
	}
	if rehash || len(rec.Pepper) > 0 {
		s.rehash(ctx, name, rec.Hash, password)
	}
	return rec.Stamp, true, nil
}

// rehash stores a hash of password alone with the current parameters and
// drops an adopted hash's pepper, unless the password was changed
// meanwhile. Failing to rehash does not fail the login (an adopted hash
// then keeps its pepper until the next login).
func (s *Service) rehash(ctx context.Context, name, old, password string) {
	h, err := s.hasher.Hash(ctx, password)
	if err != nil {
		return
	}
	_ = s.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(bucket)
		var rec record
		if err := store.GetJSON(b, []byte(name), &rec); err != nil || rec.Hash != old {
			return nil
		}
		rec.Hash, rec.Pepper = h, nil
		return store.PutJSON(b, []byte(name), rec)
	})
}

func notFound(name string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("admin %s: %w", name, ErrNotFound)
	}
	return err
}
