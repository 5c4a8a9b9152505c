package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
)

// Roles carried in the JWT.
const (
	roleAdmin = "admin"
	roleUser  = "user"
)

// maxTokenLen bounds the Authorization value we try to decode.
const maxTokenLen = 8 << 10

// Errors of the authentication layer (texts as privacyIDEA's, always with
// the ERR prefix).
var (
	errMissingHeader = apierr.New(apierr.AuthMissingHeader, "Authentication failure. Missing Authorization header.")
	errWrongRole     = apierr.New(apierr.AuthMissingRight, "Authentication failure. You do not have the necessary role (['admin']) to access this resource!")
	// errSessionEnded: a local administrator's token from before its
	// account was deleted, disabled or given a new password.
	errSessionEnded = decodingError("The administrator's session has ended (account deleted, disabled or password changed): log in again")
)

func decodingError(reason string) error {
	return apierr.New(apierr.AuthDecoding, "Authentication failure. Error decoding the Authorization token: "+reason)
}

// identity is the caller of a protected endpoint, read from its JWT.
type identity struct {
	Username string
	Realm    string
	Role     string
	AuthType string
	Rights   []string
	// Stamp is a local administrator's session stamp (authsrv.Login).
	Stamp string
}

// claims are the JWT's claims, named as privacyIDEA names them.
type claims struct {
	Username string   `json:"username"`
	Realm    string   `json:"realm"`
	Nonce    string   `json:"nonce"`
	Role     string   `json:"role"`
	AuthType string   `json:"authtype"`
	Rights   []string `json:"rights"`
	// Stamp is a local administrator's session stamp, checked on every
	// request (authsrv's own claim; privacyIDEA's clients ignore it).
	Stamp string `json:"stamp,omitempty"`
	jwt.RegisteredClaims
}

// issueToken signs a JWT for who.
func (a *api) issueToken(who identity) (string, time.Time, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", time.Time{}, err
	}
	exp := a.s.Now().Add(a.s.JWTLifetime())
	c := claims{
		Username: who.Username, Realm: who.Realm, Nonce: hex.EncodeToString(nonce[:]),
		Role: who.Role, AuthType: who.AuthType, Rights: who.Rights, Stamp: who.Stamp,
		RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(exp)},
	}
	tok, err := a.s.IssueJWT(c)
	return tok, exp, err
}

// bearer returns the raw token from PI-Authorization, else Authorization;
// a "Bearer " prefix is tolerated.
func bearer(r *http.Request) string {
	v := r.Header.Get("PI-Authorization")
	if v == "" {
		v = r.Header.Get("Authorization")
	}
	v = strings.TrimSpace(v)
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		v = strings.TrimSpace(v[7:])
	}
	return v
}

// authenticate verifies the request's JWT and returns the admin or user
// it names. A token of another role (the validate role of API keys) gives
// no access to admin or user endpoints. A local administrator's token is
// valid only while its account exists, is enabled and has the token's
// session stamp (one store read); the users of realms are not checked
// against their user stores here.
func (a *api) authenticate(r *http.Request) (*identity, error) {
	c, err := a.verifyJWT(bearer(r))
	if err != nil {
		return nil, err
	}
	if c.Role == roleValidate {
		return nil, errValidateRole
	}
	if c.Username == "" || (c.Role != roleAdmin && c.Role != roleUser) {
		return nil, decodingError("Invalid token")
	}
	if err := a.checkSession(r.Context(), c); err != nil {
		return nil, err
	}
	return &identity{Username: c.Username, Realm: c.Realm, Role: c.Role, AuthType: c.AuthType, Rights: c.Rights, Stamp: c.Stamp}, nil
}

// checkSession refuses a local administrator's token whose session ended
// (errSessionEnded); other tokens pass.
func (a *api) checkSession(ctx context.Context, c *claims) error {
	if c.Role != roleAdmin || c.Realm != "" {
		return nil
	}
	ok, err := a.s.Admins().Session(ctx, c.Username, c.Stamp)
	if err != nil {
		return err
	}
	if !ok {
		return errSessionEnded
	}
	return nil
}

