package ldap

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	goldap "github.com/go-ldap/ldap/v3"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver"
)

// Store is one configured LDAP user store. It is safe for concurrent use
// and connects lazily.
type Store struct {
	cfg      *config
	pool     *pool
	now      func() time.Time
	attrs    []string // attributes every user read requests
	uidAttrs []string // the uid attribute, or 1.1 (no attributes) for DN
}

var (
	_ resolver.Resolver = (*Store)(nil)
	_ resolver.Editor   = (*Store)(nil)
	_ resolver.Tester   = (*Store)(nil)
	_ resolver.Pinger   = (*Store)(nil)
	_ resolver.Fielder  = (*Store)(nil)
	_ resolver.Pager    = (*Store)(nil)
)

// errAmbiguous: a login or uid matches several entries; answering with
// one of them would pick a user at random.
var errAmbiguous = apierr.New(apierr.Resolver, "The user name matches several users in the LDAP directory.")

// New builds a store from cfg. It does not connect; TLS_CA_FILE is read
// here.
func New(ctx context.Context, cfg resolver.Config, env resolver.Env) (*Store, error) {
	return newStore(ctx, cfg, env, fileroot.Confinement{})
}

// newStore is New with TLS_CA_FILE read under files (TypeConfined).
func newStore(ctx context.Context, cfg resolver.Config, env resolver.Env, files fileroot.Confinement) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := parseConfig(cfg)
	if err != nil {
		return nil, err
	}
	tc, err := c.tlsConfig(files)
	if err != nil {
		return nil, err
	}
	if c.useTLS && !c.tlsVerify {
		env.Log.Warn().Msg("LDAP TLS certificate verification is disabled (TLS_VERIFY=False)")
	}
	now := env.Now
	if now == nil {
		now = time.Now
	}
	s := &Store{cfg: c, pool: newPool(c, tc, env.Log, env.Dial), now: now}
	seen := map[string]bool{}
	add := func(a string) {
		if a != "" && !seen[strings.ToLower(a)] {
			seen[strings.ToLower(a)] = true
			s.attrs = append(s.attrs, a)
		}
	}
	for _, a := range c.loginAttrs {
		add(a)
	}
	for _, k := range slices.Sorted(maps.Keys(c.userInfo)) {
		add(c.userInfo[k])
	}
	add(c.uidAttr)
	s.uidAttrs = []string{"1.1"}
	if c.uidAttr != "" {
		s.uidAttrs = []string{c.uidAttr}
	}
	return s, nil
}

// String names the store by its servers; it never shows the bind
// password.
func (s *Store) String() string { return s.cfg.String() }

// Close closes the pooled connections. It is idempotent.
func (s *Store) Close() error {
	s.pool.close()
	return nil
}

