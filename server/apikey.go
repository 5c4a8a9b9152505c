package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/user"
)

// API keys: under the AUTHZ policy api_key_required, /validate/check,
// /validate/samlcheck and /validate/radiuscheck (one handler in
// privacyIDEA) answer only requests that carry a JWT of role validate in
// PI-Authorization or Authorization. Such tokens come from "authsrv api
// createtoken" (privacyIDEA: pi-manage api createtoken -r validate) and
// open no admin or user endpoint.

// roleValidate is the role of API keys.
const roleValidate = "validate"

// actAPIKeyRequired is the AUTHZ action.
const actAPIKeyRequired = "api_key_required"

// Validity of API keys in days: pi-manage's default of a year, and at
// most a hundred years.
const (
	DefaultAPIKeyDays = 365
	MaxAPIKeyDays     = 36500
)

// APIKeyValidity checks a validity in days and returns it as a duration.
func APIKeyValidity(days int) (time.Duration, error) {
	if days < 1 || days > MaxAPIKeyDays {
		return 0, fmt.Errorf("the validity of an API key must be 1 to %d days, not %d", MaxAPIKeyDays, days)
	}
	return time.Duration(days) * 24 * time.Hour, nil
}

var (
	// errNoAPIKey: the policy applies and the request carries no token we
	// signed that is still valid.
	errNoAPIKey = apierr.New(apierr.Policy, "No valid API key was passed.")
	// errNotAPIKey: a valid token of another role (an admin's or a user's).
	errNotAPIKey = apierr.New(apierr.Policy, "A correct JWT was passed, but it was no API key.")
	// errValidateRole: an API key presented to an endpoint of users and
	// admins.
	errValidateRole = apierr.New(apierr.AuthMissingRight, "Authentication failure. You do not have the necessary role (['user', 'admin']) to access this resource!")
)

// NewAPIKey signs an API key (a JWT of role validate) with s's JWT key,
// valid for validity from s's clock. The key is a credential: print it to
// its owner, never log it.
func NewAPIKey(s *authsrv.Server, validity time.Duration) (string, time.Time, error) {
	if validity <= 0 {
		return "", time.Time{}, errors.New("the validity of an API key must be positive")
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", time.Time{}, err
	}
	exp := s.Now().Add(validity)
	c := claims{
		Nonce: hex.EncodeToString(nonce[:]), Role: roleValidate, Rights: []string{},
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(exp)},
	}
	tok, err := s.IssueJWT(c)
	return tok, exp, err
}

// checkAPIKey applies AUTHZ api_key_required: when a policy matching the
// request's user (as given: login, realm or the default realm; no user
// store lookup, so that nothing about the user is learnt before the key
// is checked) and client sets it, the request must carry a valid API key.
// It runs before the request is decided, and costs nothing beyond the
// request's policy snapshot when no authorization policy is active.
func (c *call) checkAPIKey() error {
	sn, err := c.policySnapshot()
	if err != nil {
		return err
	}
	if !sn.Active(policy.ScopeAuthorization) {
		return nil
	}
	login, realmName, err := c.requestUser()
	if err != nil {
		return err
	}
	sc, err := sn.Scoped(c.ctx, policy.Query{
		Scope: policy.ScopeAuthorization, User: &login, Realm: &realmName,
		Client: clientIP(c.r), UserAgent: c.r.UserAgent(),
		Data: func() policy.ConditionData { return requestConditionData(c.r) },
	})
	if err != nil {
		return err
	}
	ps, err := sc.Match(actAPIKeyRequired)
	if err != nil || len(ps) == 0 {
		return err
	}
	for _, p := range ps {
		c.policies = append(c.policies, p.Name)
	}
	cl, err := c.a.verifyJWT(bearer(c.r))
	if err != nil {
		return errNoAPIKey
	}
	if cl.Role != roleValidate {
		return errNotAPIKey
	}
	return nil
}

// requestUser is the user of a /validate request as the parameters name
// it: login@realm split when realm is a realm, an explicit realm winning,
// the default realm when none is named. Both are empty without a user.
func (c *call) requestUser() (string, string, error) {
	raw, _ := c.p.str("user")
	if raw == "" {
		return "", "", nil
	}
	login, realmName := user.Split(raw, c.isRealm, true)
	if r, _ := c.p.str("realm"); r != "" {
		realmName = r
	}
	if realmName == "" {
		def, err := c.a.s.Realms().Default(c.ctx)
		if err != nil {
			return "", "", err
		}
		realmName = def
	}
	return login, realm.Normalize(realmName), nil
}
