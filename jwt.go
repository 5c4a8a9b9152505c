package authsrv

import (
	"context"
	"errors"
	"fmt"

	"github.com/golang-jwt/jwt/v5"
)

// ErrJWTAlgorithm is wrapped by ParseJWT's error when a token is signed
// with another algorithm than HS256 ("none" included).
var ErrJWTAlgorithm = errors.New("jwt: the signing algorithm is not HS256")

// IssueJWT signs claims as an HS256 JSON web token with the ring's current
// key, its id in the header's kid, so that the key never leaves the
// Server. A token that outlives a session (its expiry later than
// JWTLifetime from now, an API key) is first recorded in the ring, so that
// a rotation keeps its key for as long as the token is valid. The token is
// a credential: hand it to its owner, never log it.
func (s *Server) IssueJWT(claims jwt.Claims) (string, error) {
	k := s.jwtKeys.current()
	exp, err := claims.GetExpirationTime()
	if err != nil {
		return "", fmt.Errorf("jwt: %w", err)
	}
	if exp != nil && exp.After(s.cfg.now().Add(s.cfg.jwtLifetime)) {
		if err := s.jwtKeys.signedUntil(k.KID, exp.Time); err != nil {
			return "", err
		}
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header["kid"] = k.KID
	return tok.SignedString(k.Key)
}

// ParseJWT verifies raw and decodes its claims into claims: HS256 only
// (the algorithm is pinned here, never taken from the token), with the
// ring's key that the header's kid names (a token without kid: the data
// directory's first key, while the ring holds it), an expiry required and
// checked against the server's clock. A retired key verifies until the
// last token it could have signed expires. Its errors are golang-jwt's
// (jwt.ErrTokenExpired, jwt.ErrTokenSignatureInvalid, ...),
// ErrJWTAlgorithm and ErrJWTUnknownKey, for the caller to map to its own
// messages.
func (s *Server) ParseJWT(raw string, claims jwt.Claims) error {
	_, err := jwt.ParseWithClaims(raw, claims, func(tok *jwt.Token) (any, error) {
		if tok.Method != jwt.SigningMethodHS256 {
			return nil, ErrJWTAlgorithm
		}
		kid := ""
		if v, ok := tok.Header["kid"]; ok {
			str, isStr := v.(string)
			if !isStr || str == "" {
				return nil, ErrJWTUnknownKey
			}
			kid = str
		}
		return s.jwtKeys.verifier(kid, s.cfg.now())
	},
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(s.cfg.now),
	)
	return err
}

// JWTKeys describes the key ring: the current key last, never a secret.
func (s *Server) JWTKeys() []JWTKey { return s.jwtKeys.list() }

// DummyPasswordCheck costs what one password or PIN verification costs and
// decides nothing. A login refused before any password is checked (an
// unknown realm) calls it, so that the refusal takes as long as a wrong
// password and its timing does not tell which realms exist.
func (s *Server) DummyPasswordCheck(ctx context.Context, password string) {
	s.hasher.Dummy(ctx, password)
}
