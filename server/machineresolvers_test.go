package server_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/testsvc"
)

func TestMachineResolverAPI(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("# machines\n192.168.0.1 gandalf g.example.com\n192.168.0.2 frodo\n::1 localhost6\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	id := wantOK(t, e.admin(t, tok, "POST", "/machineresolver/hosts1", form("type", "hosts", "filename", hosts)))
	if n, ok := id.(float64); !ok || n < 1 {
		t.Fatalf("POST /machineresolver/hosts1 = %v; want an id", id)
	}
	// JSON body, update: same id.
	if v := wantOK(t, e.admin(t, tok, "POST", "/machineresolver/hosts1", fmt.Sprintf(`{"type":"hosts","filename":%q}`, hosts))); v != id {
		t.Errorf("update = %v; want %v", v, id)
	}

	want := map[string]any{"hosts1": map[string]any{"resolvername": "hosts1", "type": "hosts", "data": map[string]any{"filename": hosts}}}
	for _, target := range []string{"/machineresolver/", "/machineresolver", "/machineresolver/?type=hosts", "/machineresolver/hosts1"} {
		if v := wantOK(t, e.admin(t, tok, "GET", target, "")); !reflect.DeepEqual(v, want) {
			t.Errorf("GET %s = %v; want %v", target, v, want)
		}
	}
	for _, target := range []string{"/machineresolver/?type=ldap", "/machineresolver/unknown"} {
		if v := wantOK(t, e.admin(t, tok, "GET", target, "")); !reflect.DeepEqual(v, map[string]any{}) {
			t.Errorf("GET %s = %v; want {}", target, v)
		}
	}

	// Bad input.
	wantError(t, e.admin(t, tok, "POST", "/machineresolver/hosts1", form("type", "ldap", "LDAPURI", "ldap://127.0.0.1", "LDAPBASE", "dc=x", "HOSTNAMEATTRIBUTE", "cn")),
		400, 905, "ERR905: machine resolver with similar name and other type already exists: hosts1")
	wantError(t, e.admin(t, tok, "POST", "/machineresolver/h2", form("filename", hosts)), 400, 905, "ERR905: Missing parameter: type")
	r := e.admin(t, tok, "POST", "/machineresolver/h2", form("type", "hosts", "filename", filepath.Join(dir, "missing")))
	if r.status != 400 || !strings.Contains(fmt.Sprint(at(r.json, "result.error.message")), "does not exist") {
		t.Errorf("missing hosts file: %d %s", r.status, r.body)
	}

	// Test: hosts is not implemented.
	r = e.admin(t, tok, "POST", "/machineresolver/test", form("type", "hosts", "filename", hosts))
	if v := wantOK(t, r); v != false || at(r.json, "detail.description") != "Not Implemented" {
		t.Errorf("POST /machineresolver/test = %s", r.body)
	}

	// Machines.
	gandalf := map[string]any{"id": "192.168.0.1", "hostname": []any{"gandalf", "g.example.com"}, "ip": "192.168.0.1", "resolver_name": "hosts1"}
	for _, c := range []struct {
		query string
		want  []any
	}{
		{"hostname=example", []any{gandalf}},
		{"ip=192.168.0.1", []any{gandalf}},
		{"id=168.0.1", []any{gandalf}},
		{"any=g.ex", []any{gandalf}},
		{"resolver=nope", []any{}},
		{"hostname=sauron", []any{}},
	} {
		if v := wantOK(t, e.admin(t, tok, "GET", "/machine/?"+c.query, "")); !reflect.DeepEqual(v, c.want) {
			t.Errorf("GET /machine/?%s = %v; want %v", c.query, v, c.want)
		}
	}
	for _, q := range []string{"", "ip=not-an-ip", "resolver=host"} {
		if v, _ := wantOK(t, e.admin(t, tok, "GET", "/machine/?"+q, "")).([]any); len(v) != 3 {
			t.Errorf("GET /machine/?%s = %v; want 3 machines", q, v)
		}
	}

	// Delete.
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/machineresolver/hosts1", "")); v != id {
		t.Errorf("DELETE = %v; want %v", v, id)
	}
	wantError(t, e.admin(t, tok, "DELETE", "/machineresolver/hosts1", ""), 404, 601, "ERR601: The requested MachineResolver could not be found.")
	if v := wantOK(t, e.admin(t, tok, "GET", "/machine/", "")); !reflect.DeepEqual(v, []any{}) {
		t.Errorf("GET /machine/ after delete = %v", v)
	}

	// The changes are audited.
	audit := wantOK(t, e.admin(t, tok, "GET", "/audit/?action="+url.QueryEscape("*machineresolver*"), ""))
	if n := at(audit, "count"); n == nil || n.(float64) < 3 {
		t.Errorf("audit of the machine resolver changes: %v", audit)
	}
}

func TestMachineResolverLDAPAPI(t *testing.T) {
	s := testsvc.Slapd(t)
	s.AddLDIF(t, "dn: ou=computers,dc=example,dc=org\nobjectClass: organizationalUnit\nou: computers\n\n"+
		"dn: cn=gandalf,ou=computers,dc=example,dc=org\nobjectClass: device\nobjectClass: ipHost\ncn: gandalf\nipHostNumber: 192.168.0.1\n")
	e := newEnv(t)
	tok := e.login(t)
	def := func(pw string, extra ...string) string {
		return form(append([]string{"type", "ldap", "LDAPURI", s.URL, "LDAPBASE", "ou=computers,dc=example,dc=org", "BINDDN", s.BindDN, "BINDPW", pw,
			"HOSTNAMEATTRIBUTE", "cn", "IPATTRIBUTE", "ipHostNumber", "SEARCHFILTER", "(objectClass=device)"}, extra...)...)
	}
	wantOK(t, e.admin(t, tok, "POST", "/machineresolver/ldap1", def(s.BindPW)))
	r := e.admin(t, tok, "GET", "/machineresolver/ldap1", "")
	if v := at(wantOK(t, r), "ldap1.data.BINDPW"); v != "__CENSORED__" {
		t.Errorf("BINDPW = %v", v)
	}
	if strings.Contains(string(r.body), s.BindPW) {
		t.Error("the bind password was returned")
	}
	v := wantOK(t, e.admin(t, tok, "GET", "/machine/?hostname=gand", ""))
	want := []any{map[string]any{"id": "cn=gandalf,ou=computers,dc=example,dc=org", "hostname": []any{"gandalf"}, "ip": "192.168.0.1", "resolver_name": "ldap1"}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("GET /machine/ = %v; want %v", v, want)
	}
	// Test with the stored password standing in for the censored one.
	r = e.admin(t, tok, "POST", "/machineresolver/test", def("__CENSORED__", "resolver", "ldap1"))
	if wantOK(t, r) != true || at(r.json, "detail.description") != "Your LDAP config seems to be OK, 1 machine objects found." {
		t.Errorf("test = %s", r.body)
	}
}
