package ldap

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	goldap "github.com/go-ldap/ldap/v3"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/resolver"
)

// TypeName is the type as the API writes it.
const TypeName = "ldapresolver"

// Defaults of the configuration.
const (
	DefaultTimeout      = 5 * time.Second
	DefaultSizeLimit    = 500
	DefaultCacheTimeout = 120 * time.Second
	DefaultSkip         = 30 * time.Second
)

// maxTimeout caps TIMEOUT: a longer wait holds a request for minutes.
const maxTimeout = 10 * time.Minute

// defaultObjectClasses are used for created users when OBJECT_CLASSES is
// empty.
var defaultObjectClasses = []string{"top", "person", "organizationalPerson", "inetOrgPerson"}

// Type returns the ldapresolver type for the resolver registry, with a
// TLS_CA_FILE that may be any regular file outside /proc, /sys and /dev
// (TypeConfined with the zero Confinement).
func Type() resolver.Type { return TypeConfined(fileroot.Confinement{}) }

// TypeConfined returns the ldapresolver type whose TLS_CA_FILE is confined
// by files: a name that breaks a rule is refused when the configuration is
// saved, and the file is opened under the same rules whenever a store is
// built, so that the CA file cannot probe the server's keys or the
// system's files.
func TypeConfined(files fileroot.Confinement) resolver.Type {
	files = files.Copy()
	return resolver.Type{
		Name:   TypeName,
		Params: params(),
		Validate: func(cfg resolver.Config) error {
			c, err := parseConfig(cfg)
			if err != nil {
				return err
			}
			if c.caFile != "" {
				if err := files.Check(c.caFile); err != nil {
					return configError("TLS_CA_FILE is refused: %s", fileroot.Describe(err, c.caFile))
				}
			}
			return nil
		},
		New: resolver.Constructor(func(ctx context.Context, cfg resolver.Config, env resolver.Env) (*Store, error) {
			return newStore(ctx, cfg, env, files)
		}),
		Editable:     editable,
		CacheTimeout: cacheTimeout,
	}
}

func params() []resolver.Param {
	p := func(name string, t resolver.ParamType, desc string) resolver.Param {
		return resolver.Param{Name: name, Type: t, Description: desc}
	}
	s, i, b := resolver.String, resolver.Int, resolver.Bool
	return []resolver.Param{
		p("LDAPURI", s, "One or more server URIs (ldap://host:port, ldaps://host:port or a bare host), comma separated."),
		p("LDAPBASE", s, "The search base."),
		p("AUTHTYPE", s, "Simple (default) or Anonymous."),
		p("BINDDN", s, "The service account; empty binds anonymously."),
		p("BINDPW", resolver.Password, "The service account's password."),
		p("TIMEOUT", i, "Seconds one call may take, including connecting (default 5)."),
		p("CACHE_TIMEOUT", i, "Seconds users stay in the cache (default 120, 0 disables it)."),
		p("SIZELIMIT", i, "The most users a search returns (default 500)."),
		p("LOGINNAMEATTRIBUTE", s, "Login attributes, comma separated; the first gives the login name."),
		p("LDAPSEARCHFILTER", s, "Filter every user matches, e.g. (objectClass=inetOrgPerson)."),
		p("LDAPFILTER", s, "Accepted for compatibility; unused."),
		p("USERINFO", s, `JSON map of user fields to attributes, e.g. {"givenname":"givenName","password":"userPassword"}.`),
		p("UIDTYPE", s, "DN (default) or the attribute that holds the user id (entryUUID, objectGUID, uidNumber)."),
		p("MULTIVALUEATTRIBUTES", s, "JSON list of user fields returned as lists (default none)."),
		p("NOREFERRALS", b, "Accepted; referrals are never followed."),
		p("NOSCHEMAS", b, "Accepted; schemas are never read."),
		p("SCOPE", s, "SUBTREE (default), LEVEL or BASE."),
		p("START_TLS", b, "Use StartTLS on ldap:// servers."),
		p("TLS_VERIFY", b, "Verify the server certificate (default true)."),
		p("TLS_CA_FILE", s, "PEM file with the CA certificates to trust."),
		p("CACERTIFICATE", s, "PEM text with the CA certificates to trust."),
		p("TLS_VERSION", s, "2 = TLS 1.3 only, 3/4/5 = TLS 1.0/1.1/1.2; empty = TLS 1.2 or newer."),
		p("EDITABLE", b, "Allow creating, changing and deleting users."),
		p("OBJECT_CLASSES", s, "Object classes of created users, comma separated."),
		p("DN_TEMPLATE", s, "DN of created users; tags <basedn> <username> <givenname> <surname>."),
		p("SERVERPOOL_STRATEGY", s, "ROUND_ROBIN (default), FIRST or RANDOM."),
		p("SERVERPOOL_ROUNDS", i, "Accepted; the time budget bounds the retries."),
		p("SERVERPOOL_SKIP", i, "Seconds a failed server is tried last (default 30)."),
		p("SERVERPOOL_PERSISTENT", b, "Accepted; connections are always pooled."),
	}
}