// verifyJWT checks a raw token: HS256 with the ring's key that its kid
// names only, an expiry
// required and checked against the server's clock. It does not look at
// the role.
func (a *api) verifyJWT(raw string) (*claims, error) {
	if raw == "" {
		return nil, errMissingHeader
	}
	if len(raw) > maxTokenLen {
		return nil, decodingError("the token is too long")
	}
	var c claims
	// Only HS256 with the server's key, the method pinned by the library
	// ("none" and every other algorithm are refused).
	err := a.s.ParseJWT(raw, &c)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, apierr.New(apierr.AuthExpired, "Authentication failure. Your token has expired: Signature has expired")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return nil, decodingError("Signature verification failed")
	case errors.Is(err, authsrv.ErrJWTUnknownKey):
		return nil, decodingError("The token's key id is unknown")
	case errors.Is(err, authsrv.ErrJWTAlgorithm), errors.Is(err, jwt.ErrTokenUnverifiable):
		return nil, decodingError("The specified alg value is not allowed")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return nil, decodingError("Token is missing the \"exp\" claim")
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return nil, decodingError("The token is not yet valid")
	default:
		return nil, decodingError("Invalid token")
	}
	return &c, nil
}

// rightsOf lists an admin's rights for the login answer: every admin
// action when no admin policy is active, else the actions granted by the
// policies matching the admin (conditions skipped, as privacyIDEA does
// for the WebUI rights).
func (c *call) rightsOf(who identity) ([]string, error) {
	all := c.a.adminRights()
	active, err := c.a.s.Policies().ActiveInScope(c.ctx, policy.ScopeAdmin)
	if err != nil || !active {
		return all, err
	}
	ps, err := c.a.s.Policies().Match(c.ctx, policy.Query{Scope: policy.ScopeAdmin,
		AdminUser: policy.Str(who.Username), AdminRealm: policy.Str(who.Realm),
		Client: clientIP(c.r), UserAgent: c.r.UserAgent(), SkipConditions: true})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range all {
		for _, p := range ps {
			acts := policy.ParseActions(p.Action)
			_, direct := acts[a]
			_, star := acts["*"]
			_, neg1 := acts["!"+a]
			_, neg2 := acts["-"+a]
			if (direct || star) && !neg1 && !neg2 {
				out = append(out, a)
				break
			}
		}
	}
	return out, nil
}

// adminRights lists the admin actions of the registered routes: with no
// admin policy every one of them is granted.
func (a *api) adminRights() []string {
	out := slices.Clone(a.innerActions)
	for _, e := range a.endpoints {
		if e.action != "" && !slices.Contains(out, e.action) {
			out = append(out, e.action)
		}
	}
	slices.Sort(out)
	return out
}

// postAuth is POST /auth: the login is the library's (authsrv.Ops.Login:
// local administrators, realm users, superuser realms, the audit entry);
// the JWT and the rights list of the web UI are the HTTP layer's.
func postAuth(c *call) (answer, error) {
	username, err := c.p.str("username")
	if err != nil {
		return answer{}, err
	}
	password, err := c.p.str("password")
	if err != nil {
		return answer{}, err
	}
	realm, err := c.p.str("realm")
	if err != nil {
		return answer{}, err
	}
	// Whoever logs in is anonymous until it did (a token it may carry
	// names nobody here).
	who := c.caller()
	who.Role, who.Name, who.Realm = caller.Anonymous, "", ""
	login, err := c.a.s.Ops().Login(c.ctx, who, authsrv.LoginRequest{Username: username, Password: password, Realm: realm})
	c.ran()
	if err != nil {
		return answer{}, err
	}
	id := identity{Username: login.Name, Realm: login.Realm, Role: roleUser, AuthType: "password", Stamp: login.Stamp}
	if login.Role == caller.Admin {
		id.Role = roleAdmin
		if id.Rights, err = c.rightsOf(id); err != nil {
			return answer{}, err
		}
	}
	tok, _, err := c.a.issueToken(id)
	if err != nil {
		return answer{}, err
	}
	return answer{auth: true, value: map[string]any{
		"token":     tok,
		"role":      id.Role,
		"username":  id.Username,
		"realm":     id.Realm,
		"auth":      true,
		"rights":    nonNil(id.Rights),
		"log_level": pythonLogLevel(c.a.s.Logger()),
	}}, nil
}

// pythonLogLevel is the server's log level as privacyIDEA's /auth reports
// it (Python's numbers: 10 debug, 20 info, 30 warning, 40 error, 50
// critical), so that a WebUI showing it reads the level it knows.
func pythonLogLevel(l zerolog.Logger) int {
	lvl := max(l.GetLevel(), zerolog.GlobalLevel())
	switch {
	case lvl <= zerolog.DebugLevel:
		return 10
	case lvl == zerolog.InfoLevel:
		return 20
	case lvl == zerolog.WarnLevel:
		return 30
	case lvl == zerolog.ErrorLevel:
		return 40
	}
	return 50
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
