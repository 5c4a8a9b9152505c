package scim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/resolver"
)

const (
	// maxBody caps every response body.
	maxBody = 4 << 20
	// maxIDLen caps ids and logins put into a URL.
	maxIDLen = 1024
	// pageSize is the count asked for per list request; sizeLimit caps a
	// search result and maxPages the requests one search makes.
	pageSize  = 100
	sizeLimit = 1000
	maxPages  = 50
	// tokenMargin: a cached token is replaced this long before it expires
	// (at most a tenth of its lifetime). noExpiry is the lifetime assumed
	// when the server sends no expires_in.
	tokenMargin = 30 * time.Second
	noExpiry    = 60 * time.Second
)

// Causes wrapped under resolver.ErrUnavailable (for logs and Test); none
// carries text from the remote body.
var (
	errTokenRefused = errors.New("scim: the authorization server refused the client credentials")
	errToken        = errors.New("scim: the authorization server did not issue a token")
	errNotJSON      = errors.New("scim: the answer is not JSON")
	errBadJSON      = errors.New("scim: the answer is not valid SCIM JSON")
	errTooLarge     = errors.New("scim: the answer is larger than 4 MiB")
	errRedirect     = errors.New("scim: the server answered with a redirect")
	// errNotFound is a 404 for /Users/<id>; callers turn it into ErrNoUser.
	errNotFound = errors.New("scim: not found")
)

// statusError is a non-2xx answer.
type statusError struct {
	what   string
	status int
}

func (e *statusError) Error() string {
	return fmt.Sprintf("scim: %s answered with HTTP status %d", e.what, e.status)
}

func unavailable(err error) error {
	return fmt.Errorf("%w: %w", err, resolver.ErrUnavailable)
}

// token is a cached access token.
type token struct {
	value   string
	expires time.Time
}

// String never shows the token.
func (t *token) String() string { return "token(expires " + t.expires.Format(time.RFC3339) + ")" }

// GoString never shows the token.
func (t *token) GoString() string { return t.String() }

// client talks to the authorization and resource servers.
type client struct {
	cfg  *config
	http *http.Client
	tr   *http.Transport
	now  func() time.Time
	log  zerolog.Logger

	// tokSem guards tok and serialises token fetches (a channel so that
	// waiting honours ctx).
	tokSem chan struct{}
	tok    *token
}

