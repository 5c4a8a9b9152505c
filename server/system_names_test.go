package server_test

import (
	"strings"
	"testing"
)

// TestSystemNames: GET /system/names/caconnector lists the CA connectors
// without their configuration and /system/names/radius the RADIUS server
// identifiers, each behind the right to enroll that token type.
func TestSystemNames(t *testing.T) {
	e, tok, ca := caEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/radiusserver/rad1", form("server", "127.0.0.1", "secret", "s3cret")))

	list := wantOK(t, e.admin(t, tok, "GET", "/system/names/caconnector", "")).([]any)
	if len(list) != 1 || at(list[0], "connectorname") != "localca" || at(list[0], "type") != "local" ||
		at(list[0], "templates.user.days") != float64(30) {
		t.Fatalf("GET /system/names/caconnector = %v", list)
	}
	if _, has := list[0].(map[string]any)["data"]; has {
		t.Errorf("the connector's configuration is listed: %v", list[0])
	}
	r := e.admin(t, tok, "GET", "/system/names/caconnector", "")
	if strings.Contains(string(r.body), ca.KeyPath) {
		t.Errorf("the CA key path is in the answer: %s", r.body)
	}
	names := wantOK(t, e.admin(t, tok, "GET", "/system/names/radius", "")).([]any)
	if len(names) != 1 || names[0] != "rad1" {
		t.Errorf("GET /system/names/radius = %v", names)
	}
	wantError(t, e.admin(t, tok, "GET", "/system/names/other", ""), 404, 601, "ERR601: The requested URL was not found on the server.")

	// With admin policies that grant something else, both are refused.
	wantOK(t, e.admin(t, tok, "POST", "/policy/admins", form("scope", "admin", "action", "tokenlist")))
	wantError(t, e.admin(t, tok, "GET", "/system/names/caconnector", ""), 403, 303,
		"ERR303: Admin actions are defined, but the action enrollCERTIFICATE is not allowed!")
	wantError(t, e.admin(t, tok, "GET", "/system/names/radius", ""), 403, 303,
		"ERR303: Admin actions are defined, but the action enrollRADIUS is not allowed!")
}
