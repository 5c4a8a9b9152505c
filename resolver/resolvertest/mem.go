package resolvertest

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/authsrv/authsrv/resolver"
)

// MemTypeName is the type name of MemType.
const MemTypeName = "memresolver"

// MemType is a user-store type kept in memory, for the tests of packages
// that use resolvers (realms, the API). Its configuration:
//
//	Users     JSON list of objects with username, password and Info keys
//	          (default: the Users population)
//	Secret    a password parameter (to test sealing and censoring)
//	Editable  "True" for writes
//	Down      "True" makes every call fail with ErrUnavailable
//	CACHE_TIMEOUT seconds of user cache (default 0)
func MemType() resolver.Type {
	return resolver.Type{
		Name: MemTypeName,
		Params: []resolver.Param{
			{Name: "Users", Type: resolver.String},
			{Name: "Secret", Type: resolver.Password},
			{Name: "Editable", Type: resolver.Bool},
			{Name: "Down", Type: resolver.Bool},
			{Name: "CACHE_TIMEOUT", Type: resolver.Int},
		},
		Validate: func(cfg resolver.Config) error {
			if v := cfg["Users"]; v != "" {
				var list []map[string]string
				if err := json.Unmarshal([]byte(v), &list); err != nil {
					return resolver.ConfigError("Users must be a JSON list of objects")
				}
			}
			if v := cfg["CACHE_TIMEOUT"]; v != "" {
				if _, err := strconv.Atoi(v); err != nil {
					return resolver.ConfigError("CACHE_TIMEOUT must be a number of seconds")
				}
			}
			return nil
		},
		New: func(_ context.Context, cfg resolver.Config, _ resolver.Env) (resolver.Resolver, error) {
			m := &Mem{byUID: map[string]map[string]string{}, editable: resolver.ParseBool(cfg["Editable"]), down: resolver.ParseBool(cfg["Down"])}
			list := memUsers()
			if v := cfg["Users"]; v != "" {
				list = nil
				if err := json.Unmarshal([]byte(v), &list); err != nil {
					return nil, resolver.ConfigError("Users must be a JSON list of objects")
				}
			}
			for _, u := range list {
				m.next++
				m.byUID[strconv.Itoa(m.next)] = u
			}
			return m, nil
		},
		Editable: func(cfg resolver.Config) bool { return resolver.ParseBool(cfg["Editable"]) },
		CacheTimeout: func(cfg resolver.Config) time.Duration {
			n, _ := strconv.Atoi(cfg["CACHE_TIMEOUT"])
			return time.Duration(n) * time.Second
		},
	}
}

func memUsers() []map[string]string {
	var out []map[string]string
	for _, u := range Users {
		out = append(out, map[string]string{
			resolver.KeyUsername: u.Login, resolver.KeyPassword: u.Password,
			resolver.KeyGivenname: u.Givenname, resolver.KeySurname: u.Surname,
			resolver.KeyEmail: u.Email, resolver.KeyPhone: u.Phone, resolver.KeyMobile: u.Mobile,
		})
	}
	return out
}

// Mem is a MemType store. Lookups counts UserID calls that reached it
// (to test caches in front of it).
type Mem struct {
	mu       sync.Mutex
	byUID    map[string]map[string]string
	next     int
	editable bool
	down     bool
	Lookups  int
}

var errDown = fmt.Errorf("memresolver is down: %w", resolver.ErrUnavailable)

func (m *Mem) check(ctx context.Context) error {
	if m.down {
		return errDown
	}
	return ctx.Err()
}

// UserID implements resolver.Resolver.
func (m *Mem) UserID(ctx context.Context, login string) (string, error) {
	if err := m.check(ctx); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Lookups++
	for uid, u := range m.byUID {
		if u[resolver.KeyUsername] == login && login != "" {
			return uid, nil
		}
	}
	return "", resolver.ErrNoUser
}

func (m *Mem) info(uid string, u map[string]string) resolver.Info {
	info := resolver.Info{resolver.KeyUserID: uid}
	for k, v := range u {
		if k != resolver.KeyPassword {
			info[k] = v
		}
	}
	return info
}

