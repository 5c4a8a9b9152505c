package server_test

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"reflect"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/policy"
)

func multipartFile(t *testing.T, field, name string, content []byte) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	fw, err := w.CreateFormFile(field, name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(content)
	_ = w.Close()
	return w.FormDataContentType(), buf.String()
}

func TestPoliciesAPI(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	// Once an admin policy exists, only granted actions are allowed: grant
	// everything to the admin first.
	wantOK(t, e.admin(t, tok, "POST", "/policy/superadmin", `{"scope":"admin","action":"*","adminuser":"admin"}`))
	body := `{"scope":"admin","action":"policyread, enable","realm":"","user":["*","!root"],
		"client":"192.0.2.0/24, !192.0.2.2","time":"Mon-Sun: 0-23:59","priority":2,"description":"limited, read only",
		"conditions":[["HTTP Request header","X-Test","equals","yes",true,"condition_is_false"],["userinfo","dept","equals","x",false,"condition_is_false"]]}`
	v := wantOK(t, e.admin(t, tok, "POST", "/policy/reader-pol", body)).(map[string]any)
	id, ok := v["setPolicy reader-pol"].(float64)
	if !ok || id <= 0 {
		t.Fatalf("POST /policy = %v", v)
	}
	got := wantOK(t, e.admin(t, tok, "GET", "/policy/", "")).(map[string]any)
	p := got["reader-pol"].(map[string]any)
	if p["action"] != "policyread, enable" || p["client"] != "192.0.2.0/24, !192.0.2.2" || p["priority"] != float64(2) ||
		p["active"] != true || p["description"] != "limited, read only" || len(p["conditions"].([]any)) != 2 {
		t.Errorf("GET /policy/: %v", p)
	}
	if c := p["conditions"].([]any)[0].([]any); len(c) != 5 {
		t.Errorf("conditions are returned with 5 elements: %v", c)
	}
	if one := wantOK(t, e.admin(t, tok, "GET", "/policy/reader-pol", "")).(map[string]any); len(one) != 1 {
		t.Errorf("GET /policy/<name>: %v", one)
	}
	if none := wantOK(t, e.admin(t, tok, "GET", "/policy/nothing", "")).(map[string]any); len(none) != 0 {
		t.Errorf("unknown policy: %v", none)
	}
	if l := wantOK(t, e.admin(t, tok, "GET", "/policy/?scope=user", "")).(map[string]any); len(l) != 0 {
		t.Errorf("scope filter: %v", l)
	}

	// Disable and enable.
	if got := wantOK(t, e.admin(t, tok, "POST", "/policy/disable/reader-pol", "")); got != id {
		t.Errorf("disable = %v", got)
	}
	if l := wantOK(t, e.admin(t, tok, "GET", "/policy/?active=false", "")).(map[string]any); l["reader-pol"] == nil {
		t.Errorf("active filter: %v", l)
	}
	if got := wantOK(t, e.admin(t, tok, "POST", "/policy/enable/reader-pol", "")); got != id {
		t.Errorf("enable = %v", got)
	}
	wantError(t, e.admin(t, tok, "POST", "/policy/enable/ghost", ""), 404, 601, "ERR601: The policy with name 'ghost' does not exist")

	// The condition on the X-Test header decides for another admin.
	if err := e.s.Admins().Add(t.Context(), "ops", "ops-Pw1"); err != nil {
		t.Fatal(err)
	}
	lr := e.do(t, "POST", "/auth", formType, form("username", "ops", "password", "ops-Pw1"), nil)
	otok, _ := at(lr.json, "result.value.token").(string)
	wantError(t, e.do(t, "GET", "/policy/", "", "", map[string]string{"Authorization": otok}), 403, 303,
		"ERR303: Admin actions are defined, but the action policyread is not allowed!")
	if r := e.do(t, "GET", "/policy/", "", "", map[string]string{"Authorization": otok, "X-Test": "yes"}); r.status != 200 {
		t.Errorf("with the header: %d %s", r.status, r.body)
	}
	if got := wantOK(t, e.admin(t, tok, "DELETE", "/policy/reader-pol", "")); got != id {
		t.Errorf("delete = %v", got)
	}
	wantError(t, e.admin(t, tok, "DELETE", "/policy/reader-pol", ""), 404, 601, "ERR601: The requested Policy could not be found.")
}

