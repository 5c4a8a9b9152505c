package server_test

import (
	"reflect"
	"testing"
)

func TestServiceIDAPI(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)

	id := wantOK(t, e.admin(t, tok, "POST", "/serviceid/webserver", form("description", "the web servers")))
	if id != float64(1) {
		t.Fatalf("POST /serviceid/webserver = %v; want 1", id)
	}
	if v := wantOK(t, e.admin(t, tok, "POST", "/serviceid/mail", `{"description":"mail"}`)); v != float64(2) {
		t.Fatalf("second id = %v", v)
	}
	// Update: same id, new description.
	if v := wantOK(t, e.admin(t, tok, "POST", "/serviceid/webserver", form("description", "web"))); v != id {
		t.Fatalf("update = %v; want %v", v, id)
	}
	all := map[string]any{
		"webserver": map[string]any{"description": "web", "id": float64(1)},
		"mail":      map[string]any{"description": "mail", "id": float64(2)},
	}
	for _, target := range []string{"/serviceid/", "/serviceid"} {
		if v := wantOK(t, e.admin(t, tok, "GET", target, "")); !reflect.DeepEqual(v, all) {
			t.Errorf("GET %s = %v; want %v", target, v, all)
		}
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/serviceid/mail", "")); !reflect.DeepEqual(v, map[string]any{"mail": all["mail"]}) {
		t.Errorf("GET /serviceid/mail = %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/serviceid/unknown", "")); !reflect.DeepEqual(v, map[string]any{}) {
		t.Errorf("GET /serviceid/unknown = %v; want {}", v)
	}
	// The ssh application offers the service IDs.
	apps := wantOK(t, e.admin(t, tok, "GET", "/application/", ""))
	if v := at(apps, "ssh.options.sshkey.service_id.value"); !reflect.DeepEqual(v, []any{"mail", "webserver"}) {
		t.Errorf("ssh service_id values = %v", v)
	}

	if v := wantOK(t, e.admin(t, tok, "DELETE", "/serviceid/mail", "")); v != float64(1) {
		t.Errorf("DELETE = %v; want 1", v)
	}
	wantError(t, e.admin(t, tok, "DELETE", "/serviceid/mail", ""), 404, 601, "ERR601: The requested Serviceid could not be found.")
	if v := wantOK(t, e.admin(t, tok, "GET", "/serviceid/", "")); !reflect.DeepEqual(v, map[string]any{"webserver": all["webserver"]}) {
		t.Errorf("after delete = %v", v)
	}

	// The audit has the operations with their event's action.
	a := wantOK(t, e.admin(t, tok, "GET", "/audit/?action=*serviceid*", ""))
	if n, _ := at(a, "count").(float64); n < 6 {
		t.Errorf("audit entries of the service ID calls = %v", at(a, "count"))
	}

	// Rights: only serviceid_list is granted.
	wantOK(t, e.admin(t, tok, "POST", "/policy/sid", form("scope", "admin", "action", "serviceid_list, policywrite")))
	wantError(t, e.admin(t, tok, "POST", "/serviceid/other", form("description", "x")), 403, 303,
		"ERR303: Admin actions are defined, but the action serviceid_add is not allowed!")
	wantError(t, e.admin(t, tok, "DELETE", "/serviceid/webserver", ""), 403, 303,
		"ERR303: Admin actions are defined, but the action serviceid_delete is not allowed!")
	wantOK(t, e.admin(t, tok, "GET", "/serviceid/", ""))
	if v := wantOK(t, e.admin(t, tok, "GET", "/serviceid/other", "")); !reflect.DeepEqual(v, map[string]any{}) {
		t.Errorf("a refused POST created the service ID: %v", v)
	}
}