// User implements resolver.Resolver.
func (m *Mem) User(ctx context.Context, uid string) (resolver.Info, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.byUID[uid]
	if !ok {
		return nil, resolver.ErrNoUser
	}
	return m.info(uid, u), nil
}

func match(pattern, s string) bool {
	if pattern == "*" {
		return true
	}
	pre, post := strings.HasSuffix(pattern, "*"), strings.HasPrefix(pattern, "*")
	p := strings.Trim(pattern, "*")
	if strings.Contains(p, "*") {
		return false
	}
	switch {
	case pre && post:
		return strings.Contains(s, p)
	case pre:
		return strings.HasPrefix(s, p)
	case post:
		return strings.HasSuffix(s, p)
	}
	return s == p
}

// Search implements resolver.Resolver.
func (m *Mem) Search(ctx context.Context, filter map[string]string) ([]resolver.Info, error) {
	if err := m.check(ctx); err != nil {
		return nil, err
	}
	for k := range filter {
		switch k {
		case resolver.KeyUsername, resolver.KeyEmail, resolver.KeyGivenname, resolver.KeySurname:
		default:
			return nil, resolver.ErrSearchKey
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []resolver.Info{}
	// In uid order, so that pages cut from the list are stable.
	uids := slices.SortedFunc(maps.Keys(m.byUID), func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	for _, uid := range uids {
		u := m.byUID[uid]
		ok := true
		for k, v := range filter {
			ok = ok && match(v, u[k])
		}
		if ok {
			out = append(out, m.info(uid, u))
		}
	}
	return out, nil
}

// CheckPassword implements resolver.Resolver.
func (m *Mem) CheckPassword(ctx context.Context, uid, password string) (bool, error) {
	if err := m.check(ctx); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.byUID[uid]
	if !ok || password == "" {
		return false, nil
	}
	return subtle.ConstantTimeCompare([]byte(u[resolver.KeyPassword]), []byte(password)) == 1, nil
}

// Close implements resolver.Resolver.
func (m *Mem) Close() error { return nil }

// Ping implements resolver.Pinger.
func (m *Mem) Ping(ctx context.Context) error { return m.check(ctx) }

// Test implements resolver.Tester.
func (m *Mem) Test(ctx context.Context) (any, string) {
	if err := m.check(ctx); err != nil {
		return false, "The user store is not available."
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return true, fmt.Sprintf("Found %d users.", len(m.byUID))
}

// Fields implements resolver.Fielder.
func (m *Mem) Fields() []string {
	return []string{resolver.KeyUsername, resolver.KeyGivenname, resolver.KeySurname, resolver.KeyEmail, resolver.KeyPhone, resolver.KeyMobile}
}

// Editable implements resolver.Editor.
func (m *Mem) Editable() bool { return m.editable }

// Create implements resolver.Editor.
func (m *Mem) Create(ctx context.Context, fields map[string]string) (string, error) {
	if !m.editable {
		return "", resolver.ErrNotEditable
	}
	if err := m.check(ctx); err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	uid := strconv.Itoa(m.next)
	m.byUID[uid] = maps.Clone(fields)
	return uid, nil
}

// Update implements resolver.Editor.
func (m *Mem) Update(ctx context.Context, uid string, fields map[string]string) error {
	if !m.editable {
		return resolver.ErrNotEditable
	}
	if err := m.check(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.byUID[uid]
	if !ok {
		return resolver.ErrNoUser
	}
	maps.Copy(u, fields)
	return nil
}

// Delete implements resolver.Editor.
func (m *Mem) Delete(ctx context.Context, uid string) error {
	if !m.editable {
		return resolver.ErrNotEditable
	}
	if err := m.check(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byUID[uid]; !ok {
		return resolver.ErrNoUser
	}
	delete(m.byUID, uid)
	return nil
}

var (
	_ resolver.Editor = (*Mem)(nil)
	_ resolver.Tester = (*Mem)(nil)
	_ resolver.Pinger = (*Mem)(nil)
)