// deadline is the end of a call's time budget: TIMEOUT from now, or ctx's
// deadline if that is earlier.
func (s *Store) deadline(ctx context.Context) time.Time {
	d := time.Now().Add(s.cfg.timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

// fail wraps a failure to get an answer: ErrUnavailable for the client,
// the cause (and ctx's error) for the log.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	cerr := ctx.Err()
	if d, ok := ctx.Deadline(); ok && cerr == nil && !time.Now().Before(d) {
		// The socket deadline fired with ctx's, before ctx noticed.
		cerr = context.DeadlineExceeded
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("ldap %s: %w: %w (%w)", op, resolver.ErrUnavailable, err, cerr)
	}
	return fmt.Errorf("ldap %s: %w: %w", op, resolver.ErrUnavailable, err)
}

// search runs one search on a service connection. Hitting the size limit
// is not an error: the entries up to the limit come back.
func (s *Store) search(ctx context.Context, deadline time.Time, base string, scope int, filter string, attrs []string, limit int) ([]*goldap.Entry, error) {
	req := &goldap.SearchRequest{
		BaseDN:       base,
		Scope:        scope,
		DerefAliases: goldap.NeverDerefAliases,
		SizeLimit:    limit,
		TimeLimit:    int(math.Ceil(s.cfg.timeout.Seconds())),
		Filter:       filter,
		Attributes:   attrs,
	}
	var entries []*goldap.Entry
	err := s.pool.do(ctx, deadline, func(l *goldap.Conn) error {
		res, err := l.Search(req)
		if resultCode(err) == goldap.LDAPResultSizeLimitExceeded {
			err = nil
		}
		if err == nil {
			entries = res.Entries
		}
		return err
	})
	if len(entries) > limit {
		entries = entries[:limit]
	}
	return entries, err
}

// inScope reports whether dn is a DN that LDAPBASE and SCOPE cover.
func (s *Store) inScope(dn *goldap.DN) bool {
	base := s.cfg.baseDN
	switch s.cfg.scope {
	case goldap.ScopeBaseObject:
		return base.EqualFold(dn)
	case goldap.ScopeSingleLevel:
		return len(dn.RDNs) == len(base.RDNs)+1 && base.AncestorOfFold(dn)
	}
	return base.EqualFold(dn) || base.AncestorOfFold(dn)
}

func (s *Store) inScopeText(dn string) bool {
	d, err := goldap.ParseDN(dn)
	return err == nil && s.inScope(d)
}

// uidOf is the user id of an entry: its DN, or the UIDTYPE attribute
// (objectGUID rendered as GUID text). Empty when the entry has none.
func (s *Store) uidOf(e *goldap.Entry) string {
	switch {
	case s.cfg.uidAttr == "":
		return e.DN
	case strings.EqualFold(s.cfg.uidAttr, "objectGUID"):
		raw := e.GetEqualFoldRawAttributeValue(s.cfg.uidAttr)
		if len(raw) == 0 {
			return ""
		}
		return guidString(raw)
	}
	return e.GetEqualFoldAttributeValue(s.cfg.uidAttr)
}

// info maps an entry to user info; false when it lacks a login or a uid.
func (s *Store) info(e *goldap.Entry) (resolver.Info, bool) {
	login := e.GetEqualFoldAttributeValue(s.cfg.loginAttrs[0])
	uid := s.uidOf(e)
	if login == "" || uid == "" {
		return nil, false
	}
	info := resolver.Info{resolver.KeyUsername: login, resolver.KeyUserID: uid}
	for k, a := range s.cfg.userInfo {
		if k == resolver.KeyUsername {
			continue
		}
		vals := e.GetEqualFoldAttributeValues(a)
		switch {
		case len(vals) == 0:
		case s.cfg.multi[k]:
			info[k] = slices.Clone(vals)
		default:
			info[k] = vals[0]
		}
	}
	return info, true
}

// loginMatches reports whether one of e's login attribute values matches
// pattern (* a wildcard when wild), ignoring case only.
func (s *Store) loginMatches(e *goldap.Entry, pattern string, wild bool) bool {
	for _, a := range s.cfg.loginAttrs {
		for _, v := range e.GetEqualFoldAttributeValues(a) {
			if (wild && globMatch(pattern, v)) || (!wild && strings.EqualFold(pattern, v)) {
				return true
			}
		}
	}
	return false
}

// UserID returns the uid of a login name.
func (s *Store) UserID(ctx context.Context, login string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", s.fail(ctx, "login lookup", err)
	}
	if login == "" || !utf8.ValidString(login) {
		return "", resolver.ErrNoUser
	}
	filter := andFilter(s.cfg.searchFilter, equalityFilter(s.cfg.loginAttrs, login))
	entries, err := s.search(ctx, s.deadline(ctx), s.cfg.base, s.cfg.scope, filter, s.attrs, 10)
	if err != nil {
		return "", s.fail(ctx, "login lookup", err)
	}
	var uid string
	for _, e := range entries {
		if !s.loginMatches(e, login, false) {
			continue // matched only through the directory's space folding
		}
		u := s.uidOf(e)
		if u == "" {
			continue
		}
		if uid != "" && u != uid {
			return "", errAmbiguous
		}
		uid = u
	}
	if uid == "" {
		return "", resolver.ErrNoUser
	}
	return uid, nil
}

// find returns the entry of uid, or ErrNoUser; with all, it has every
// mapped attribute, else only the DN and the uid.
func (s *Store) find(ctx context.Context, deadline time.Time, uid string, all bool) (*goldap.Entry, error) {
	if uid == "" || !utf8.ValidString(uid) {
		return nil, resolver.ErrNoUser
	}
	attrs := s.attrs
	if !all {
		attrs = s.uidAttrs
	}
	if s.cfg.uidAttr == "" {
		if !s.inScopeText(uid) {
			return nil, resolver.ErrNoUser
		}
		entries, err := s.search(ctx, deadline, uid, goldap.ScopeBaseObject, andFilter(s.cfg.searchFilter), attrs, 1)
		switch {
		case goldap.IsErrorAnyOf(err, goldap.LDAPResultNoSuchObject, goldap.LDAPResultInvalidDNSyntax):
			return nil, resolver.ErrNoUser
		case err != nil:
			return nil, s.fail(ctx, "user lookup", err)
		case len(entries) == 0 || !s.inScopeText(entries[0].DN):
			return nil, resolver.ErrNoUser
		}
		return entries[0], nil
	}
	var assertion string
	if strings.EqualFold(s.cfg.uidAttr, "objectGUID") {
		b, ok := guidBytes(uid)
		if !ok {
			return nil, resolver.ErrNoUser
		}
		assertion = "(" + s.cfg.uidAttr + "=" + escapeBytes(b) + ")"
	} else {
		assertion = equalityFilter([]string{s.cfg.uidAttr}, uid)
	}
	entries, err := s.search(ctx, deadline, s.cfg.base, s.cfg.scope, andFilter(s.cfg.searchFilter, assertion), attrs, 10)
	switch {
	case goldap.IsErrorAnyOf(err, goldap.LDAPResultInvalidAttributeSyntax, goldap.LDAPResultInappropriateMatching, goldap.LDAPResultUndefinedAttributeType):
		return nil, resolver.ErrNoUser
	case err != nil:
		return nil, s.fail(ctx, "user lookup", err)
	}
	var found *goldap.Entry
	for _, e := range entries {
		if !strings.EqualFold(s.uidOf(e), uid) {
			continue
		}
		if found != nil && found.DN != e.DN {
			return nil, errAmbiguous
		}
		found = e
	}
	if found == nil {
		return nil, resolver.ErrNoUser
	}
	return found, nil
}