// editable reports whether cfg enables writes (EDITABLE, or Editable as
// the resolver list filter reads it).
func editable(cfg resolver.Config) bool {
	return resolver.ParseBool(cfg["EDITABLE"]) || resolver.ParseBool(cfg["Editable"])
}

// cacheTimeout reads CACHE_TIMEOUT; a missing or unreadable value gives
// the default (Validate refuses unreadable ones).
func cacheTimeout(cfg resolver.Config) time.Duration {
	v := strings.TrimSpace(cfg["CACHE_TIMEOUT"])
	if v == "" {
		return DefaultCacheTimeout
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return DefaultCacheTimeout
	}
	return time.Duration(n) * time.Second
}

// Validate checks a configuration without connecting.
func Validate(cfg resolver.Config) error {
	_, err := parseConfig(cfg)
	return err
}

// configError is an ErrConfig-kind error with a specific text that
// errors.Is also finds as resolver.ErrConfig.
func configError(format string, args ...any) error {
	return apierr.New(apierr.Resolver, fmt.Sprintf(format, args...)).Wrap(resolver.ErrConfig)
}

type server struct {
	url    string // normalised, for logs and errors
	scheme string // ldap or ldaps
	addr   string // host:port
	host   string // for TLS ServerName
}

type strategy int

const (
	roundRobin strategy = iota
	first
	random
)

type config struct {
	servers       []server
	base          string
	baseDN        *goldap.DN
	anonymous     bool
	bindDN        string
	bindPW        string
	timeout       time.Duration
	sizeLimit     int
	loginAttrs    []string
	searchFilter  string // a sequence of filter components, never empty
	userInfo      map[string]string
	passwordAttr  string
	uidAttr       string // empty for DN
	multi         map[string]bool
	scope         int
	startTLS      bool
	useTLS        bool // some server speaks TLS (ldaps or StartTLS)
	tlsVerify     bool
	caFile        string
	caPEM         string
	tlsMin        uint16
	tlsMax        uint16
	editable      bool
	objectClasses []string
	dnTemplate    string
	strategy      strategy
	skip          time.Duration
}

var (
	attrRE   = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*|[0-9]+(\.[0-9]+)+)(;[A-Za-z0-9-]+)*$`)
	ocRE     = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*|[0-9]+(\.[0-9]+)+)$`)
	tagsRepl = strings.NewReplacer("<basedn>", "dc=x", "<username>", "x", "<givenname>", "x", "<surname>", "x")
)