func TestPolicyCheckExportImportAndLimitedAdmin(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	if err := e.s.Admins().Add(t.Context(), "reader", "reader-Pw1"); err != nil {
		t.Fatal(err)
	}
	wantOK(t, e.admin(t, tok, "POST", "/policy/superadmin", `{"scope":"admin","action":"*","adminuser":"admin"}`))
	wantOK(t, e.admin(t, tok, "POST", "/policy/reader", `{"scope":"admin","action":"policyread","adminuser":"reader"}`))
	wantOK(t, e.admin(t, tok, "POST", "/policy/auth1", `{"scope":"authentication","action":"otppin=userstore, challenge_text=Please\\, enter","user":"*, !bob","conditions":[["HTTP Request header","X-Site","equals","a",false]]}`))

	// /policy/check.
	chk := wantOK(t, e.admin(t, tok, "GET", "/policy/check?user=alice&realm=realm1&scope=authentication&action=otppin&client=10.0.0.1", "")).(map[string]any)
	if chk["allowed"] != true || chk["policy"].(map[string]any)["auth1"] == nil {
		t.Errorf("check: %v", chk)
	}
	chk = wantOK(t, e.admin(t, tok, "GET", "/policy/check?user=bob&realm=realm1&scope=authentication&action=otppin", "")).(map[string]any)
	if chk["allowed"] != false || chk["info"] != "No policies found" {
		t.Errorf("check excluded: %v", chk)
	}
	wantError(t, e.admin(t, tok, "GET", "/policy/check?user=bob&realm=realm1&scope=authentication", ""), 400, 905, "ERR905: Missing parameter: action")

	// The limited admin reads but cannot write.
	lr := e.do(t, "POST", "/auth", formType, form("username", "reader", "password", "reader-Pw1"), nil)
	rtok, _ := at(lr.json, "result.value.token").(string)
	if rtok == "" {
		t.Fatalf("reader login: %s", lr.body)
	}
	if r := at(lr.json, "result.value.rights"); toJSON(r) != `["policyread"]` {
		t.Errorf("reader rights: %v", r)
	}
	if l := wantOK(t, e.admin(t, rtok, "GET", "/policy/", "")).(map[string]any); len(l) != 3 {
		t.Errorf("reader sees %d policies", len(l))
	}
	wantError(t, e.admin(t, rtok, "POST", "/policy/x", `{"scope":"admin","action":"enable"}`), 403, 303,
		"ERR303: Admin actions are defined, but the action policywrite is not allowed!")
	wantError(t, e.admin(t, rtok, "DELETE", "/policy/reader", ""), 403, 303,
		"ERR303: Admin actions are defined, but the action policydelete is not allowed!")

	// Export, then import into a fresh server: the same policies.
	r := e.do(t, "GET", "/policy/export/my%22pol%0D%0Aicies%5C.cfg", "", "", map[string]string{"Authorization": tok})
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("export: %d %v", r.status, r.header)
	}
	if cd := r.header.Get("Content-Disposition"); strings.ContainsAny(cd, "\r\n") || !strings.HasPrefix(cd, "attachment;") {
		t.Errorf("Content-Disposition %q", cd)
	}
	exported := r.body
	if !bytes.Contains(exported, []byte("[auth1]")) {
		t.Fatalf("export body:\n%s", exported)
	}
	before := wantOK(t, e.admin(t, tok, "GET", "/policy/", "")).(map[string]any)

	f := newEnv(t)
	ftok := f.login(t)
	ctype, mp := multipartFile(t, "file", "policies.cfg", exported)
	ir := f.do(t, "POST", "/policy/import/policies.cfg", ctype, mp, map[string]string{"Authorization": ftok})
	if n := wantOK(t, ir); n != float64(3) {
		t.Fatalf("import = %v", n)
	}
	after := wantOK(t, f.admin(t, ftok, "GET", "/policy/", "")).(map[string]any)
	for name, pb := range before {
		pa := after[name].(map[string]any)
		for k, v := range pb.(map[string]any) {
			if k == "id" {
				continue
			}
			if k == "action" {
				if a, b := policy.ParseActions(v.(string)), policy.ParseActions(pa[k].(string)); !reflect.DeepEqual(a, b) {
					t.Errorf("%s.action: %v after import, %v before", name, b, a)
				}
				continue
			}
			if s1, s2 := strings.TrimSpace(toJSON(v)), strings.TrimSpace(toJSON(pa[k])); s1 != s2 {
				t.Errorf("%s.%s: %s after import, %s before", name, k, s2, s1)
			}
		}
	}
	// A broken file imports nothing.
	g := newEnv(t)
	gtok := g.login(t)
	ctype, mp = multipartFile(t, "file", "bad.cfg", []byte("[ok]\nscope = 'admin'\naction = 'enable'\n[bad]\nscope = 'admin'\naction = 'nonsense'\n"))
	br := g.do(t, "POST", "/policy/import/bad.cfg", ctype, mp, map[string]string{"Authorization": gtok})
	if br.status != 400 {
		t.Errorf("bad import: %d %s", br.status, br.body)
	}
	if l := wantOK(t, g.admin(t, gtok, "GET", "/policy/", "")).(map[string]any); len(l) != 0 {
		t.Errorf("a failed import left %v", l)
	}
	ctype, mp = multipartFile(t, "file", "empty.cfg", nil)
	wantError(t, g.do(t, "POST", "/policy/import/empty.cfg", ctype, mp, map[string]string{"Authorization": gtok}), 400, 905, "ERR905: Error loading policy. File empty!")
}

func TestPolicyDefsAPI(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	all := wantOK(t, e.admin(t, tok, "GET", "/policy/defs", "")).(map[string]any)
	for _, scope := range []string{"admin", "user", "authentication", "authorization", "enrollment", "webui"} {
		if all[scope] == nil {
			t.Errorf("defs lack scope %s", scope)
		}
	}
	admin := wantOK(t, e.admin(t, tok, "GET", "/policy/defs/admin", "")).(map[string]any)
	if d, ok := admin["policyread"].(map[string]any); !ok || d["type"] != "bool" || d["desc"] == "" {
		t.Errorf("admin defs: %v", admin["policyread"])
	}
	cond := wantOK(t, e.admin(t, tok, "GET", "/policy/defs/conditions", "")).(map[string]any)
	if len(cond["comparators"].(map[string]any)) != 16 || len(cond["sections"].(map[string]any)) != 8 {
		t.Errorf("conditions defs: %v", cond)
	}
	if nodes := wantOK(t, e.admin(t, tok, "GET", "/policy/defs/pinodes", "")).([]any); len(nodes) != 1 {
		t.Errorf("pinodes: %v", nodes)
	}
	wantError(t, e.admin(t, tok, "POST", "/policy/p1", `{"scope":"admin","action":"enable","conditions":[["a","b","c"]]}`), 400, 905,
		"ERR905: Condition of policy 'p1' has 3 values, but should have 5 or 6.")
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
