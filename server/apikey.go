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
)

// API keys: under the AUTHZ policy api_key_required, /validate/check,
// /validate/samlcheck and /validate/radiuscheck (one handler in
// privacyIDEA) answer only requests that carry a JWT of role validate in
// PI-Authorization or Authorization; the validator decides that from the
// caller's role (validateCaller presents a valid key as caller.APIKey).
// Such tokens come from "authsrv api createtoken" (privacyIDEA: pi-manage
// api createtoken -r validate) and open no admin or user endpoint.

// roleValidate is the role of API keys.
const roleValidate = "validate"

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