func parseConfig(cfg resolver.Config) (*config, error) {
	get := func(k string) string { return strings.TrimSpace(cfg[k]) }
	c := &config{multi: map[string]bool{}}

	for part := range strings.SplitSeq(get("LDAPURI"), ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		srv, err := parseURI(part)
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, srv)
	}
	if len(c.servers) == 0 {
		return nil, configError("LDAPURI is missing.")
	}

	c.base = get("LDAPBASE")
	if c.base == "" {
		return nil, configError("LDAPBASE is missing.")
	}
	dn, err := goldap.ParseDN(c.base)
	if err != nil {
		return nil, configError("LDAPBASE is not a valid DN.")
	}
	c.baseDN = dn

	switch at := strings.ToLower(get("AUTHTYPE")); at {
	case "", "simple":
	case "anonymous":
		c.anonymous = true
	case "sasl digest-md5", "ntlm", "sasl kerberos":
		return nil, configError("AUTHTYPE %q is not supported.", get("AUTHTYPE"))
	default:
		return nil, configError("AUTHTYPE %q is unknown (use Simple or Anonymous).", get("AUTHTYPE"))
	}
	c.bindDN, c.bindPW = get("BINDDN"), cfg["BINDPW"]
	if c.bindDN == "" {
		c.anonymous = true
	}
	if !c.anonymous && c.bindPW == "" {
		// An empty password makes a simple bind unauthenticated, which
		// some directories treat as an anonymous success.
		return nil, configError("BINDPW is missing for BINDDN.")
	}

	c.timeout = DefaultTimeout
	if v := get("TIMEOUT"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f <= 0 || f > maxTimeout.Seconds() {
			return nil, configError("TIMEOUT must be a number of seconds between 0 and %d.", int(maxTimeout.Seconds()))
		}
		c.timeout = time.Duration(f * float64(time.Second))
	}
	if v := get("CACHE_TIMEOUT"); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return nil, configError("CACHE_TIMEOUT must be a number of seconds (0 disables the cache).")
		}
	}
	c.sizeLimit = DefaultSizeLimit
	if v := get("SIZELIMIT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, configError("SIZELIMIT must be a positive number.")
		}
		c.sizeLimit = n
	}

	info := map[string]string{}
	if v := get("USERINFO"); v != "" {
		if err := json.Unmarshal([]byte(v), &info); err != nil {
			return nil, configError("USERINFO is not a JSON object of strings.")
		}
	}
	for k, a := range info {
		if k == "" || !attrRE.MatchString(a) {
			return nil, configError("USERINFO maps %q to %q, which is not an attribute name.", k, a)
		}
	}

	for a := range strings.SplitSeq(get("LOGINNAMEATTRIBUTE"), ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if !attrRE.MatchString(a) {
			return nil, configError("LOGINNAMEATTRIBUTE %q is not an attribute name.", a)
		}
		c.loginAttrs = append(c.loginAttrs, a)
	}
	if len(c.loginAttrs) == 0 {
		if a := info[resolver.KeyUsername]; a != "" {
			c.loginAttrs = []string{a}
		} else {
			return nil, configError("LOGINNAMEATTRIBUTE is missing.")
		}
	}
	c.passwordAttr = info[resolver.KeyPassword]
	delete(info, resolver.KeyPassword)
	delete(info, resolver.KeyUserID) // the user id comes from UIDTYPE
	info[resolver.KeyUsername] = c.loginAttrs[0]
	c.userInfo = info

	sf := get("LDAPSEARCHFILTER")
	if sf == "" {
		sf = "(objectClass=*)"
	} else if !strings.HasPrefix(sf, "(") {
		sf = "(" + sf + ")"
	}
	if _, err := goldap.CompileFilter("(&" + sf + ")"); err != nil {
		return nil, configError("LDAPSEARCHFILTER is not a valid filter.")
	}
	c.searchFilter = sf

	switch ut := get("UIDTYPE"); {
	case ut == "" || strings.EqualFold(ut, "DN"):
	case attrRE.MatchString(ut):
		c.uidAttr = ut
	default:
		return nil, configError("UIDTYPE %q is neither DN nor an attribute name.", ut)
	}

	if v := get("MULTIVALUEATTRIBUTES"); v != "" {
		var keys []string
		if strings.HasPrefix(v, "[") {
			if err := json.Unmarshal([]byte(v), &keys); err != nil {
				return nil, configError("MULTIVALUEATTRIBUTES is not a JSON list of strings.")
			}
		} else {
			keys = strings.Split(v, ",")
		}
		for _, k := range keys {
			if k = strings.TrimSpace(k); k != "" && k != resolver.KeyUsername {
				c.multi[k] = true
			}
		}
	}

	switch sc := strings.ToUpper(get("SCOPE")); sc {
	case "", "SUBTREE", "SUB":
		c.scope = goldap.ScopeWholeSubtree
	case "LEVEL", "ONE", "ONELEVEL":
		c.scope = goldap.ScopeSingleLevel
	case "BASE":
		c.scope = goldap.ScopeBaseObject
	default:
		return nil, configError("SCOPE must be SUBTREE, LEVEL or BASE.")
	}

	c.startTLS = resolver.ParseBool(get("START_TLS"))
	for _, s := range c.servers {
		if s.scheme == "ldaps" || c.startTLS {
			c.useTLS = true
		}
	}
	switch v := get("TLS_VERIFY"); {
	case v == "" || resolver.ParseBool(v):
		c.tlsVerify = true
	case isFalse(v):
		c.tlsVerify = false
	default:
		return nil, configError("TLS_VERIFY must be True or False.")
	}
	c.caFile = get("TLS_CA_FILE")
	c.caPEM = get("CACERTIFICATE")
	if c.caPEM != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(c.caPEM)) {
		return nil, configError("CACERTIFICATE holds no PEM certificate.")
	}
	switch get("TLS_VERSION") {
	case "":
		c.tlsMin = tls.VersionTLS12
	case "2":
		c.tlsMin = tls.VersionTLS13
	case "3":
		c.tlsMin, c.tlsMax = tls.VersionTLS10, tls.VersionTLS10
	case "4":
		c.tlsMin, c.tlsMax = tls.VersionTLS11, tls.VersionTLS11
	case "5":
		c.tlsMin, c.tlsMax = tls.VersionTLS12, tls.VersionTLS12
	default:
		return nil, configError("TLS_VERSION must be 2 (TLS 1.3), 3, 4 or 5 (TLS 1.0, 1.1, 1.2).")
	}

	c.editable = editable(cfg)
	c.objectClasses = defaultObjectClasses
	if v := get("OBJECT_CLASSES"); v != "" {
		c.objectClasses = nil
		for oc := range strings.SplitSeq(v, ",") {
			if oc = strings.TrimSpace(oc); oc == "" {
				continue
			}
			if !ocRE.MatchString(oc) {
				return nil, configError("OBJECT_CLASSES %q is not an object class name.", oc)
			}
			c.objectClasses = append(c.objectClasses, oc)
		}
	}
	c.dnTemplate = get("DN_TEMPLATE")
	if c.dnTemplate != "" {
		if _, err := goldap.ParseDN(tagsRepl.Replace(c.dnTemplate)); err != nil {
			return nil, configError("DN_TEMPLATE does not give a valid DN.")
		}
	}

	switch st := strings.ToUpper(get("SERVERPOOL_STRATEGY")); st {
	case "", "ROUND_ROBIN":
		c.strategy = roundRobin
	case "FIRST":
		c.strategy = first
	case "RANDOM":
		c.strategy = random
	default:
		return nil, configError("SERVERPOOL_STRATEGY must be ROUND_ROBIN, FIRST or RANDOM.")
	}
	c.skip = DefaultSkip
	if v := get("SERVERPOOL_SKIP"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, configError("SERVERPOOL_SKIP must be a number of seconds.")
		}
		c.skip = time.Duration(n) * time.Second
	}
	if v := get("SERVERPOOL_ROUNDS"); v != "" {
		if _, err := strconv.Atoi(v); err != nil {
			return nil, configError("SERVERPOOL_ROUNDS must be a number.")
		}
	}
	return c, nil
}

