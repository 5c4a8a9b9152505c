package authsrv_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/store/storetest"
)

// TestJWT checks the library's JWT calls: a token issued by a Server
// verifies on it and on a Server with the same key, and is refused when
// expired by the server's clock, without an expiry, signed with another
// key or with another algorithm.
func TestJWT(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	open := func(jwtKey byte) *authsrv.Server {
		key := bytes.Repeat([]byte{7}, 32)
		s, err := authsrv.New(authsrv.WithStore(storetest.Open(t)), authsrv.WithEncKey(key),
			authsrv.WithJWTKey(bytes.Repeat([]byte{jwtKey}, 32)), authsrv.WithClock(clock), cheapKDF)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	s, same, other := open(1), open(1), open(2)
	exp := func(d time.Duration) jwt.RegisteredClaims {
		return jwt.RegisteredClaims{Subject: "alice", ExpiresAt: jwt.NewNumericDate(now.Add(d))}
	}
	tok, err := s.IssueJWT(exp(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range []*authsrv.Server{s, same} {
		var c jwt.RegisteredClaims
		if err := srv.ParseJWT(tok, &c); err != nil || c.Subject != "alice" {
			t.Errorf("ParseJWT = %v, subject %q", err, c.Subject)
		}
	}
	if kid, _ := jwtHeader(t, tok)["kid"].(string); kid == "" {
		t.Errorf("token without kid: %s", tok)
	}
	// A token from before the key ring (no kid) verifies with the key.
	noKID := signNoKID(t, bytes.Repeat([]byte{1}, 32), exp(time.Minute))
	for _, srv := range []*authsrv.Server{s, same} {
		if err := srv.ParseJWT(noKID, &jwt.RegisteredClaims{}); err != nil {
			t.Errorf("token without kid: %v", err)
		}
	}
	expired, _ := s.IssueJWT(exp(-time.Second))
	noExpiry, _ := s.IssueJWT(jwt.RegisteredClaims{Subject: "alice"})
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, exp(time.Minute)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	hs512, err := jwt.NewWithClaims(jwt.SigningMethodHS512, exp(time.Minute)).SignedString(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		srv  *authsrv.Server
		raw  string
		want error
	}{
		{"another key's id", other, tok, authsrv.ErrJWTUnknownKey},
		{"another key, no kid", other, noKID, jwt.ErrTokenSignatureInvalid},
		{"expired", s, expired, jwt.ErrTokenExpired},
		{"no expiry", s, noExpiry, jwt.ErrTokenRequiredClaimMissing},
		{"alg none", s, none, authsrv.ErrJWTAlgorithm},
		{"HS512 with the right key", s, hs512, authsrv.ErrJWTAlgorithm},
		{"garbage", s, "a.b.c", jwt.ErrTokenMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.srv.ParseJWT(tc.raw, &jwt.RegisteredClaims{}); !errors.Is(err, tc.want) {
				t.Errorf("ParseJWT = %v, want %v", err, tc.want)
			}
		})
	}
}

// jwtHeader decodes a token's header.
func jwtHeader(t *testing.T, raw string) map[string]any {
	t.Helper()
	part, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	return h
}

// signNoKID signs claims with key as the versions before the key ring did
// (HS256, no kid).
func signNoKID(t *testing.T, key []byte, c jwt.Claims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
