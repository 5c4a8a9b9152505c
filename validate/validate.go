// Package validate decides authentication requests: the /validate/check
// flow of privacyIDEA as a Go API. A request names a user (login, realm)
// or a token serial and carries a password made of PIN and OTP; the
// Validator finds the candidate tokens, splits the password per token,
// checks the OTP first and the PIN only of the token whose OTP matched (one
// key derivation for a success), triggers challenges for a PIN alone,
// checks challenge answers, and applies the fail counter rules.
//
// Package validate sits on floor 4: it imports token, realm, policy,
// resolver, user, store and apierr.
package validate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// Messages of the decision, as privacyIDEA words them.
const (
	MsgMatching         = "matching %d tokens"
	MsgFoundChallenge   = "Found matching challenge"
	MsgResponseNoMatch  = "Response did not match the challenge."
	MsgResponseNoMatchN = "Response did not match for %d tokens."
	MsgWrongPIN         = "wrong otp pin"
	MsgNoTokens         = "The user has no tokens assigned"
	MsgNoSuitable       = "No suitable token found for authentication."
	MsgNoActiveCR       = "No active challenge response token found"
	MsgOTPOnlyFailed    = "OTP verification failed."
	DefaultChallenge    = "please enter otp: "
)

// Errors of the request.
var (
	ErrNoTarget       = apierr.New(apierr.Parameter, "You need to specify a serial, user or credential_id.")
	ErrInvalidSerial  = apierr.New(apierr.Parameter, "Invalid serial number.")
	ErrInvalidUser    = apierr.New(apierr.Parameter, "Invalid user.")
	ErrSerialNotUsers = apierr.New(apierr.Parameter, "Given serial does not belong to given user!")
	ErrAllRevoked     = apierr.New(apierr.TokenAdmin, "This action is not possible, since the token is locked").WithNumber(1007)
)

// Request is one authentication request.
type Request struct {
	User, Realm, Resolver string
	Serial                string
	Pass                  string
	// TransactionID answers a challenge (privacyIDEA's transaction_id or
	// state).
	TransactionID string
	// OTPOnly checks only the OTP of the serial's token.
	OTPOnly   bool
	Client    netip.Addr
	UserAgent string
	// Options are the other request parameters (for token types).
	Options token.Params
}

// Response is the decision.
type Response struct {
	Value bool
	// Detail is the envelope's detail object (message, serial, type,
	// otplen, multi_challenge, transaction_id, …).
	Detail map[string]any
	// User is the resolved user (Found() false on the serial path without
	// owner or for an unknown user).
	User user.User
	// Challenge is set when challenges were triggered.
	Challenge bool
	// SendFailed is set when a challenge could not be delivered.
	SendFailed bool
}

// Config wires the validator.
type Config struct {
	Tokens   *token.Service
	Realms   *realm.Service
	Policies *policy.Service
	Now      func() time.Time
}

// Validator decides authentication requests.
type Validator struct{ cfg Config }

// New returns a Validator.
func New(cfg Config) *Validator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Validator{cfg: cfg}
}

// challengeOnly are types that answer a correct PIN with a challenge
// always; others do so only when the challenge_response policy lists them.
var challengeOnly = map[string]bool{"email": true, "sms": true, "indexedsecret": true, "questionnaire": true}

// neverChallenge are types without a challenge.
var neverChallenge = map[string]bool{"spass": true, "sshkey": true, "radius": true, "applspec": true}

// req is one request in flight.
type req struct {
	v     *Validator
	r     Request
	u     user.User
	in    *resolver.Instance
	found bool
}

// Check decides a request.
func (v *Validator) Check(ctx context.Context, r Request) (Response, error) {
	if r.Serial == "" && r.User == "" {
		return Response{}, ErrNoTarget
	}
	if strings.Contains(r.Serial, "*") {
		return Response{}, ErrInvalidSerial
	}
	if strings.Contains(r.User, "%") {
		return Response{}, ErrInvalidUser
	}
	q := &req{v: v, r: r}
	if r.User != "" {
		if err := q.resolveUser(ctx); err != nil {
			return Response{}, err
		}
	}
	if r.Serial != "" {
		return q.serialPath(ctx)
	}
	return q.userPath(ctx)
}

func (q *req) resolveUser(ctx context.Context) error {
	login, realmName := q.r.User, q.r.Realm
	if realmName == "" {
		login, realmName = user.Split(login, func(s string) bool { return q.v.cfg.Realms.Exists(ctx, s) }, true)
	}
	if rn, err := q.policyValue(ctx, policy.ScopeAuthentication, "set_realm", user.User{Login: login, Realm: realmName}); err == nil && rn != "" {
		realmName = rn
	} else if rn, err := q.policyValue(ctx, policy.ScopeAuthorization, "setrealm", user.User{Login: login, Realm: realmName}); err == nil && rn != "" {
		realmName = rn
	}
	var err error
	if q.r.Resolver != "" {
		q.u, q.in, err = q.v.cfg.Realms.ResolveIn(ctx, login, realmName, q.r.Resolver)
	} else {
		q.u, q.in, err = q.v.cfg.Realms.Resolve(ctx, login, realmName)
	}
	switch {
	case err == nil:
		q.found = true
	case errors.Is(err, realm.ErrNoUser), errors.Is(err, resolver.ErrNoUser):
		if q.u.Realm == "" {
			q.u.Realm = realm.Normalize(realmName)
		}
		q.u.Login = login
	case errors.Is(err, realm.ErrNotFound):
		q.u = user.User{Login: login, Realm: realm.Normalize(realmName)}
	default:
		return err
	}
	return nil
}

