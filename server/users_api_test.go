package server_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/builtin"
	"github.com/authsrv/authsrv/resolver/resolvertest"
)

// memTypes are the shipped types plus the in-memory one; "ldapresolver"
// is replaced by it in the resolversz test only.
func memTypes() resolver.Registry {
	types := builtin.Types()
	types[resolvertest.MemTypeName] = resolvertest.MemType()
	return types
}

// call is a request with the admin token.
func (e *env) admin(t *testing.T, tok, method, target string, body string) reply {
	t.Helper()
	ctype := ""
	if body != "" {
		ctype = formType
		if strings.HasPrefix(body, "{") {
			ctype = "application/json"
		}
	}
	r := e.do(t, method, target, ctype, body, map[string]string{"Authorization": tok})
	noNulls(t, r.json, "$")
	return r
}

func wantOK(t *testing.T, r reply) any {
	t.Helper()
	if r.status != 200 || at(r.json, "result.status") != true {
		t.Fatalf("want success, got %d %s", r.status, r.body)
	}
	return at(r.json, "result.value")
}

func TestRealmsResolversUsersAPI(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes()), authsrv.WithSuperuserRealms("admins")})
	tok := e.login(t)

	// Resolvers.
	id := wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver", "Secret", "t0p-secret", "Editable", "True")))
	if id.(float64) <= 0 {
		t.Fatalf("resolver id %v", id)
	}
	list := wantOK(t, e.admin(t, tok, "GET", "/resolver/", "")).(map[string]any)
	m1 := list["mem1"].(map[string]any)
	if m1["type"] != "memresolver" || at(m1, "data.Secret") != "__CENSORED__" || at(m1, "data.Editable") != "True" {
		t.Errorf("GET /resolver/: %v", m1)
	}
	if strings.Contains(string(e.admin(t, tok, "GET", "/resolver/mem1", "").body), "t0p-secret") {
		t.Error("a resolver secret was returned")
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/resolver/nonexistent", "")).(map[string]any); len(v) != 0 {
		t.Errorf("unknown resolver: %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/resolver/?type=ldapresolver", "")).(map[string]any); len(v) != 0 {
		t.Errorf("type filter: %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/resolver/?editable=1", "")).(map[string]any); len(v) != 1 {
		t.Errorf("editable filter: %v", v)
	}
	r := e.admin(t, tok, "POST", "/resolver/test", form("type", "memresolver", "Secret", "__CENSORED__", "resolver", "mem1"))
	if wantOK(t, r) != true || at(r.json, "detail.description") != "Found 4 users." {
		t.Errorf("resolver test: %s", r.body)
	}
	wantError(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "otherresolver")), 400, 302,
		fmt.Sprintf("ERR302: resolver type : otherresolver not in %v", memTypeNames()))
	wantError(t, e.admin(t, tok, "POST", "/resolver/x2", form("Secret", "x")), 400, 905, "ERR905: Missing parameter: type")
	if v := wantOK(t, e.admin(t, tok, "GET", "/resolver/memresolver/default", "")).(map[string]any); len(v) != 0 {
		t.Errorf("defaults: %v", v)
	}

	// Realms and the default realm.
	v := wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1,ghost", "priority.mem1", "3"))).(map[string]any)
	if fmt.Sprint(v["added"]) != "[mem1]" || fmt.Sprint(v["failed"]) != "[ghost]" {
		t.Errorf("POST /realm: %v", v)
	}
	realms := wantOK(t, e.admin(t, tok, "GET", "/realm/", "")).(map[string]any)
	r1 := realms["realm1"].(map[string]any)
	entry := r1["resolver"].([]any)[0].(map[string]any)
	if r1["default"] != true || r1["id"].(float64) <= 0 || entry["name"] != "mem1" || entry["priority"] != float64(3) || entry["type"] != "memresolver" || entry["node"] != "" {
		t.Errorf("GET /realm/: %v", r1)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/realm/superuser", "")); fmt.Sprint(v) != "[admins]" {
		t.Errorf("superuser realms %v", v)
	}
	wantOK(t, e.admin(t, tok, "POST", "/realm/admins", `{"resolvers":["mem1"]}`))
	if v := wantOK(t, e.admin(t, tok, "GET", "/defaultrealm", "")).(map[string]any); v["realm1"] == nil {
		t.Errorf("GET /defaultrealm: %v", v)
	}
	if id := wantOK(t, e.admin(t, tok, "DELETE", "/defaultrealm", "")); id != r1["id"] {
		t.Errorf("DELETE /defaultrealm = %v", id)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/defaultrealm", "")).(map[string]any); len(v) != 0 {
		t.Errorf("no default: %v", v)
	}
	if id := wantOK(t, e.admin(t, tok, "DELETE", "/defaultrealm", "")); id != float64(0) {
		t.Errorf("second DELETE /defaultrealm = %v", id)
	}
	wantError(t, e.admin(t, tok, "POST", "/defaultrealm/nowhere", ""), 404, 601, "ERR601: The requested Realm could not be found.")
	wantOK(t, e.admin(t, tok, "POST", "/defaultrealm/realm1", ""))
	wantError(t, e.admin(t, tok, "POST", "/realm/realm1/node/"+"00000000-0000-0000-0000-000000000000", `{"resolver":[{"name":"mem1"}]}`),
		400, 905, "ERR905: The given node does not exist!")
	wantError(t, e.admin(t, tok, "POST", "/realm/realm1/node/"+e.s.NodeID(), `{"resolver":[{"priority":1}]}`),
		400, 905, "ERR905: Could not verify data in request!")
	nv := wantOK(t, e.admin(t, tok, "POST", "/realm/realm1/node/"+e.s.NodeID(), `{"resolver":[{"name":"mem1","priority":1}]}`)).(map[string]any)
	if fmt.Sprint(nv["added"]) != "[mem1]" {
		t.Errorf("node realm: %v", nv)
	}

	// Users.
	users := wantOK(t, e.admin(t, tok, "GET", "/user/?realm=realm1&username=al*", "")).([]any)
	if len(users) != 1 {
		t.Fatalf("GET /user/ al*: %v", users)
	}
	alice := users[0].(map[string]any)
	if alice["username"] != "alice" || alice["realm"] != "realm1" || alice["resolver"] != "mem1" || alice["editable"] != true || alice["givenname"] != "Alice" {
		t.Errorf("alice: %v", alice)
	}
	if _, ok := alice["password"]; ok {
		t.Error("a password was listed")
	}
	if all := wantOK(t, e.admin(t, tok, "GET", "/user/", "")).([]any); len(all) != 8 {
		t.Errorf("all users of both realms: %d", len(all))
	}
	if none := wantOK(t, e.admin(t, tok, "GET", "/user/?realm=nowhere", "")).([]any); len(none) != 0 {
		t.Errorf("unknown realm: %v", none)
	}

	// Custom attributes.
	if id := wantOK(t, e.admin(t, tok, "POST", "/user/attribute", form("user", "alice@realm1", "key", "department", "value", "sales"))); id.(float64) <= 0 {
		t.Errorf("attribute id %v", id)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/user/attribute?user=alice&realm=realm1", "")).(map[string]any); v["department"] != "sales" {
		t.Errorf("GET /user/attribute: %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/user/attribute?user=alice@realm1&key=department", "")); v != "sales" {
		t.Errorf("one attribute: %v", v)
	}
	users = wantOK(t, e.admin(t, tok, "GET", "/user/?realm=realm1&username=alice", "")).([]any)
	if users[0].(map[string]any)["department"] != "sales" {
		t.Errorf("custom attribute not in the listing: %v", users[0])
	}
	wantError(t, e.admin(t, tok, "POST", "/user/attribute", form("user", "ghost@realm1", "key", "k", "value", "v")), 400, 904,
		"ERR904: The user can not be found in any resolver in this realm!")
	wantError(t, e.admin(t, tok, "POST", "/user/attribute", form("user", "alice", "resolver", "nope", "key", "k", "value", "v")), 400, 904,
		"ERR904: The resolver 'nope' does not exist!")
	ed := wantOK(t, e.admin(t, tok, "GET", "/user/editable_attributes/?user=alice", "")).(map[string]any)
	if fmt.Sprint(ed["delete"]) != "[*]" {
		t.Errorf("editable attributes: %v", ed)
	}

	// Create a user, log in as that user, and see only the own account.
	uid := wantOK(t, e.admin(t, tok, "POST", "/user/", form("user", "newbie", "resolver", "mem1", "password", "n3w-pass", "givenname", "New", "surname", "Bie")))
	if uid == "" {
		t.Fatal("no uid")
	}
	wantError(t, e.admin(t, tok, "POST", "/user/", form("user", "newbie", "resolver", "mem1", "password", "x")), 400, 904,
		"ERR904: The user newbie already exists in resolver mem1.")
	lr := e.do(t, "POST", "/auth", formType, form("username", "newbie@realm1", "password", "n3w-pass"), nil)
	utok, _ := at(lr.json, "result.value.token").(string)
	if lr.status != 200 || at(lr.json, "result.value.role") != "user" || at(lr.json, "result.value.realm") != "realm1" || at(lr.json, "result.value.username") != "newbie" {
		t.Fatalf("user login: %d %s", lr.status, lr.body)
	}
	if r := e.do(t, "POST", "/auth", formType, form("username", "newbie", "password", "wrong"), nil); r.status != 401 {
		t.Errorf("wrong user password: %d", r.status)
	}
	if r := e.do(t, "POST", "/auth", formType, form("username", "newbie", "password", "n3w-pass", "realm", "nowhere"), nil); at(r.json, "result.error.message") != "ERR4031: Authentication failure. Unknown realm: nowhere." {
		t.Errorf("unknown realm: %s", r.body)
	}
	own := wantOK(t, e.admin(t, utok, "GET", "/user/?realm=admins&username=*", "")).([]any)
	if len(own) != 1 || own[0].(map[string]any)["username"] != "newbie" || own[0].(map[string]any)["realm"] != "realm1" {
		t.Errorf("a user sees: %v", own)
	}
	wantOK(t, e.admin(t, utok, "PUT", "/user/", form("user", "alice", "resolver", "mem1", "givenname", "Renamed")))
	mine := wantOK(t, e.admin(t, tok, "GET", "/user/?realm=realm1&username=newbie", "")).([]any)
	if mine[0].(map[string]any)["givenname"] != "Renamed" {
		t.Errorf("PUT as user changed someone else or nothing: %v", mine)
	}
	if al := wantOK(t, e.admin(t, tok, "GET", "/user/?realm=realm1&username=alice", "")).([]any); al[0].(map[string]any)["givenname"] != "Alice" {
		t.Error("a user changed alice")
	}
	wantError(t, e.admin(t, utok, "DELETE", "/user/attribute/department/alice/realm1", ""), 403, 303,
		"ERR303: User is not allowed to delete attributes of other users.")
	wantError(t, e.admin(t, utok, "GET", "/realm/", ""), 401, 4306,
		"ERR4306: Authentication failure. You do not have the necessary role (['admin']) to access this resource!")
	wantError(t, e.admin(t, utok, "POST", "/user/", form("user", "x", "resolver", "mem1")), 401, 4306,
		"ERR4306: Authentication failure. You do not have the necessary role (['admin']) to access this resource!")
	wantError(t, e.admin(t, utok, "DELETE", "/user/mem1/alice", ""), 401, 4306,
		"ERR4306: Authentication failure. You do not have the necessary role (['admin']) to access this resource!")

	// A user of a superuser realm is an administrator.
	sr := e.do(t, "POST", "/auth", formType, form("username", "bob@admins", "password", "b0b p w%+&=ä"), map[string]string{"User-Agent": "privacyidea-cp/3.0"})
	if sr.status != 200 || at(sr.json, "result.value.role") != "admin" || at(sr.json, "result.value.realm") != "admins" {
		t.Errorf("superuser realm login: %d %s", sr.status, sr.body)
	}

	// Deletions and their refusals.
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/user/mem1/newbie", "")); v != true {
		t.Errorf("delete user: %v", v)
	}
	wantError(t, e.admin(t, tok, "DELETE", "/user/mem1/newbie", ""), 400, 904, "ERR904: The user can not be found in any resolver in this realm!")
	wantError(t, e.admin(t, tok, "DELETE", "/resolver/mem1", ""), 400, 302, "ERR302: The resolver 'mem1' is still contained in realm 'admins'.")
	wantError(t, e.admin(t, tok, "DELETE", "/realm/realm1", ""), 400, 908,
		"ERR908: Realm 'realm1' contains custom user attributes (department). Deleting the realm will also delete these custom user attributes.")
	if n := wantOK(t, e.admin(t, tok, "DELETE", "/user/attribute/department/alice/realm1", "")); n != float64(1) {
		t.Errorf("attribute delete = %v", n)
	}
	if id := wantOK(t, e.admin(t, tok, "DELETE", "/realm/realm1", "")); id != r1["id"] {
		t.Errorf("DELETE /realm = %v", id)
	}
	wantOK(t, e.admin(t, tok, "DELETE", "/realm/admins", ""))
	if id := wantOK(t, e.admin(t, tok, "DELETE", "/resolver/mem1", "")); id.(float64) <= 0 {
		t.Errorf("DELETE /resolver = %v", id)
	}
	if id := wantOK(t, e.admin(t, tok, "DELETE", "/resolver/mem1", "")); id != float64(-1) {
		t.Errorf("second DELETE /resolver = %v", id)
	}
}

func memTypeNames() []string {
	var names []string
	for n := range memTypes() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// TestResolversz: a failing connection check answers 503 naming the
// resolver, and 200 again once it works.
func TestResolversz(t *testing.T) {
	types := memTypes()
	fake := resolvertest.MemType()
	fake.Name = "ldapresolver"
	types["ldapresolver"] = fake
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(types)})
	tok := e.login(t)
	check := func(status int, body string) {
		t.Helper()
		r := e.do(t, "GET", "/healthz/resolversz", "", "", nil)
		if r.status != status || strings.TrimSpace(string(r.body)) != body {
			t.Errorf("resolversz = %d %s; want %d %s", r.status, r.body, status, body)
		}
	}
	check(200, `{"ldapresolver":{},"sqlresolver":{},"status":"ready"}`)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/ldap1", form("type", "ldapresolver", "Down", "True")))
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem9", form("type", "memresolver")))
	check(503, `{"ldapresolver":{"ldap1":"fail"},"sqlresolver":{},"status":"fail"}`)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/ldap1", url.Values{"Down": {""}}.Encode()))
	check(200, `{"ldapresolver":{"ldap1":"OK"},"sqlresolver":{},"status":"ready"}`)
}