// User returns the info of uid; its userid is uid as given.
func (s *Store) User(ctx context.Context, uid string) (resolver.Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, s.fail(ctx, "user lookup", err)
	}
	e, err := s.find(ctx, s.deadline(ctx), uid, true)
	if err != nil {
		return nil, err
	}
	info, ok := s.info(e)
	if !ok {
		return nil, resolver.ErrNoUser
	}
	info[resolver.KeyUserID] = uid
	return info, nil
}

// adFiletime is t as an Active Directory timestamp (100 ns since 1601).
func adFiletime(t time.Time) int64 {
	return (t.Unix()+11644473600)*10_000_000 + int64(t.Nanosecond()/100)
}

// Search lists the users matching every entry of filter. Keys are USERINFO
// keys; values use * as wildcard; empty or *-only values put no
// condition. accountExpires=1 lists expired accounts, any other value
// the unexpired ones.
func (s *Store) Search(ctx context.Context, filter map[string]string) ([]resolver.Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, s.fail(ctx, "search", err)
	}
	f, logins, none, err := s.searchFilter(filter)
	if err != nil || none {
		return nil, err
	}
	entries, err := s.search(ctx, s.deadline(ctx), s.cfg.base, s.cfg.scope, f, s.attrs, s.cfg.sizeLimit)
	if err != nil {
		return nil, s.fail(ctx, "search", err)
	}
	out := make([]resolver.Info, 0, len(entries))
	for _, e := range entries {
		if info, ok := s.listed(e, logins); ok {
			out = append(out, info)
		}
	}
	return out, nil
}

// listed is the info of a search result entry, unless a login condition
// the directory matched loosely does not hold for it.
func (s *Store) listed(e *goldap.Entry, logins []string) (resolver.Info, bool) {
	for _, l := range logins {
		if !s.loginMatches(e, l, true) {
			return nil, false
		}
	}
	return s.info(e)
}

// searchFilter is the LDAP filter of a user search and the username
// patterns to check on the results; none reports a search nothing can
// match.
func (s *Store) searchFilter(filter map[string]string) (f string, logins []string, none bool, err error) {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(filter)) {
		v := filter[k]
		attr, ok := s.cfg.userInfo[k]
		if !ok {
			return "", nil, false, fmt.Errorf("search key %q: %w", k, resolver.ErrSearchKey)
		}
		if !utf8.ValidString(v) {
			return "", nil, true, nil // no login or attribute value is invalid UTF-8
		}
		if k == "accountExpires" {
			now := adFiletime(s.now())
			if v == "1" {
				parts = append(parts, fmt.Sprintf("(&(%s<=%d)(!(%s=0)))", attr, now, attr))
			} else {
				parts = append(parts, fmt.Sprintf("(|(%s>=%d)(%s=0))", attr, now, attr))
			}
			continue
		}
		attrs := []string{attr}
		if k == resolver.KeyUsername {
			attrs = s.cfg.loginAttrs
		}
		f, ok := searchFilter(attrs, v)
		if !ok {
			continue
		}
		parts = append(parts, f)
		if k == resolver.KeyUsername {
			logins = append(logins, v)
		}
	}
	return andFilter(s.cfg.searchFilter, parts...), logins, false, nil
}

