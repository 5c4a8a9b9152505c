package token

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/user"
)

// Errors of the enrollment limits, as privacyIDEA words them. They are
// sentinels so that a caller that enrolls silently (enrollment during an
// authentication) can tell a limit from a failure.
var (
	ErrMaxPerUser  = apierr.New(apierr.Policy, "The number of tokens for this user is limited!")
	ErrMaxPerRealm = apierr.New(apierr.Policy, "The number of tokens in this realm is limited!")
)

// PolicyReader is how EnrollPolicies reads the policies of one
// enrollment, matched against the token's owner (or its realm when it has
// none): the authsrv operations and validate's enrollment during an
// authentication each read them their own way.
type PolicyReader interface {
	// Value is the value the matching policies of scope give action ("" for
	// none), with the names of the policies that gave it.
	Value(ctx context.Context, scope, action string) (string, []string, error)
	// Flag reports whether a matching policy of scope sets the boolean
	// action, with the names of those policies.
	Flag(ctx context.Context, scope, action string) (bool, []string, error)
}

// QueryReader is the PolicyReader of a policy service and one query: the
// query's Scope and Action are replaced by each lookup's.
type QueryReader struct {
	Policies *policy.Service
	Query    policy.Query
}

var _ PolicyReader = QueryReader{}

// Value returns the first (sorted) value the matching policies give.
func (r QueryReader) Value(ctx context.Context, scope, action string) (string, []string, error) {
	q := r.Query
	q.Scope, q.Action = scope, action
	vals, err := r.Policies.Values(ctx, q, false, true)
	if err != nil || len(vals) == 0 {
		return "", nil, err
	}
	var names []string
	for _, n := range vals {
		names = append(names, n...)
	}
	return slices.Sorted(maps.Keys(vals))[0], names, nil
}

