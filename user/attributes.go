package user

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
)

// attrBucket holds custom attributes under realm \x00 resolver \x00 uid \x00 key.
const attrBucket = "user_attributes"

const attrSchema = 1

// Limits on custom attributes.
const (
	MaxKeyLen   = 128
	MaxValueLen = 4096
)

// Errors of custom attributes.
var (
	ErrNotFound = apierr.New(apierr.User, "The user can not be found in any resolver in this realm!")
	ErrBadKey   = apierr.New(apierr.Parameter, "The attribute key must be 1 to 128 printable characters without a colon.")
	ErrBadValue = apierr.New(apierr.Parameter, "The attribute value must be valid text of at most 4096 bytes.")
)

// Attribute is one custom attribute.
type Attribute struct {
	ID    int    `json:"id"`
	Key   string `json:"key"`
	Value string `json:"value"`
	Type  string `json:"type,omitempty"`
}

type attrRecord struct {
	store.Versioned
	Attribute
}

// Attributes stores custom user attributes.
type Attributes struct {
	st store.Store
}

// NewAttributes returns the attribute store.
func NewAttributes(st store.Store) *Attributes { return &Attributes{st: st} }

func userPrefix(u User) []byte {
	return []byte(strings.ToLower(u.Realm) + "\x00" + u.Resolver + "\x00" + u.UID + "\x00")
}

func realmPrefix(realm string) []byte { return []byte(strings.ToLower(realm) + "\x00") }

func validKey(k string) bool {
	if k == "" || len(k) > MaxKeyLen || !utf8.ValidString(k) || strings.ContainsAny(k, ":\x00") {
		return false
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// Set stores key=value for u (a found user) and returns the attribute's id.
// Each of also runs in the same transaction after the write (the caller's
// audit entry commits with the change).
func (a *Attributes) Set(ctx context.Context, u User, key, value, typ string, also ...func(store.Tx) error) (int, error) {
	if !u.Found() {
		return 0, ErrNotFound
	}
	if !validKey(key) {
		return 0, ErrBadKey
	}
	if len(value) > MaxValueLen || !utf8.ValidString(value) || strings.ContainsRune(value, 0) {
		return 0, ErrBadValue
	}
	if len(typ) > MaxKeyLen {
		return 0, ErrBadKey
	}
	var id int
	err := a.st.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(attrBucket)
		k := append(userPrefix(u), key...)
		var rec attrRecord
		switch err := store.GetJSON(b, k, &rec); {
		case err == nil:
		case err == store.ErrNotFound:
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			rec.ID = int(seq)
		default:
			return err
		}
		rec.Schema, rec.Key, rec.Value, rec.Type = attrSchema, key, value, typ
		id = rec.ID
		if err := store.PutJSON(b, k, rec); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return id, err
}

// Get returns all custom attributes of u as key → value ({} for none or an
// unknown user).
func (a *Attributes) Get(ctx context.Context, u User) (map[string]string, error) {
	out := map[string]string{}
	if !u.Found() {
		return out, nil
	}
	err := a.st.View(ctx, func(tx store.Tx) error {
		clear(out)
		return tx.Bucket(attrBucket).ForEach(userPrefix(u), func(_, v []byte) error {
			var rec attrRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("user attribute: %w", err)
			}
			out[rec.Key] = rec.Value
			return nil
		})
	})
	return out, err
}

// Delete removes key from u and returns how many attributes were removed
// (0 or 1). Each of also runs in the transaction (for a found user),
// whether or not there was an attribute to delete.
func (a *Attributes) Delete(ctx context.Context, u User, key string, also ...func(store.Tx) error) (int, error) {
	if !u.Found() {
		return 0, nil
	}
	n := 0
	err := a.st.Update(ctx, func(tx store.Tx) error {
		n = 0
		b := tx.Bucket(attrBucket)
		k := append(userPrefix(u), key...)
		if b.Get(k) == nil {
			return store.RunAlso(tx, also)
		}
		n = 1
		if err := b.Delete(k); err != nil {
			return err
		}
		return store.RunAlso(tx, also)
	})
	return n, err
}

// RealmKeys lists the distinct attribute keys stored for users of realm,
// inside tx (the realm package calls it while deleting a realm).
func (a *Attributes) RealmKeys(tx store.Tx, realm string) ([]string, error) {
	var keys []string
	err := tx.Bucket(attrBucket).ForEach(realmPrefix(realm), func(_, v []byte) error {
		var rec attrRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return err
		}
		if !slices.Contains(keys, rec.Key) {
			keys = append(keys, rec.Key)
		}
		return nil
	})
	slices.Sort(keys)
	return keys, err
}

// DeleteRealm removes every attribute of realm's users inside tx and
// returns how many were removed.
func (a *Attributes) DeleteRealm(tx store.Tx, realm string) (int, error) {
	return store.DeleteWhere(tx.Bucket(attrBucket), realmPrefix(realm), func(_, _ []byte) bool { return true })
}

// Exist reports whether any custom attribute is stored at all (user lists
// merge attributes only then, as privacyIDEA does).
func (a *Attributes) Exist(ctx context.Context) (bool, error) {
	found := false
	err := a.st.View(ctx, func(tx store.Tx) error {
		found = false
		return tx.Bucket(attrBucket).ForEach(nil, func(_, _ []byte) error {
			found = true
			return store.ErrStop
		})
	})
	return found, err
}