// String describes the configuration without the bind password.
func (c *config) String() string {
	urls := make([]string, len(c.servers))
	for i, s := range c.servers {
		urls[i] = s.url
	}
	return TypeName + "(" + strings.Join(urls, ",") + " base=" + c.base + ")"
}

// GoString keeps %#v from printing the bind password.
func (c *config) GoString() string { return c.String() }

func isFalse(v string) bool {
	return slices.Contains([]string{"0", "false", "False", "FALSE", "no", "No", "off", "Off"}, v)
}

// parseURI reads one LDAPURI entry: ldap://h[:port], ldaps://h[:port] or a
// bare host[:port].
func parseURI(s string) (server, error) {
	if !strings.Contains(s, "://") {
		s = "ldap://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return server{}, configError("LDAPURI %q is not a valid URI.", s)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "ldap" && scheme != "ldaps" {
		return server{}, configError("LDAPURI %q: the scheme must be ldap or ldaps.", s)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return server{}, configError("LDAPURI %q: only scheme, host and port are allowed.", s)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return server{}, configError("LDAPURI %q has no host.", s)
	}
	if port == "" {
		port = "389"
		if scheme == "ldaps" {
			port = "636"
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return server{}, configError("LDAPURI %q: bad port.", s)
	}
	addr := net.JoinHostPort(host, port)
	return server{url: scheme + "://" + addr, scheme: scheme, addr: addr, host: host}, nil
}

// maxCAFile caps the TLS_CA_FILE read (a system bundle is a few hundred
// KiB).
const maxCAFile = 4 << 20

// tlsConfig builds the client TLS configuration (nil when no server uses
// TLS). The CA file is read here, at New, not at Validate, under files.
func (c *config) tlsConfig(files fileroot.Confinement) (*tls.Config, error) {
	if !c.useTLS {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: c.tlsMin, MaxVersion: c.tlsMax}
	if !c.tlsVerify {
		tc.InsecureSkipVerify = true // TLS_VERIFY=False, set explicitly by the admin
		return tc, nil
	}
	if c.caFile != "" || c.caPEM != "" {
		pool := x509.NewCertPool()
		if c.caFile != "" {
			b, err := files.ReadFile(c.caFile, maxCAFile)
			if err != nil {
				return nil, configError("TLS_CA_FILE cannot be read: %s", fileroot.Describe(err, c.caFile))
			}
			if !pool.AppendCertsFromPEM(b) {
				return nil, configError("TLS_CA_FILE holds no PEM certificate.")
			}
		}
		if c.caPEM != "" {
			pool.AppendCertsFromPEM([]byte(c.caPEM))
		}
		tc.RootCAs = pool
	}
	return tc, nil
}