// Flag reports whether any matching policy sets action.
func (r QueryReader) Flag(ctx context.Context, scope, action string) (bool, []string, error) {
	q := r.Query
	q.Scope, q.Action = scope, action
	ps, err := r.Policies.Match(ctx, q)
	if err != nil {
		return false, nil, err
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return len(ps) > 0, names, nil
}

// Limits are the enrollment limits a new token must stay within
// (max_token_per_user, max_token_per_realm); nil does not limit. Init
// counts inside its transaction, so parallel enrollments cannot pass a
// limit together.
type Limits struct {
	PerUser  *int
	PerRealm *int
	// Realm is the realm PerRealm counts when the token has no owner (the
	// owner's realm otherwise).
	Realm string
}

// Enrollment is what the enrollment policies decide for a new token,
// besides the defaults EnrollPolicies writes into its parameters.
type Enrollment struct {
	// Verify: verify_enrollment names the type.
	Verify bool
	// EncryptPIN: encrypt_pin is set.
	EncryptPIN bool
	// Limits are max_token_per_user and max_token_per_realm.
	Limits Limits
	// Policies are the names of the policies that decided.
	Policies []string
}

// EnrollPolicies applies the enrollment policies to a token of type typ
// about to be enrolled with parameters p, so that /token/init and the
// enrollment during an authentication enroll alike. A policy value
// replaces the parameter (given or not), as privacyIDEA's prepolicies do:
// hashlib, otplen and timeStep from
// <typ>_hashlib/_otplen/_timestep of callerScope (the scope of the
// caller's rights, admin or user; "" for none) and then the enrollment
// scope; tokenlabel, tokenissuer, appimageurl, papertoken_count,
// tantoken_count, registration.length/contents and pw.length/contents
// from the enrollment scope. <typ>_force_server_generate drops otpkey and
// sets genkey. A type listed in require_description without a
// description is refused. The returned Enrollment carries
// verify_enrollment, encrypt_pin and the token limits.
func EnrollPolicies(ctx context.Context, pr PolicyReader, callerScope, typ string, p Params) (Enrollment, error) {
	var e Enrollment
	value := func(scope, action string) (string, error) {
		v, names, err := pr.Value(ctx, scope, action)
		if v != "" {
			e.Policies = append(e.Policies, names...)
		}
		return v, err
	}
	flag := func(scope, action string) (bool, error) {
		on, names, err := pr.Flag(ctx, scope, action)
		if on {
			e.Policies = append(e.Policies, names...)
		}
		return on, err
	}
	// A policy value replaces the request's parameter, as privacyIDEA's
	// prepolicies do: a user cannot enroll around the administrator's
	// hashlib, otplen, label or issuer.
	inject := func(param, action string, scopes ...string) error {
		for _, sc := range scopes {
			if sc == "" {
				continue
			}
			v, err := value(sc, action)
			if err != nil {
				return err
			}
			if v != "" {
				p[param] = v
				return nil
			}
		}
		return nil
	}
	for _, d := range [][2]string{
		{"hashlib", typ + "_hashlib"}, {"otplen", typ + "_otplen"}, {"timeStep", typ + "_timestep"},
	} {
		if err := inject(d[0], d[1], callerScope, policy.ScopeEnrollment); err != nil {
			return e, err
		}
	}
	for _, a := range []string{
		"tokenlabel", "tokenissuer", "appimageurl", "papertoken_count", "tantoken_count",
		"registration.length", "registration.contents", "pw.length", "pw.contents",
	} {
		if err := inject(a, a, policy.ScopeEnrollment); err != nil {
			return e, err
		}
	}
	force, err := flag(policy.ScopeEnrollment, typ+"_force_server_generate")
	if err != nil {
		return e, err
	}
	if force {
		delete(p, "otpkey")
		p["genkey"] = "1"
	}
	v, err := value(policy.ScopeEnrollment, "verify_enrollment")
	if err != nil {
		return e, err
	}
	e.Verify = slices.Contains(strings.Fields(strings.ToLower(v)), typ)
	if e.EncryptPIN, err = flag(policy.ScopeEnrollment, "encrypt_pin"); err != nil {
		return e, err
	}
	if v, err = value(policy.ScopeEnrollment, "require_description"); err != nil {
		return e, err
	}
	if slices.Contains(strings.Fields(strings.ToLower(v)), typ) && strings.TrimSpace(p.Str("description")) == "" {
		return e, apierr.New(apierr.Parameter, "Description required for "+typ+" token.")
	}
	for _, l := range []struct {
		action string
		dst    **int
	}{{"max_token_per_user", &e.Limits.PerUser}, {"max_token_per_realm", &e.Limits.PerRealm}} {
		v, err := value(policy.ScopeEnrollment, l.action)
		if err != nil {
			return e, err
		}
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			*l.dst = &n
		}
	}
	return e, nil
}

// Apply sets the enrollment's options and limits on req.
func (e Enrollment) Apply(req *InitRequest) {
	req.Verify, req.EncryptPIN, req.Limits = e.Verify, e.EncryptPIN, e.Limits
}

// countInRealm is the number of tokens in the token realm realm, as
// max_token_per_realm counts them: read from the counter the list indexes
// keep (one read at any number of tokens), or counted from the realm index
// while those are not built yet.
func countInRealm(tx store.Tx, realm string) (int, error) {
	realm = strings.ToLower(realm)
	if indexesComplete(tx) {
		return readCounter(tx.Bucket(bucketCounts), counterKey(cntRealm, realm)), nil
	}
	n := 0
	err := tx.Bucket(bucketRealm).ForEach([]byte(realm+"\x00"), func(_, _ []byte) error { n++; return nil })
	return n, err
}

// countOfOwner is the number of tokens of an owner, as max_token_per_user
// counts them (a prefix of the owner index: a user's few tokens).
func countOfOwner(tx store.Tx, owner *user.User) (int, error) {
	n := 0
	err := tx.Bucket(bucketOwner).ForEach(ownerKey(owner), func(_, _ []byte) error { n++; return nil })
	return n, err
}