// SearchPage lists one page of Search's users with the simple paged
// results control (RFC 2696) on one connection: the directory sends pages
// in its order and the entries before offset are read and dropped, so a
// deep page costs the pages before it. SIZELIMIT does not cut the walk
// (the page size bounds it; the directory's own limits still apply). The
// search is abandoned once the page and one more user are in.
func (s *Store) SearchPage(ctx context.Context, filter map[string]string, offset, limit int) (resolver.Page, error) {
	if err := ctx.Err(); err != nil {
		return resolver.Page{}, s.fail(ctx, "search", err)
	}
	f, logins, none, err := s.searchFilter(filter)
	if err != nil {
		return resolver.Page{}, err
	}
	if none {
		return resolver.Page{Total: 0}, nil
	}
	batch := uint32(min(max(limit+1, 100), 1000))
	var page resolver.Page
	err = s.pool.do(ctx, s.deadline(ctx), func(l *goldap.Conn) error {
		page = resolver.Page{Total: -1}
		paging := goldap.NewControlPaging(batch)
		req := &goldap.SearchRequest{
			BaseDN:       s.cfg.base,
			Scope:        s.cfg.scope,
			DerefAliases: goldap.NeverDerefAliases,
			TimeLimit:    int(math.Ceil(s.cfg.timeout.Seconds())),
			Filter:       f,
			Attributes:   s.attrs,
			Controls:     []goldap.Control{paging},
		}
		matched := 0
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			res, err := l.Search(req)
			if err != nil {
				return err
			}
			for _, e := range res.Entries {
				info, ok := s.listed(e, logins)
				if !ok {
					continue
				}
				matched++
				switch {
				case matched <= offset:
				case matched <= offset+limit:
					page.Users = append(page.Users, info)
				default:
					page.More = true
				}
			}
			var cookie []byte
			if c, ok := goldap.FindControl(res.Controls, goldap.ControlTypePaging).(*goldap.ControlPaging); ok {
				cookie = c.Cookie
			}
			if len(cookie) == 0 {
				if !page.More {
					page.Total = matched
				}
				return nil
			}
			if page.More {
				// Abandon the paged search: a page size of 0 with its
				// cookie frees the directory's cursor.
				paging.PagingSize = 0
				paging.SetCookie(cookie)
				_, _ = l.Search(req)
				return nil
			}
			paging.SetCookie(cookie)
		}
	})
	if err != nil {
		return resolver.Page{}, s.fail(ctx, "search", err)
	}
	return page, nil
}

// CheckPassword binds as uid's DN with password on a connection of its
// own. An empty password is false without asking the directory.
func (s *Store) CheckPassword(ctx context.Context, uid, password string) (bool, error) {
	if password == "" {
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, s.fail(ctx, "password check", err)
	}
	deadline := s.deadline(ctx)
	e, err := s.find(ctx, deadline, uid, false)
	if errors.Is(err, resolver.ErrNoUser) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ok, err := s.pool.bindAs(ctx, deadline, e.DN, password)
	if err != nil {
		return false, s.fail(ctx, "password check", err)
	}
	return ok, nil
}

// Fields returns the USERINFO keys (with username; without password).
func (s *Store) Fields() []string {
	return slices.Sorted(maps.Keys(s.cfg.userInfo))
}

// Ping binds and reads the root DSE (or, when that is not readable, the
// search base) within ctx and TIMEOUT.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "ping", err)
	}
	read := func(base string) *goldap.SearchRequest {
		return &goldap.SearchRequest{BaseDN: base, Scope: goldap.ScopeBaseObject, SizeLimit: 1,
			TimeLimit: int(math.Ceil(s.cfg.timeout.Seconds())), Filter: "(objectClass=*)", Attributes: []string{"1.1"}}
	}
	err := s.pool.do(ctx, s.deadline(ctx), func(l *goldap.Conn) error {
		_, err := l.Search(read(""))
		if err != nil && !connBroken(err) {
			_, err = l.Search(read(s.cfg.base))
		}
		return err
	})
	if err != nil {
		return s.fail(ctx, "ping", err)
	}
	return nil
}

// Test tries the configuration: it counts the users the search filter
// finds (up to SIZELIMIT). The description holds no secrets.
func (s *Store) Test(ctx context.Context) (any, string) {
	start := time.Now()
	entries, err := s.search(ctx, s.deadline(ctx), s.cfg.base, s.cfg.scope, andFilter(s.cfg.searchFilter), s.uidAttrs, s.cfg.sizeLimit)
	if err != nil {
		if r, ok := netguard.Refusal(err); ok {
			return false, "LDAP connection failed: " + r.Error()
		}
		msg := err.Error()
		if len(msg) > 300 {
			msg = strings.ToValidUTF8(msg[:300], "") + "…"
		}
		return false, "LDAP connection or search failed: " + strings.ReplaceAll(msg, "\n", "; ")
	}
	secs := time.Since(start).Seconds()
	withUID := 0
	for _, e := range entries {
		if s.uidOf(e) != "" {
			withUID++
		}
	}
	if withUID < len(entries) {
		return true, fmt.Sprintf("Your LDAP config found %d user objects in %.4fs, but only %d with the specified uidtype.", len(entries), secs, withUID)
	}
	return true, fmt.Sprintf("Your LDAP config seems to be OK, %d user objects found in %.4fs.", len(entries), secs)
}
