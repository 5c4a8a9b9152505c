package validate

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// cacheBucket holds the auth cache: one record per user and password,
// keyed by a hash of the user and a keyed hash of the password. The
// password itself is never stored.
const cacheBucket = "authcache"

const cacheSchema = 1

// cacheEntry is one cached authentication.
type cacheEntry struct {
	store.Versioned
	// First is the real authentication, Last the latest use (First or the
	// last cache hit), Uses the number of cache hits.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	Uses  int       `json:"uses"`
	// Expires is First plus the policy's window when the entry was made:
	// the sweep removes entries of users who do not come back.
	Expires time.Time `json:"expires"`
}

// sweepBatch is how many entries each new entry's transaction examines
// for expiry, walking the bucket round by round.
const sweepBatch = 32

// cachePolicy is a parsed auth_cache value: "4h" (valid 4 hours after the
// real authentication), "4h/5m" (and at most 5 minutes after the last
// use) or "4h/3" (and at most 3 times).
type cachePolicy struct {
	on      bool
	maxAge  time.Duration
	idle    time.Duration
	maxUses int
	names   []string
}

// cachePolicy reads the request's auth_cache policy.
func (p *policies) cachePolicy(ctx context.Context) (cachePolicy, error) {
	sc, err := p.set(ctx, policy.ScopeAuthentication)
	if err != nil || sc.Empty() {
		return cachePolicy{}, err
	}
	v, names, err := unique(sc, "auth_cache")
	if err != nil || v == "" {
		return cachePolicy{}, err
	}
	cp, ok := parseAuthCache(v)
	if !ok {
		return cachePolicy{}, errPolicyValue("auth_cache", v)
	}
	cp.names = names
	return cp, nil
}

func parseAuthCache(v string) (cachePolicy, bool) {
	age, rest, limited := strings.Cut(v, "/")
	p := cachePolicy{on: true}
	var ok bool
	if p.maxAge, ok = parseDelta(age); !ok {
		return p, false
	}
	if !limited {
		return p, true
	}
	rest = strings.TrimSpace(rest)
	if n, err := strconv.Atoi(rest); err == nil {
		p.maxUses = n
		return p, n > 0
	}
	p.idle, ok = parseDelta(rest)
	return p, ok
}

// cacheKey returns k, or a random key when k is empty.
func cacheKey(k []byte) []byte {
	if len(k) > 0 {
		return k
	}
	k = make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("validate: no randomness for the auth cache key: " + err.Error())
	}
	return k
}

// cachePrefix is the key prefix of u's entries: a hash of the user's
// identity (fixed length, whatever the names hold).
func cachePrefix(u user.User) []byte {
	h := sha256.Sum256([]byte("authsrv-authcache-user\x00" + u.Realm + "\x00" + u.Resolver + "\x00" + u.UID))
	return h[:16]
}

// cacheRecordKey is the key of u's entry for pass: the user prefix and an
// HMAC of the user and the password under the cache key.
func (v *Validator) cacheRecordKey(u user.User, pass string) []byte {
	p := cachePrefix(u)
	m := hmac.New(sha256.New, v.cacheKey)
	m.Write([]byte("authsrv-authcache-pass\x00"))
	m.Write(p)
	m.Write([]byte(pass))
	return m.Sum(p)
}

// cacheHit looks for an unexpired entry of u and pass and, when there is
// one, counts the use.
func (v *Validator) cacheHit(ctx context.Context, u user.User, pass string, p cachePolicy) (bool, error) {
	key := v.cacheRecordKey(u, pass)
	now := v.cfg.Now()
	var hit bool
	err := v.cfg.Store.Update(ctx, func(tx store.Tx) error {
		hit = false
		b := tx.Bucket(cacheBucket)
		var e cacheEntry
		if err := store.GetJSON(b, key, &e); errors.Is(err, store.ErrNotFound) {
			return nil
		} else if err != nil {
			return b.Delete(key)
		}
		if !cacheUsable(e, p, now) {
			return b.Delete(key)
		}
		e.Uses++
		e.Last = now.UTC()
		hit = true
		return store.PutJSON(b, key, e)
	})
	return hit, err
}

func cacheUsable(e cacheEntry, p cachePolicy, now time.Time) bool {
	switch {
	case !now.Before(e.First.Add(p.maxAge)):
	case p.idle > 0 && !now.Before(e.Last.Add(p.idle)):
	case p.maxUses > 0 && e.Uses >= p.maxUses:
	default:
		return true
	}
	return false
}

// cacheAdd records a real authentication of u with pass, drops u's
// entries that have expired, and sweeps the next few entries of other
// users.
func (v *Validator) cacheAdd(ctx context.Context, u user.User, pass string, p cachePolicy) error {
	key := v.cacheRecordKey(u, pass)
	now := v.cfg.Now()
	v.sweepMu.Lock()
	from := v.sweepAt
	v.sweepMu.Unlock()
	var next []byte
	err := v.cfg.Store.Update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(cacheBucket)
		if _, err := store.DeleteWhere(b, cachePrefix(u), func(_, raw []byte) bool {
			var e cacheEntry
			return json.Unmarshal(raw, &e) != nil || !cacheUsable(e, p, now)
		}); err != nil {
			return err
		}
		var err error
		if next, err = sweep(b, from, now); err != nil {
			return err
		}
		return store.PutJSON(b, key, cacheEntry{Versioned: store.Versioned{Schema: cacheSchema},
			First: now.UTC(), Last: now.UTC(), Expires: now.Add(p.maxAge).UTC()})
	})
	if err == nil {
		v.sweepMu.Lock()
		v.sweepAt = next
		v.sweepMu.Unlock()
	}
	return err
}

// sweep deletes the expired entries among the sweepBatch entries from key
// from on, and returns where the next sweep starts (nil: from the first).
func sweep(b store.Bucket, from []byte, now time.Time) ([]byte, error) {
	c := b.Cursor()
	k, raw := c.First()
	if from != nil {
		k, raw = c.Seek(from)
	}
	var drop [][]byte
	for n := 0; k != nil && n < sweepBatch; n++ {
		var e cacheEntry
		if json.Unmarshal(raw, &e) != nil || !now.Before(e.Expires) {
			drop = append(drop, append([]byte(nil), k...))
		}
		k, raw = c.Next()
	}
	next := append([]byte(nil), k...)
	if k == nil {
		next = nil
	}
	for _, d := range drop {
		if err := b.Delete(d); err != nil {
			return nil, err
		}
	}
	return next, nil
}
