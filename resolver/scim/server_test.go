package scim_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/authsrv/authsrv/resolver/resolvertest"
)

// The paths of the test server: the authorization server lives under
// /auth, the SCIM resource server under /scim/v2.
const (
	authBase  = "/auth"
	scimBase  = "/scim/v2"
	tokenPath = authBase + "/oauth/token"
	usersPath = scimBase + "/Users"
)

// request is one request the server saw.
type request struct {
	method, path, query string
}

// scimServer is a SCIM 2.0 server good enough for the client: a
// client-credentials token endpoint checking HTTP Basic, /Users with
// filters (eq, sw, ew, co joined by "and") and paging, /Users/{id}.
type scimServer struct {
	srv *httptest.Server

	mu           sync.Mutex
	client       string
	secret       string
	expiresIn    any // sent as expires_in when not nil
	users        []map[string]any
	tokens       map[string]bool
	fetches      int
	requests     []request
	ignoreFilter bool
	// override, when set, may answer a request first (true = answered).
	override func(w http.ResponseWriter, r *http.Request) bool
}

func newServer(t *testing.T) *scimServer {
	s := &scimServer{client: "authsrv", secret: "s3cret-Client-Pw", expiresIn: 3600, tokens: map[string]bool{}}
	for _, u := range resolvertest.Users {
		s.users = append(s.users, kitUser(u))
	}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

// kitUser is a kit user as a SCIM core User whose id is the login (the
// login name is the SCIM id, admin-config 3.4).
func kitUser(u resolvertest.User) map[string]any {
	return map[string]any{
		"schemas":  []any{"urn:ietf:params:scim:schemas:core:2.0:User"},
		"id":       u.Login,
		"userName": u.Login,
		"name":     map[string]any{"givenName": u.Givenname, "familyName": u.Surname, "formatted": u.Givenname + " " + u.Surname},
		"emails":   []any{map[string]any{"value": u.Email, "type": "work", "primary": true}},
		"phoneNumbers": []any{
			map[string]any{"value": u.Phone, "type": "work"},
			map[string]any{"value": u.Mobile, "type": "mobile"},
		},
		"active": true,
		"meta":   map[string]any{"resourceType": "User"},
	}
}

func (s *scimServer) URL() string { return s.srv.URL }

func (s *scimServer) set(f func(s *scimServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *scimServer) tokenFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

func (s *scimServer) seen() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.requests...)
}

func (s *scimServer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

func writeJSON(w http.ResponseWriter, ct string, status int, v any) {
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func scimError(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, "application/scim+json", status, map[string]any{
		"schemas": []string{"urn:ietf:params:scim:api:messages:2.0:Error"}, "status": strconv.Itoa(status), "detail": detail,
	})
}

func (s *scimServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, request{r.Method, r.URL.EscapedPath(), r.URL.RawQuery})
	override := s.override
	s.mu.Unlock()
	if override != nil && override(w, r) {
		return
	}
	if r.Method != http.MethodGet {
		scimError(w, http.StatusMethodNotAllowed, "GET only")
		return
	}
	p := r.URL.EscapedPath()
	switch {
	case p == tokenPath:
		s.token(w, r)
	case p == usersPath:
		if s.authorized(w, r) {
			s.list(w, r)
		}
	case strings.HasPrefix(p, usersPath+"/"):
		if s.authorized(w, r) {
			s.get(w, strings.TrimPrefix(p, usersPath+"/"))
		}
	default:
		scimError(w, http.StatusNotFound, "no such endpoint")
	}
}

