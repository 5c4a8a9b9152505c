package validate

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"strings"
	"time"

	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// The bucket "authlog" holds one typed record per authentication result
// of a user (checks and user logins), keyed by realm, login, time and a
// sequence number, so that auth_max_fail and auth_max_success count a
// user's results in a window with one ordered walk, whatever the audit
// log's routes are named. It is written in the transaction of the
// request's audit entry while an authorization policy is active (the
// counting policies are of that scope: without one, the success path
// writes nothing more than its token and audit entry), and Prune removes
// records older than every window a policy sets.
const (
	authLogBucket = "authlog"
	authLogSchema = 1
	// minAuthLogKeep is how long records are kept when no policy asks
	// for longer: a policy added later still sees the last day.
	minAuthLogKeep = 24 * time.Hour
)

// authLogRecord is one authentication result.
type authLogRecord struct {
	store.Versioned
	// Result is AuthAccept, AuthReject or AuthChallenge.
	Result string `json:"result"`
}

// authLogPrefix is the key prefix of u's records.
func authLogPrefix(login, realmName string) []byte {
	return []byte(strings.ToLower(realmName) + "\x00" + login + "\x00")
}

// authLogKey is the key of a record of login@realm at time at; seq makes
// it unique.
func authLogKey(login, realmName string, at time.Time, seq uint64) []byte {
	k := authLogPrefix(login, realmName)
	k = binary.BigEndian.AppendUint64(k, uint64(at.UnixNano()))
	return binary.BigEndian.AppendUint64(k, seq)
}

// authLogTime reads the time of a record key.
func authLogTime(k []byte) (time.Time, bool) {
	if len(k) < 16 {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(k[len(k)-16:]))), true
}

// countingPolicies reports whether snap may hold a policy that counts
// authentication results (auth_max_fail and auth_max_success are
// authorization policies).
func countingPolicies(snap *policy.Snapshot) bool {
	return snap != nil && snap.Active(policy.ScopeAuthorization)
}

// authRecord returns the write of one authentication result.
func (v *Validator) authRecord(login, realmName, result string, at time.Time) func(store.Tx) error {
	val, err := json.Marshal(authLogRecord{Versioned: store.Versioned{Schema: authLogSchema}, Result: result})
	return func(tx store.Tx) error {
		if err != nil {
			return err
		}
		b := tx.Bucket(authLogBucket)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		return b.Put(authLogKey(login, realmName, at, seq), val)
	}
}

// RecordLogin records the result of a user's login with the user store
// password (POST /auth): auth_max_fail and auth_max_success count it as
// they count checks.
func (v *Validator) RecordLogin(ctx context.Context, u user.User, ok bool) error {
	if v.cfg.Store == nil || u.Login == "" || v.cfg.Policies == nil {
		return nil
	}
	snap, err := v.cfg.Policies.Snapshot(ctx)
	if err != nil || !countingPolicies(snap) {
		return err
	}
	result := AuthReject
	if ok {
		result = AuthAccept
	}
	return v.cfg.Store.Update(context.WithoutCancel(ctx), v.authRecord(u.Login, u.Realm, result, v.cfg.Now()))
}

// countAuths counts u's successful authentications since succSince and
// failed ones since failSince (a zero time counts none). A triggered
// challenge is neither.
func (v *Validator) countAuths(ctx context.Context, u user.User, failSince, succSince time.Time) (succ, fail int, err error) {
	if v.cfg.Store == nil {
		return 0, 0, nil
	}
	since := failSince
	if since.IsZero() || (!succSince.IsZero() && succSince.Before(since)) {
		since = succSince
	}
	prefix := authLogPrefix(u.Login, u.Realm)
	start := binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(since.UnixNano()))
	err = v.cfg.Store.View(ctx, func(tx store.Tx) error {
		succ, fail = 0, 0
		c := tx.Bucket(authLogBucket).Cursor()
		for k, val := c.Seek(start); store.HasPrefix(k, prefix); k, val = c.Next() {
			at, ok := authLogTime(k)
			if !ok {
				continue
			}
			var rec authLogRecord
			if err := json.Unmarshal(val, &rec); err != nil {
				return err
			}
			switch rec.Result {
			case AuthAccept:
				if !succSince.IsZero() && !at.Before(succSince) {
					succ++
				}
			case AuthReject:
				if !failSince.IsZero() && !at.Before(failSince) {
					fail++
				}
			}
		}
		return nil
	})
	return succ, fail, err
}

// Prune removes the authentication records older than the longest
// auth_max_fail or auth_max_success window of the stored policies (at
// least a day) and returns how many it removed. Server.Run calls it.
func (v *Validator) Prune(ctx context.Context) (int, error) {
	if v.cfg.Store == nil {
		return 0, nil
	}
	keep := minAuthLogKeep
	if v.cfg.Policies != nil {
		ps, err := v.cfg.Policies.List(ctx, policy.Filter{Scope: policy.ScopeAuthorization})
		if err != nil {
			return 0, err
		}
		for _, p := range ps {
			acts := policy.ParseActions(p.Action)
			for _, a := range []string{"auth_max_fail", "auth_max_success"} {
				s, _ := acts[a].(string)
				_, per, _ := strings.Cut(s, "/")
				if d, ok := parseDelta(per); ok && d > keep {
					keep = d
				}
			}
		}
	}
	cut := v.cfg.Now().Add(-keep)
	n := 0
	err := v.cfg.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		n, err = store.DeleteWhere(tx.Bucket(authLogBucket), nil, func(k, _ []byte) bool {
			at, ok := authLogTime(k)
			return ok && at.Before(cut)
		})
		return err
	})
	return n, err
}
