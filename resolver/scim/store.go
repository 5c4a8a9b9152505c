package scim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver"
)

// store is one configured SCIM resolver.
type store struct {
	*client
	closed atomic.Bool
}

var (
	_ resolver.Resolver = (*store)(nil)
	_ resolver.Tester   = (*store)(nil)
	_ resolver.Pinger   = (*store)(nil)
	_ resolver.Fielder  = (*store)(nil)
	_ resolver.Pager    = (*store)(nil)
)

func newStore(cfg *config, env resolver.Env) *store {
	return &store{client: newClient(cfg, env)}
}

var errClosed = fmt.Errorf("scim: store closed: %w", resolver.ErrUnavailable)

// call bounds ctx by TIMEOUT.
func (s *store) call(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, unavailable(err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	return ctx, cancel, nil
}

// resource is a SCIM resource as decoded JSON.
type resource map[string]any

// fetchUser GETs /Users/<id> and checks that the answer is that user.
func (s *store) fetchUser(ctx context.Context, id string) (resource, error) {
	u, ok := userURL(s.cfg.base, id)
	if !ok {
		return nil, resolver.ErrNoUser
	}
	ctx, cancel, err := s.call(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var res resource
	if err := s.getResource(ctx, u, &res); errors.Is(err, errNotFound) {
		return nil, resolver.ErrNoUser
	} else if err != nil {
		return nil, err
	}
	if got, _ := res["id"].(string); got != id {
		// Not the user asked for (a server that normalises ids, or a
		// proxy that answered for another path): no such user here.
		return nil, resolver.ErrNoUser
	}
	return res, nil
}

// UserID returns login when /Users/<login> exists: the login name is the
// SCIM id (admin-config 3.4).
func (s *store) UserID(ctx context.Context, login string) (string, error) {
	if _, err := s.fetchUser(ctx, login); err != nil {
		return "", err
	}
	return login, nil
}

// User returns the info of /Users/<uid>.
func (s *store) User(ctx context.Context, uid string) (resolver.Info, error) {
	res, err := s.fetchUser(ctx, uid)
	if err != nil {
		return nil, err
	}
	return s.info(res), nil
}

// Search lists /Users with a filter built from the entries (ANDed),
// following pages up to sizeLimit users.
func (s *store) Search(ctx context.Context, filter map[string]string) ([]resolver.Info, error) {
	f, userCheck, ok, err := s.buildFilter(filter)
	if err != nil {
		return nil, err
	}
	ctx, cancel, err := s.call(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if !ok {
		return nil, nil // a value no user can have
	}
	var out []resolver.Info
	start := 1
	for range maxPages {
		q := url.Values{"startIndex": {strconv.Itoa(start)}, "count": {strconv.Itoa(pageSize)}}
		if f != "" {
			q.Set("filter", f)
		}
		var page listResponse
		if err := s.getResource(ctx, usersURL(s.cfg.base, q), &page); err != nil {
			if errors.Is(err, errNotFound) {
				err = unavailable(&statusError{what: "the resource server", status: 404})
			}
			return nil, err
		}
		for _, res := range page.Resources {
			if id, _ := res["id"].(string); id == "" {
				continue
			}
			info := s.info(res)
			// Servers that ignore the filter must not widen the result.
			if userCheck.match(info.String(resolver.KeyUsername)) {
				out = append(out, info)
			}
		}
		start += len(page.Resources)
		if len(page.Resources) == 0 || start > page.TotalResults || len(out) >= sizeLimit {
			break
		}
	}
	if len(out) > sizeLimit {
		out = out[:sizeLimit]
	}
	return out, nil
}

// SearchPage lists one page of Search's users with SCIM's startIndex
// and count (RFC 7644 section 3.4.2.4), following short pages a server
// cuts, and using its totalResults for More and Total. A server that
// ignores the filter (it sends users the filter excludes) cannot place an
// offset: the page is then cut from Search's bounded list.
func (s *store) SearchPage(ctx context.Context, filter map[string]string, offset, limit int) (resolver.Page, error) {
	f, userCheck, ok, err := s.buildFilter(filter)
	if err != nil {
		return resolver.Page{}, err
	}
	cctx, cancel, err := s.call(ctx)
	if err != nil {
		return resolver.Page{}, err
	}
	defer cancel()
	if !ok {
		return resolver.Page{Total: 0}, nil // a value no user can have
	}
	p := resolver.Page{Total: -1}
	start := offset + 1
	for range maxPages {
		q := url.Values{"startIndex": {strconv.Itoa(start)}, "count": {strconv.Itoa(limit - len(p.Users))}}
		if f != "" {
			q.Set("filter", f)
		}
		var page listResponse
		if err := s.getResource(cctx, usersURL(s.cfg.base, q), &page); err != nil {
			if errors.Is(err, errNotFound) {
				err = unavailable(&statusError{what: "the resource server", status: 404})
			}
			return resolver.Page{}, err
		}
		for _, res := range page.Resources {
			info := s.info(res)
			if id, _ := res["id"].(string); id == "" || !userCheck.match(info.String(resolver.KeyUsername)) {
				cancel()
				all, err := s.Search(ctx, filter)
				if err != nil {
					return resolver.Page{}, err
				}
				return resolver.CutPage(all, offset, limit), nil
			}
		}
		excess := false
		for _, res := range page.Resources {
			if len(p.Users) == limit {
				excess = true // a server that sends more than count
				break
			}
			p.Users = append(p.Users, s.info(res))
		}
		if excess {
			p.More = true
			break
		}
		if len(page.Resources) == 0 {
			// The end (or a server whose total is too high): the users
			// before this start are all there are, or the total when
			// the offset lies past it.
			p.More, p.Total = false, page.TotalResults
			if start > offset+1 || page.TotalResults > offset {
				p.Total = start - 1
			}
			break
		}
		start += len(page.Resources)
		p.More = start <= page.TotalResults
		if !p.More {
			p.Total = start - 1
			break
		}
		if len(p.Users) >= limit {
			break
		}
	}
	return p, nil
}

// listResponse is a SCIM ListResponse (RFC 7644 section 3.4.2).
type listResponse struct {
	TotalResults int        `json:"totalResults"`
	Resources    []resource `json:"Resources"`
}

// CheckPassword is always false: SCIM does not expose passwords.
func (s *store) CheckPassword(context.Context, string, string) (bool, error) {
	return false, nil
}

// Fields lists the mapped Info keys.
func (s *store) Fields() []string { return s.cfg.fields() }

// Ping lists one user.
func (s *store) Ping(ctx context.Context) error {
	_, err := s.count(ctx)
	return err
}

// Test lists one user and reports the server's total: "Found N users".
func (s *store) Test(ctx context.Context) (any, string) {
	n, err := s.count(ctx)
	if err != nil {
		return false, describe(err)
	}
	return true, "Found " + strconv.Itoa(n) + " users"
}

func (s *store) count(ctx context.Context) (int, error) {
	ctx, cancel, err := s.call(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	var page listResponse
	q := url.Values{"startIndex": {"1"}, "count": {"1"}}
	if err := s.getResource(ctx, usersURL(s.cfg.base, q), &page); err != nil {
		if errors.Is(err, errNotFound) {
			err = unavailable(&statusError{what: "the resource server", status: 404})
		}
		return 0, err
	}
	if page.TotalResults < len(page.Resources) {
		return len(page.Resources), nil
	}
	return page.TotalResults, nil
}

// describe is the short text Test shows for an error.
func describe(err error) string {
	var se *statusError
	if r, ok := netguard.Refusal(err); ok {
		return "The SCIM server is not reachable: " + r.Error() + "."
	}
	switch {
	case errors.Is(err, errClosed):
		return "The resolver is closed."
	case errors.Is(err, errTokenRefused):
		return "The authorization server refused the client credentials."
	case errors.Is(err, context.DeadlineExceeded):
		return "The SCIM server did not answer in time."
	case errors.Is(err, context.Canceled):
		return "The test was cancelled."
	case errors.Is(err, errToken):
		return "The authorization server did not issue a token."
	case errors.As(err, &se):
		return fmt.Sprintf("The resource server answered with HTTP status %d.", se.status)
	case errors.Is(err, errRedirect):
		return "The resource server answered with a redirect."
	case errors.Is(err, errNotJSON), errors.Is(err, errBadJSON), errors.Is(err, errTooLarge):
		return "The resource server's answer is not valid SCIM JSON."
	}
	return "The SCIM server is not reachable."
}

// Close releases idle connections. It is idempotent.
func (s *store) Close() error {
	if !s.closed.Swap(true) {
		s.tr.CloseIdleConnections()
	}
	return nil
}

// info maps a resource to an Info: userid is the id, mobile is "" unless
// mapped, other keys follow the mapping.
func (s *store) info(res resource) resolver.Info {
	id, _ := res["id"].(string)
	info := resolver.Info{resolver.KeyUserID: id, resolver.KeyMobile: ""}
	for key, p := range s.cfg.mapping {
		info[key] = p.value(res)
	}
	return info
}

// value follows the path; an array gives its first element, and a complex
// value its "value" sub-attribute. Attribute names match case-insensitively
// (RFC 7643 section 2.1). Non-string scalars are formatted.
func (p attrPath) value(res resource) string {
	var cur any = map[string]any(res)
	for _, step := range p.steps {
		cur = first(cur)
		obj, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = lookup(obj, step)
	}
	cur = first(cur)
	if obj, ok := cur.(map[string]any); ok {
		cur = lookup(obj, "value")
	}
	switch v := cur.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

func first(v any) any {
	if list, ok := v.([]any); ok {
		if len(list) == 0 {
			return nil
		}
		return list[0]
	}
	return v
}

func lookup(obj map[string]any, key string) any {
	if v, ok := obj[key]; ok {
		return v
	}
	for k, v := range obj {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return nil
}

// textMatch is one compiled search value: * at the start and/or end is a
// wildcard (sw, ew, co); elsewhere it is a literal and the value must be
// equal. Comparison is case-insensitive, as SCIM compares userName.
type textMatch struct {
	op, text string // op "" = anything
}

func compileText(v string) textMatch {
	core := v
	lead := strings.HasPrefix(core, "*")
	if lead {
		core = core[1:]
	}
	trail := strings.HasSuffix(core, "*")
	if trail {
		core = core[:len(core)-1]
	}
	switch {
	case strings.Contains(core, "*"):
		return textMatch{op: "eq", text: v}
	case core == "":
		return textMatch{}
	case lead && trail:
		return textMatch{op: "co", text: core}
	case lead:
		return textMatch{op: "ew", text: core}
	case trail:
		return textMatch{op: "sw", text: core}
	}
	return textMatch{op: "eq", text: core}
}

func (m textMatch) match(s string) bool {
	s, t := strings.ToLower(s), strings.ToLower(m.text)
	switch m.op {
	case "eq":
		return s == t
	case "sw":
		return strings.HasPrefix(s, t)
	case "ew":
		return strings.HasSuffix(s, t)
	case "co":
		return strings.Contains(s, t)
	}
	return true
}

// buildFilter turns the search entries into a SCIM filter such as
// `userName sw "al" and emails.value eq "a@b.c"`, each value JSON-string
// escaped. Keys must be mapped (else ErrSearchKey); empty and *-only
// values add no condition. ok is false when a value cannot match any
// user (invalid UTF-8), so no request is needed. userCheck re-checks the
// username entry on the answers.
func (s *store) buildFilter(filter map[string]string) (f string, userCheck textMatch, ok bool, err error) {
	keys := make([]string, 0, len(filter))
	for k := range filter {
		if _, mapped := s.cfg.mapping[k]; !mapped {
			return "", textMatch{}, false, fmt.Errorf("scim: search by %q: %w", k, resolver.ErrSearchKey)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	ok = true
	for _, k := range keys {
		v := filter[k]
		if !utf8.ValidString(v) || len(v) > maxIDLen*4 {
			ok = false
			continue
		}
		m := compileText(v)
		if k == resolver.KeyUsername {
			userCheck = m
		}
		if m.op == "" {
			continue
		}
		parts = append(parts, s.cfg.mapping[k].text+" "+m.op+" "+quote(m.text))
	}
	return strings.Join(parts, " and "), userCheck, ok, nil
}

// quote returns s as a JSON string (RFC 7644 filter values are JSON
// strings).
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