func (s *scimServer) token(w http.ResponseWriter, r *http.Request) {
	client, secret, ok := r.BasicAuth()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.RawQuery != "grant_type=client_credentials" {
		writeJSON(w, "application/json", http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	if !ok || client != s.client || secret != s.secret {
		writeJSON(w, "application/json", http.StatusUnauthorized, map[string]string{"error": "invalid_client"})
		return
	}
	s.fetches++
	tok := fmt.Sprintf("tok-%d", s.fetches)
	s.tokens[tok] = true
	answer := map[string]any{"access_token": tok, "token_type": "Bearer"}
	if s.expiresIn != nil {
		answer["expires_in"] = s.expiresIn
	}
	writeJSON(w, "application/json", http.StatusOK, answer)
}

func (s *scimServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	valid := ok && s.tokens[tok]
	s.mu.Unlock()
	if !valid {
		scimError(w, http.StatusUnauthorized, "invalid token")
	}
	return valid
}

// revokeTokens makes every issued token invalid (as if expired early).
func (s *scimServer) revokeTokens() {
	s.set(func(s *scimServer) { s.tokens = map[string]bool{} })
}

func (s *scimServer) get(w http.ResponseWriter, seg string) {
	id, err := url.PathUnescape(seg)
	if err != nil || strings.Contains(seg, "/") {
		scimError(w, http.StatusNotFound, "bad id")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.users {
		if u["id"] == id {
			writeJSON(w, "application/scim+json", http.StatusOK, u)
			return
		}
	}
	scimError(w, http.StatusNotFound, "Resource "+id+" not found")
}

func (s *scimServer) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		if k != "filter" && k != "startIndex" && k != "count" {
			scimError(w, http.StatusBadRequest, "unexpected query parameter "+k)
			return
		}
	}
	conds, err := parseFilter(q.Get("filter"))
	if err != nil {
		writeJSON(w, "application/scim+json", http.StatusBadRequest, map[string]any{"scimType": "invalidFilter", "detail": err.Error()})
		return
	}
	start, count := 1, 100
	if v := q.Get("startIndex"); v != "" {
		start, _ = strconv.Atoi(v)
	}
	if v := q.Get("count"); v != "" {
		count, _ = strconv.Atoi(v)
	}
	start = max(start, 1)
	count = max(min(count, 100), 0)
	s.mu.Lock()
	var hits []map[string]any
	for _, u := range s.users {
		if s.ignoreFilter || matchAll(u, conds) {
			hits = append(hits, u)
		}
	}
	s.mu.Unlock()
	page := []map[string]any{}
	for i := start - 1; i < len(hits) && len(page) < count; i++ {
		page = append(page, hits[i])
	}
	writeJSON(w, "application/scim+json", http.StatusOK, map[string]any{
		"schemas":      []string{"urn:ietf:params:scim:api:messages:2.0:ListResponse"},
		"totalResults": len(hits), "startIndex": start, "itemsPerPage": len(page), "Resources": page,
	})
}

// cond is one comparison of a filter.
type cond struct {
	attr, op, value string
}

// parseFilter reads `attr op "json string" [and attr op "..."]...`.
func parseFilter(f string) ([]cond, error) {
	if f == "" {
		return nil, nil
	}
	var out []cond
	rest := f
	for {
		attr, r1, ok1 := strings.Cut(rest, " ")
		op, r2, ok2 := strings.Cut(r1, " ")
		if !ok1 || !ok2 || !strings.HasPrefix(r2, `"`) {
			return nil, fmt.Errorf("bad comparison in %q", rest)
		}
		switch attr {
		case "userName", "name.givenName", "name.familyName", "emails.value", "phoneNumbers.value":
		default:
			return nil, fmt.Errorf("unknown attribute %q", attr)
		}
		switch op {
		case "eq", "sw", "ew", "co":
		default:
			return nil, fmt.Errorf("unknown operator %q", op)
		}
		dec := json.NewDecoder(strings.NewReader(r2))
		var v string
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("bad value: %w", err)
		}
		out = append(out, cond{attr, op, v})
		rest = r2[dec.InputOffset():]
		if rest == "" {
			return out, nil
		}
		var ok bool
		if rest, ok = strings.CutPrefix(rest, " and "); !ok {
			return nil, errors.New("expected and")
		}
	}
}

// values returns the attribute's values in a user.
func values(u map[string]any, attr string) []string {
	switch attr {
	case "userName":
		return []string{u["userName"].(string)}
	case "name.givenName", "name.familyName":
		n, _ := u["name"].(map[string]any)
		v, _ := n[strings.TrimPrefix(attr, "name.")].(string)
		return []string{v}
	case "emails.value", "phoneNumbers.value":
		list, _ := u[strings.TrimSuffix(attr, ".value")].([]any)
		var out []string
		for _, e := range list {
			if v, ok := e.(map[string]any)["value"].(string); ok {
				out = append(out, v)
			}
		}
		return out
	}
	return nil
}

// matchAll applies the conditions case-insensitively (these attributes are
// caseExact false in RFC 7643).
func matchAll(u map[string]any, conds []cond) bool {
	for _, c := range conds {
		want := strings.ToLower(c.value)
		hit := false
		for _, have := range values(u, c.attr) {
			have = strings.ToLower(have)
			switch c.op {
			case "eq":
				hit = hit || have == want
			case "sw":
				hit = hit || strings.HasPrefix(have, want)
			case "ew":
				hit = hit || strings.HasSuffix(have, want)
			case "co":
				hit = hit || strings.Contains(have, want)
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// checkRequests fails on any request outside the token endpoint, /Users
// with the expected query keys and a filter that parses, and
// /Users/<one escaped segment> without a query (reliability B5).
func checkRequests(t *testing.T, reqs []request) {
	t.Helper()
	for _, r := range reqs {
		switch {
		case r.method != http.MethodGet:
			t.Errorf("request %+v: not a GET", r)
		case r.path == tokenPath:
			if r.query != "grant_type=client_credentials" {
				t.Errorf("token request with query %q", r.query)
			}
		case r.path == usersPath:
			q, err := url.ParseQuery(r.query)
			if err != nil {
				t.Errorf("list query %q: %v", r.query, err)
				continue
			}
			for k := range q {
				if k != "filter" && k != "startIndex" && k != "count" || len(q[k]) != 1 {
					t.Errorf("list query %q: unexpected %q", r.query, k)
				}
			}
			if _, err := parseFilter(q.Get("filter")); err != nil {
				t.Errorf("list filter %q: %v", q.Get("filter"), err)
			}
		case strings.HasPrefix(r.path, usersPath+"/"):
			seg := strings.TrimPrefix(r.path, usersPath+"/")
			if seg == "" || seg == "." || seg == ".." || strings.Contains(seg, "/") || r.query != "" {
				t.Errorf("request %+v leaves /Users/<id>", r)
			}
			if id, err := url.PathUnescape(seg); err != nil || id == "." || id == ".." || strings.ContainsAny(id, `/\`) {
				t.Errorf("request %+v: the id %q", r, id)
			}
		default:
			t.Errorf("request %+v outside the base paths", r)
		}
	}
}