func newClient(cfg *config, env resolver.Env) *client {
	// Every connection, to the authorization and the resource server,
	// goes through the dial policy.
	tr := env.Dial.Transport()
	tr.MaxIdleConnsPerHost = 16
	c := &client{
		cfg: cfg,
		tr:  tr,
		http: &http.Client{
			Transport: tr,
			// A redirect could leave the base path (or carry the Basic
			// credentials elsewhere): never follow one.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now:    env.Now,
		log:    env.Log,
		tokSem: make(chan struct{}, 1),
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// String never shows the secret or the token.
func (c *client) String() string { return c.cfg.String() }

// GoString never shows the secret or the token.
func (c *client) GoString() string { return c.cfg.String() }

// accessToken returns a cached token, or fetches one. stale is a token the
// resource server just refused: it is not returned again.
func (c *client) accessToken(ctx context.Context, stale string) (string, error) {
	select {
	case c.tokSem <- struct{}{}:
	case <-ctx.Done():
		return "", unavailable(ctx.Err())
	}
	defer func() { <-c.tokSem }()
	if t := c.tok; t != nil && t.value != stale && c.now().Before(t.expires) {
		return t.value, nil
	}
	c.tok = nil
	t, err := c.fetchToken(ctx)
	if err != nil {
		return "", err
	}
	c.tok = t
	return t.value, nil
}

// fetchToken is GET <Authserver>/oauth/token?grant_type=client_credentials
// with HTTP Basic client:secret.
func (c *client) fetchToken(ctx context.Context) (*token, error) {
	var answer struct {
		AccessToken string          `json:"access_token"`
		TokenType   string          `json:"token_type"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
	}
	status, err := c.get(ctx, c.cfg.tokenURL, "the authorization server", func(r *http.Request) {
		r.SetBasicAuth(c.cfg.client, c.cfg.secret)
	}, &answer)
	switch {
	case status == http.StatusBadRequest || status == http.StatusUnauthorized || status == http.StatusForbidden:
		return nil, unavailable(fmt.Errorf("%w (status %d)", errTokenRefused, status))
	case err != nil:
		return nil, unavailable(fmt.Errorf("%w: %w", errToken, err))
	case answer.AccessToken == "" || strings.ContainsAny(answer.AccessToken, "\r\n"):
		return nil, unavailable(fmt.Errorf("%w: no access_token", errToken))
	case answer.TokenType != "" && !strings.EqualFold(answer.TokenType, "bearer"):
		return nil, unavailable(fmt.Errorf("%w: token type is not bearer", errToken))
	}
	life := noExpiry
	if n, ok := seconds(answer.ExpiresIn); ok && n > 0 {
		life = time.Duration(min(n, 365*24*3600)) * time.Second
	}
	exp := c.now().Add(life - min(tokenMargin, life/10))
	c.log.Debug().Time("expires", exp).Msg("scim access token fetched")
	return &token{value: answer.AccessToken, expires: exp}, nil
}

// seconds reads expires_in as a JSON number or a numeric string.
func seconds(raw json.RawMessage) (int64, bool) {
	s := strings.Trim(string(raw), `"`)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f < 0 || f > 1e12 {
			return 0, false
		}
		n = int64(f)
	}
	return n, true
}

// getResource GETs u from the resource server with the bearer token into
// v, fetching a new token once when the server answers 401.
func (c *client) getResource(ctx context.Context, u *url.URL, v any) error {
	stale := ""
	for attempt := 0; ; attempt++ {
		tok, err := c.accessToken(ctx, stale)
		if err != nil {
			return err
		}
		status, err := c.get(ctx, u, "the resource server", func(r *http.Request) {
			r.Header.Set("Authorization", "Bearer "+tok)
		}, v)
		switch {
		case status == http.StatusUnauthorized && attempt == 0:
			stale = tok
			continue
		case status == http.StatusNotFound:
			return errNotFound
		case err != nil:
			return unavailable(err)
		}
		return nil
	}
}

// get makes one GET request and decodes a 2xx JSON answer into v. It
// returns the HTTP status (0 when there was no answer). Errors never
// contain the body or the URL (which may hold a login).
func (c *client) get(ctx context.Context, u *url.URL, what string, auth func(*http.Request), v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("scim: request to %s: %w", what, err)
	}
	req.Header.Set("Accept", "application/scim+json, application/json")
	req.Header.Set("User-Agent", "authsrv")
	auth(req)
	resp, err := c.http.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return 0, fmt.Errorf("scim: %s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 && resp.ContentLength > maxBody {
		// Declared too large: refused without reading it.
		return resp.StatusCode, errTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, errRedirect
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return resp.StatusCode, &statusError{what: what, status: resp.StatusCode}
	case err != nil:
		return resp.StatusCode, fmt.Errorf("scim: reading the answer of %s: %w", what, err)
	case len(body) > maxBody:
		return resp.StatusCode, errTooLarge
	case !isJSON(resp.Header.Get("Content-Type")):
		return resp.StatusCode, errNotJSON
	}
	if err := json.Unmarshal(body, v); err != nil {
		return resp.StatusCode, errBadJSON // the decoder's text may quote the body
	}
	return resp.StatusCode, nil
}

// isJSON accepts application/json, application/scim+json and other
// +json types.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// validID reports whether id may be put into /Users/<id>: not empty, at
// most maxIDLen bytes of valid UTF-8, not a dot segment, and without
// slashes, backslashes or control characters (which some proxies decode
// or normalise even when escaped). Anything else cannot be a user here.
func validID(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > maxIDLen || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' {
			return false
		}
	}
	return true
}

// withPath returns base with escaped and unescaped path suffixes added.
func withPath(base *url.URL, unescaped, escaped string) *url.URL {
	u := *base
	u.User = nil
	u.RawQuery, u.Fragment, u.ForceQuery, u.RawFragment = "", "", false, ""
	u.RawPath = base.EscapedPath() + escaped
	u.Path = base.Path + unescaped
	return &u
}

// usersURL is <Resourceserver>/Users with query q.
func usersURL(base *url.URL, q url.Values) *url.URL {
	u := withPath(base, "/Users", "/Users")
	u.RawQuery = q.Encode()
	return u
}

// userURL is <Resourceserver>/Users/<id>, with id path-escaped. Ids that
// validID refuses give false.
func userURL(base *url.URL, id string) (*url.URL, bool) {
	if !validID(id) {
		return nil, false
	}
	return withPath(base, "/Users/"+id, "/Users/"+url.PathEscape(id)), true
}
