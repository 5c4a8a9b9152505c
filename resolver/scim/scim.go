// Package scim is the SCIM user store ("scimresolver"): users are read
// from a SCIM 2.0 resource server with an OAuth client-credentials token
// from an authorization server. The store is read-only and cannot check
// passwords.
//
// As in privacyIDEA, the login name is the SCIM resource id: UserID asks
// for /Users/<login> and the uid is that id (admin-config 3.4). Ids go
// into URLs path-escaped, search values into filters JSON-escaped, and no
// request leaves the configured base path (reliability A9, B5). Every call
// is bounded by TIMEOUT and a response size cap; a server that is down,
// slow or answers with anything but 2xx JSON gives an error wrapping
// resolver.ErrUnavailable that never contains the remote body.
//
// Every connection, to either server and at every hop, goes through the
// dial policy of resolver.Env (Env.Dial); redirects are never followed.
//
// Package scim imports resolver, apierr and netguard and makes outgoing
// HTTP requests only; it never serves HTTP.
package scim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/resolver"
)

// TypeName is the type as the API writes it.
const TypeName = "scimresolver"

// The parameters, spelled as privacyIDEA's resolver reads them.
const (
	ParamAuthserver     = "Authserver"
	ParamResourceserver = "Resourceserver"
	ParamClient         = "Client"
	// ParamSecret is sealed at rest and censored on read (our divergence
	// 20: privacyIDEA shows it in clear).
	ParamSecret  = "Secret"
	ParamMapping = "Mapping"
	ParamTimeout = "TIMEOUT"
)

// DefaultTimeout bounds every call (token fetch and user requests
// together) when TIMEOUT is not set.
const DefaultTimeout = 10 * time.Second

const maxTimeout = 300 // seconds

// defaultMapping maps Info keys to SCIM core attribute paths (RFC 7643
// section 4.1). Multi-valued attributes give their first value; mobile is
// not mapped and always "" (admin-config 3.4).
var defaultMapping = map[string]string{
	resolver.KeyUsername:  "userName",
	resolver.KeyGivenname: "name.givenName",
	resolver.KeySurname:   "name.familyName",
	resolver.KeyEmail:     "emails.value",
	resolver.KeyPhone:     "phoneNumbers.value",
}

// Type returns the SCIM store type.
func Type() resolver.Type {
	return resolver.Type{
		Name: TypeName,
		Params: []resolver.Param{
			{Name: ParamAuthserver, Type: resolver.String, Description: "Base URL of the OAuth authorization server; the token is fetched from <Authserver>/oauth/token."},
			{Name: ParamResourceserver, Type: resolver.String, Description: "Base URL of the SCIM resource server (the one that serves /Users)."},
			{Name: ParamClient, Type: resolver.String, Description: "OAuth client id."},
			{Name: ParamSecret, Type: resolver.Password, Description: "OAuth client secret."},
			{Name: ParamMapping, Type: resolver.String, Description: `Optional JSON object from user attribute to SCIM attribute path, merged over the defaults, e.g. {"mobile":"urn:example:User:mobile"}; "" removes a mapping.`},
			{Name: ParamTimeout, Type: resolver.Int, Description: "Seconds a call may take in all (default 10)."},
		},
		Validate: func(cfg resolver.Config) error {
			_, err := parseConfig(cfg)
			return err
		},
		New: func(_ context.Context, cfg resolver.Config, env resolver.Env) (resolver.Resolver, error) {
			c, err := parseConfig(cfg)
			if err != nil {
				return nil, err
			}
			return newStore(c, env), nil
		},
		Editable:     func(resolver.Config) bool { return false },
		CacheTimeout: func(resolver.Config) time.Duration { return 0 },
	}
}

// config is a parsed, valid configuration.
type config struct {
	tokenURL *url.URL // <Authserver>/oauth/token?grant_type=client_credentials
	base     *url.URL // the resource server, without a trailing slash
	client   string
	secret   string
	mapping  map[string]attrPath // Info key -> SCIM attribute
	timeout  time.Duration
}

// String never shows the secret.
func (c *config) String() string {
	return fmt.Sprintf("scim(%s, client %q)", c.base.Redacted(), c.client)
}

// configErr is a resolver error with a specific text that still matches
// resolver.ErrConfig with errors.Is.
func configErr(format string, args ...any) error {
	return apierr.New(apierr.Resolver, fmt.Sprintf(format, args...)).Wrap(resolver.ErrConfig)
}