// query is the policy query for the request's user.
func (q *req) query(scope, action string, u user.User) policy.Query {
	pq := policy.Query{Scope: scope, Action: action, Client: q.r.Client, UserAgent: q.r.UserAgent}
	if u.Login != "" {
		pq.User = policy.Str(u.Login)
	}
	if u.Realm != "" {
		pq.Realm = policy.Str(u.Realm)
	}
	if u.Resolver != "" {
		pq.Resolver = policy.Str(u.Resolver)
	}
	return pq
}

// policyValue returns the first value a matching policy gives action.
func (q *req) policyValue(ctx context.Context, scope, action string, u user.User) (string, error) {
	if q.v.cfg.Policies == nil {
		return "", nil
	}
	vals, err := q.v.cfg.Policies.Values(ctx, q.query(scope, action, u), false, true)
	if err != nil || len(vals) == 0 {
		return "", err
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys[0], nil
}

// policyName returns the name of a matching policy that sets a boolean
// action, or "".
func (q *req) policyName(ctx context.Context, scope, action string, u user.User) (string, error) {
	if q.v.cfg.Policies == nil {
		return "", nil
	}
	ps, err := q.v.cfg.Policies.Match(ctx, q.query(scope, action, u))
	if err != nil || len(ps) == 0 {
		return "", err
	}
	return ps[0].Name, nil
}

func (q *req) serialPath(ctx context.Context) (Response, error) {
	svc := q.v.cfg.Tokens
	t, err := svc.Get(ctx, q.r.Serial)
	if err != nil {
		return Response{}, err
	}
	if q.r.User != "" && (!t.Assigned() || t.Owner.UID != q.u.UID || t.Owner.Resolver != q.u.Resolver) {
		return Response{}, ErrSerialNotUsers
	}
	if t.Assigned() {
		q.u, q.found = *t.Owner, true
	}
	if q.r.OTPOnly {
		m, err := svc.Verify(ctx, t, q.r.Pass, q.r.Options, nil)
		if err != nil && !errors.Is(err, token.ErrCorrupt) {
			return Response{}, err
		}
		if m.OK {
			// Commit still refuses a disabled or blocked token (privacyIDEA
			// skips those checks for otponly; we do not let a disabled
			// token authenticate).
			if _, err := svc.Commit(ctx, t.Serial, m); err == nil {
				return Response{Value: true, User: q.u, Detail: detailOne(MsgMatching1(), t)}, nil
			}
		}
		return Response{User: q.u, Detail: map[string]any{"message": MsgOTPOnlyFailed}}, nil
	}
	return q.decide(ctx, []*token.Token{t})
}

// MsgMatching1 is the success message of one token.
func MsgMatching1() string { return fmt.Sprintf(MsgMatching, 1) }

func (q *req) userPath(ctx context.Context) (Response, error) {
	if !q.found {
		if name, err := q.policyName(ctx, policy.ScopeAuthentication, "passOnNoUser", q.u); err != nil {
			return Response{}, err
		} else if name != "" {
			return Response{Value: true, User: q.u, Detail: map[string]any{"message": fmt.Sprintf("user does not exist, accepted due to '%s'", name)}}, nil
		}
		return Response{}, errUnknownUser(q)
	}
	toks, err := q.v.cfg.Tokens.ByOwner(ctx, q.u)
	if err != nil {
		return Response{}, err
	}
	if len(toks) == 0 {
		if name, err := q.policyName(ctx, policy.ScopeAuthentication, "passOnNoToken", q.u); err != nil {
			return Response{}, err
		} else if name != "" {
			return Response{Value: true, User: q.u, Detail: map[string]any{"message": fmt.Sprintf("user has no token, accepted due to '%s'", name)}}, nil
		}
		if v, err := q.policyValue(ctx, policy.ScopeAuthentication, "passthru", q.u); err != nil {
			return Response{}, err
		} else if strings.EqualFold(v, "userstore") && q.in != nil {
			ok, err := q.in.CheckPassword(ctx, q.u.UID, q.r.Pass)
			if err != nil {
				return Response{}, err
			}
			if ok {
				name, _ := q.policyName(ctx, policy.ScopeAuthentication, "passthru", q.u)
				return Response{Value: true, User: q.u, Detail: map[string]any{"message": fmt.Sprintf("against userstore due to '%s'", name)}}, nil
			}
		}
		return Response{User: q.u, Detail: map[string]any{"message": MsgNoTokens}}, nil
	}
	return q.decide(ctx, toks)
}

func detailOne(msg string, t *token.Token) map[string]any {
	return map[string]any{"message": msg, "serial": t.Serial, "type": t.Type, "otplen": t.OTPLen}
}

func typeOf(toks []*token.Token) string {
	typ := ""
	for _, t := range toks {
		if typ != "" && typ != t.Type {
			return "undetermined"
		}
		typ = t.Type
	}
	return typ
}

func errUnknownUser(q *req) error {
	return apierr.New(apierr.User, fmt.Sprintf("User %s does not exist.", q.u.String()))
}
