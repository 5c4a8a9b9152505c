package authsrv

import (
	"context"
	"errors"

	"github.com/golang-jwt/jwt/v5"
)

// ErrJWTAlgorithm is wrapped by ParseJWT's error when a token is signed
// with another algorithm than HS256 ("none" included).
var ErrJWTAlgorithm = errors.New("jwt: the signing algorithm is not HS256")

// IssueJWT signs claims as an HS256 JSON web token with the server's JWT
// key, so that the key never leaves the Server. The token is a credential:
// hand it to its owner, never log it.
func (s *Server) IssueJWT(claims jwt.Claims) (string, error) {
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.jwtKey)
}

// ParseJWT verifies raw and decodes its claims into claims: HS256 with the
// server's key only (the algorithm is pinned here, never taken from the
// token), an expiry required and checked against the server's clock. Its
// errors are golang-jwt's (jwt.ErrTokenExpired, jwt.ErrTokenSignatureInvalid,
// ...) and ErrJWTAlgorithm, for the caller to map to its own messages.
func (s *Server) ParseJWT(raw string, claims jwt.Claims) error {
	_, err := jwt.ParseWithClaims(raw, claims, func(tok *jwt.Token) (any, error) {
		if tok.Method != jwt.SigningMethodHS256 {
			return nil, ErrJWTAlgorithm
		}
		return s.jwtKey, nil
	},
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(s.cfg.now),
	)
	return err
}

// DummyPasswordCheck costs what one password or PIN verification costs and
// decides nothing. A login refused before any password is checked (an
// unknown realm) calls it, so that the refusal takes as long as a wrong
// password and its timing does not tell which realms exist.
func (s *Server) DummyPasswordCheck(ctx context.Context, password string) {
	s.hasher.Dummy(ctx, password)
}