func parseConfig(cfg resolver.Config) (*config, error) {
	c := &config{client: cfg[ParamClient], secret: cfg[ParamSecret], timeout: DefaultTimeout}
	for _, p := range []string{ParamAuthserver, ParamResourceserver, ParamClient, ParamSecret} {
		if cfg[p] == "" {
			return nil, configErr("Missing parameter: %s", p)
		}
	}
	if cfg[ParamSecret] == resolver.Censored {
		return nil, configErr("The parameter %s is the censored placeholder, not a secret.", ParamSecret)
	}
	auth, err := parseBase(ParamAuthserver, cfg[ParamAuthserver])
	if err != nil {
		return nil, err
	}
	c.tokenURL = auth.JoinPath("oauth", "token")
	c.tokenURL.RawQuery = url.Values{"grant_type": {"client_credentials"}}.Encode()
	if c.base, err = parseBase(ParamResourceserver, cfg[ParamResourceserver]); err != nil {
		return nil, err
	}
	if v := cfg[ParamTimeout]; v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > maxTimeout {
			return nil, configErr("%s must be a number of seconds from 1 to %d.", ParamTimeout, maxTimeout)
		}
		c.timeout = time.Duration(n) * time.Second
	}
	if c.mapping, err = parseMapping(cfg[ParamMapping]); err != nil {
		return nil, err
	}
	return c, nil
}

// parseBase accepts an absolute http(s) URL with a host and a clean path,
// without user info, query or fragment. The trailing slash is dropped.
func parseBase(name, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, configErr("%s must be an http or https URL.", name)
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(raw, "?#") {
		return nil, configErr("%s must not contain user info, a query or a fragment.", name)
	}
	p := strings.TrimRight(u.Path, "/")
	if p != "" && path.Clean(p) != p {
		return nil, configErr("%s must not contain . or .. path segments.", name)
	}
	u.Path = p
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	if u.RawPath != "" && u.EscapedPath() != u.RawPath {
		u.RawPath = ""
	}
	return u, nil
}

// attrPath is a SCIM attribute path: an optional schema URN, then names
// separated by dots ("name.givenName", "emails.value",
// "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber").
type attrPath struct {
	text  string   // as written; used in filters
	steps []string // JSON keys to follow
}

var (
	attrNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_$-]*(\.[A-Za-z][A-Za-z0-9_$-]*)*$`)
	urnRE      = regexp.MustCompile(`^urn:[A-Za-z0-9._:-]+$`)
	infoKeyRE  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)
)

func parseAttrPath(s string) (attrPath, bool) {
	if len(s) > 256 {
		return attrPath{}, false
	}
	var steps []string
	rest := s
	if strings.HasPrefix(s, "urn:") {
		i := strings.LastIndexByte(s, ':')
		if !urnRE.MatchString(s[:i]) {
			return attrPath{}, false
		}
		steps = append(steps, s[:i])
		rest = s[i+1:]
	}
	if !attrNameRE.MatchString(rest) {
		return attrPath{}, false
	}
	return attrPath{text: s, steps: append(steps, strings.Split(rest, ".")...)}, true
}

// parseMapping merges the optional JSON object over defaultMapping.
func parseMapping(raw string) (map[string]attrPath, error) {
	merged := map[string]string{}
	for k, v := range defaultMapping {
		merged[k] = v
	}
	if strings.TrimSpace(raw) != "" {
		var m map[string]string
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return nil, configErr("%s must be a JSON object of strings.", ParamMapping)
		}
		for k, v := range m {
			if !infoKeyRE.MatchString(k) || k == resolver.KeyUserID || k == resolver.KeyPassword {
				return nil, configErr("%s: %q cannot be mapped.", ParamMapping, k)
			}
			merged[k] = v
		}
	}
	out := map[string]attrPath{}
	for k, v := range merged {
		if v == "" {
			continue
		}
		p, ok := parseAttrPath(v)
		if !ok {
			return nil, configErr("%s: %q is not a SCIM attribute path.", ParamMapping, v)
		}
		out[k] = p
	}
	if _, ok := out[resolver.KeyUsername]; !ok {
		return nil, configErr("%s: username must stay mapped.", ParamMapping)
	}
	return out, nil
}

// fields lists the mapped Info keys, sorted.
func (c *config) fields() []string {
	out := make([]string, 0, len(c.mapping))
	for k := range c.mapping {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
