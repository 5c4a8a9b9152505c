package server_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// mtSSHKey is an authorized_keys line of a key made from seed.
func mtSSHKey(t *testing.T, seed byte, comment string) string {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) + " " + comment
}

// mtRaw is an admin request whose answer may hold the nulls privacyIDEA
// sends in machine token lists and authentication items (no real client
// reads them with a typed getter).
func (e *env) mtRaw(t *testing.T, tok, method, target, body string) reply {
	t.Helper()
	ctype := ""
	if body != "" {
		ctype = formType
		if strings.HasPrefix(body, "{") {
			ctype = "application/json"
		}
	}
	return e.do(t, method, target, ctype, body, map[string]string{"Authorization": tok})
}

// mtEnv is a token env with the hosts resolver hosts1 (gandalf,
// frodo), an sshkey token of alice, an unassigned sshkey token and a
// UBOM TOTP token with the RFC 6238 SHA-1 key.
func mtEnv(t *testing.T) (e *env, tok, aliceKey, bobKey string) {
	t.Helper()
	e, tok = tokenEnv(t)
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("192.168.0.1 gandalf g.example.com\n192.168.0.2 frodo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantOK(t, e.admin(t, tok, "POST", "/machineresolver/hosts1", form("type", "hosts", "filename", hosts)))
	aliceKey, bobKey = mtSSHKey(t, 1, "alice@laptop"), mtSSHKey(t, 2, "bob@desk")
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "sshkey", "serial", "SSHK1", "sshkey", aliceKey, "user", "alice", "realm", "realm1")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "sshkey", "serial", "SSHK2", "sshkey", bobKey)))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "totp", "serial", "UBOM1", "otpkey", hex.EncodeToString([]byte("12345678901234567890")))))
	return e, tok, aliceKey, bobKey
}

func TestMachineTokenAPI(t *testing.T) {
	e, tok, aliceKey, bobKey := mtEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/serviceid/webserver", form("description", "web")))

	// Attach: machine-less with a service ID (resolver ""), by hostname, by
	// machine id and resolver, and as JSON.
	sshID := wantOK(t, e.admin(t, tok, "POST", "/machine/token", form("serial", "SSHK1", "application", "ssh", "resolver", "",
		"service_id", "webserver", "user", "root")))
	bobID := wantOK(t, e.admin(t, tok, "POST", "/machine/token", `{"serial":"SSHK2","application":"ssh","service_id":"webserver","user":"admin"}`))
	luksID := wantOK(t, e.admin(t, tok, "POST", "/machine/token", form("serial", "UBOM1", "application", "luks", "hostname", "gandalf",
		"slot", "1", "partition", "/dev/sdb1")))
	frodoID := wantOK(t, e.admin(t, tok, "POST", "/machine/token", form("serial", "UBOM1", "application", "luks", "machineid", "192.168.0.2", "resolver", "hosts1")))
	for _, id := range []any{sshID, bobID, luksID, frodoID} {
		if n, ok := id.(float64); !ok || n < 1 {
			t.Fatalf("attach answered %v; want an id", id)
		}
	}

	// Errors of an attach.
	wantError(t, e.admin(t, tok, "POST", "/machine/token", form("serial", "NOPE", "application", "ssh")), 404, 601,
		"ERR601: Token with serial NOPE does not exist.")
	r := e.admin(t, tok, "POST", "/machine/token", form("serial", "SSHK1", "application", "vpn"))
	if msg, _ := at(r.json, "result.error.message").(string); r.status != 400 ||
		!strings.HasPrefix(msg, "ERR905: Application vpn is not supported. Valid applications are dict_keys([") ||
		!strings.Contains(msg, "'luks'") || !strings.Contains(msg, "'ssh'") || !strings.HasSuffix(msg, "]).") {
		t.Errorf("unknown application = %d %s", r.status, r.body)
	}
	wantError(t, e.admin(t, tok, "POST", "/machine/token", form("serial", "SSHK1")), 400, 905, "ERR905: Missing parameter: application")
	r = e.admin(t, tok, "POST", "/machine/token", form("serial", "SSHK1", "application", "ssh", "hostname", "nowhere"))
	if r.status != 400 || at(r.json, "result.error.code") != float64(905) {
		t.Errorf("unknown hostname = %d %s", r.status, r.body)
	}

	// The machines of one token.
	v := wantOK(t, e.admin(t, tok, "GET", "/machine/token?serial=UBOM1", ""))
	want := []any{
		map[string]any{"machine_id": "192.168.0.1", "hostname": "gandalf", "application": "luks", "resolver": "hosts1",
			"options": map[string]any{"slot": "1", "partition": "/dev/sdb1"}, "id": luksID, "serial": "UBOM1"},
		map[string]any{"machine_id": "192.168.0.2", "hostname": "frodo", "application": "luks", "resolver": "hosts1",
			"options": map[string]any{}, "id": frodoID, "serial": "UBOM1"},
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("GET /machine/token?serial=UBOM1 = %v;\nwant %v", v, want)
	}
	v = wantOK(t, e.admin(t, tok, "GET", "/machine/token/?serial=SSHK1", ""))
	want = []any{map[string]any{"machine_id": "any machine", "hostname": "any host", "application": "ssh", "resolver": "no resolver",
		"options": map[string]any{"service_id": "webserver", "user": "root"}, "id": sshID, "serial": "SSHK1"}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("GET /machine/token?serial=SSHK1 = %v", v)
	}
	wantError(t, e.admin(t, tok, "GET", "/machine/token?serial=NOPE", ""), 404, 601, "ERR601: The requested Token could not be found.")

	// The tokens of a machine: machine_id and resolver echo the machine.
	v = wantOK(t, e.mtRaw(t, tok, "GET", "/machine/token?hostname=gandalf", ""))
	want = []any{map[string]any{"serial": "UBOM1", "machine_id": "192.168.0.1", "resolver": "hosts1", "type": "totp", "application": "luks",
		"id": luksID, "options": map[string]any{"slot": "1", "partition": "/dev/sdb1"}}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("GET /machine/token?hostname=gandalf = %v", v)
	}
	// A service_id filter overrules the machine; no machine gives nulls.
	v = wantOK(t, e.mtRaw(t, tok, "GET", "/machine/token?hostname=gandalf&service_id=webserver&user=root", ""))
	want = []any{map[string]any{"serial": "SSHK1", "machine_id": nil, "resolver": nil, "type": "sshkey", "application": "ssh",
		"id": sshID, "options": map[string]any{"service_id": "webserver", "user": "root"}}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("GET /machine/token?service_id=webserver&user=root = %v", v)
	}
	serials := func(target string) string {
		t.Helper()
		list, _ := wantOK(t, e.mtRaw(t, tok, "GET", target, "")).([]any)
		var out []string
		for _, it := range list {
			out = append(out, fmt.Sprint(at(it, "serial"), "/", at(it, "application")))
		}
		return strings.Join(out, " ")
	}
	for target, want := range map[string]string{
		"/machine/token?application=ssh":                              "SSHK1/ssh SSHK2/ssh",
		"/machine/token?application=ssh&sortdir=desc":                 "SSHK2/ssh SSHK1/ssh",
		"/machine/token?application=ssh&sortby=user":                  "SSHK2/ssh SSHK1/ssh",
		"/machine/token?application=ssh&sortby=user&sortdir=desc":     "SSHK1/ssh SSHK2/ssh",
		"/machine/token?serial=sshk*":                                 "SSHK1/ssh SSHK2/ssh",
		"/machine/token?serial=ubom*&application=luks&page=2":         "UBOM1/luks UBOM1/luks",
		"/machine/token?user=AD*":                                     "SSHK2/ssh",
		"/machine/token?machineid=any%20machine&resolver=no+resolver": "SSHK1/ssh SSHK2/ssh UBOM1/luks UBOM1/luks",
		"/machine/token?machineid=192.168.0.2&resolver=hosts1":        "UBOM1/luks",
		"/machine/token?service_id=nothing":                           "",
	} {
		if got := serials(target); got != want {
			t.Errorf("GET %s = %q; want %q", target, got, want)
		}
	}

	// Options: set by id, delete by an empty value.
	v = wantOK(t, e.admin(t, tok, "POST", "/machine/tokenoption", form("mtid", fmt.Sprint(bobID), "user", "bob", "extra", "x")))
	if !reflect.DeepEqual(v, map[string]any{"added": float64(2), "deleted": float64(0)}) {
		t.Errorf("tokenoption = %v", v)
	}
	v = wantOK(t, e.admin(t, tok, "POST", "/machine/tokenoption", form("hostname", "gandalf", "serial", "UBOM1", "application", "luks",
		"slot", "2", "partition", "")))
	if !reflect.DeepEqual(v, map[string]any{"added": float64(1), "deleted": float64(1)}) {
		t.Errorf("tokenoption by host = %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/machine/token?serial=UBOM1", "")); !reflect.DeepEqual(at(v.([]any)[0], "options"), map[string]any{"slot": "2"}) {
		t.Errorf("options after the change = %v", at(v.([]any)[0], "options"))
	}
	wantError(t, e.admin(t, tok, "POST", "/machine/tokenoption", form("mtid", "999", "x", "y")), 404, 601,
		"ERR601: The requested MachineToken could not be found.")
	wantError(t, e.admin(t, tok, "POST", "/machine/tokenoption", form("hostname", "gandalf", "x", "y")), 400, 905,
		"ERR905: Missing parameter: serial")

	// SSH items for the service ID and a login.
	items := wantOK(t, e.mtRaw(t, tok, "GET", "/machine/authitem/ssh?hostname=anyhost&service_id=webserver&user=root", ""))
	wantItems := map[string]any{"ssh": []any{map[string]any{"sshkey": aliceKey, "username": "alice", "user": "root",
		"service_id": "webserver", "serial": nil}}}
	if !reflect.DeepEqual(items, wantItems) {
		t.Errorf("ssh items = %v;\nwant %v", items, wantItems)
	}
	items = wantOK(t, e.mtRaw(t, tok, "GET", "/machine/authitem/ssh?hostname=anyhost&service_id=webserver&user=bob", ""))
	if got := at(items, "ssh"); len(got.([]any)) != 1 || at(got.([]any)[0], "sshkey") != bobKey || at(got.([]any)[0], "username") != nil {
		t.Errorf("bob's items = %v", items)
	}
	if v := wantOK(t, e.mtRaw(t, tok, "GET", "/machine/authitem/ssh?hostname=anyhost&service_id=webserver&user=nobody", "")); !reflect.DeepEqual(v, map[string]any{}) {
		t.Errorf("no key for nobody: %v", v)
	}
	// A disabled token hands out no key.
	wantOK(t, e.admin(t, tok, "POST", "/token/disable", form("serial", "SSHK1")))
	if v := wantOK(t, e.mtRaw(t, tok, "GET", "/machine/authitem/ssh?hostname=anyhost&service_id=webserver&user=root", "")); !reflect.DeepEqual(v, map[string]any{}) {
		t.Errorf("items of a disabled token = %v", v)
	}
	wantOK(t, e.admin(t, tok, "POST", "/token/enable", form("serial", "SSHK1")))

	// LUKS items of gandalf: the HMAC-SHA1 of the challenge under the
	// token's key.
	key := []byte("12345678901234567890")
	hmacHex := func(challenge []byte) string {
		m := hmac.New(sha1.New, key)
		m.Write(challenge)
		return hex.EncodeToString(m.Sum(nil))
	}
	items = wantOK(t, e.mtRaw(t, tok, "GET", "/machine/authitem?hostname=gandalf", ""))
	luks, _ := at(items, "luks").([]any)
	if len(luks) != 1 || len(items.(map[string]any)) != 1 {
		t.Fatalf("gandalf's items = %v", items)
	}
	ch, _ := at(luks[0], "challenge").(string)
	chBytes, err := hex.DecodeString(ch)
	if err != nil || len(chBytes) != 32 || at(luks[0], "response") != hmacHex(chBytes) || at(luks[0], "slot") != "2" {
		t.Errorf("luks item = %v", luks[0])
	}
	items = wantOK(t, e.mtRaw(t, tok, "GET", "/machine/authitem/luks?hostname=g.example.com&challenge=0102ff&serial=UBOM1", ""))
	if it := at(items, "luks").([]any)[0]; at(it, "challenge") != "0102ff" || at(it, "response") != hmacHex([]byte{1, 2, 0xff}) || at(it, "serial") != "UBOM1" {
		t.Errorf("luks item with challenge = %v", it)
	}
	wantError(t, e.admin(t, tok, "GET", "/machine/authitem?hostname=gandalf&challenge=zz", ""), 400, 905,
		"ERR905: The challenge must be hexadecimal, at most 128 digits.")
	wantError(t, e.admin(t, tok, "GET", "/machine/authitem/ssh", ""), 400, 905, "ERR905: Missing parameter: hostname")
	if v := wantOK(t, e.mtRaw(t, tok, "GET", "/machine/authitem/ssh?hostname=frodo", "")); !reflect.DeepEqual(v, map[string]any{}) {
		t.Errorf("frodo's ssh items = %v", v)
	}

	// Detach: by serial, application and id; by machine; privacyideaadm's
	// deltoken and deloption.
	if v := wantOK(t, e.admin(t, tok, "DELETE", fmt.Sprintf("/machine/token/SSHK2/ssh/%v", bobID), "")); v != float64(1) {
		t.Errorf("detach by id = %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/machine/token/UBOM1/192.168.0.2/hosts1/luks", "")); v != float64(1) {
		t.Errorf("detach by machine = %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/machine/token/UBOM1/192.168.0.2/hosts1/luks", "")); v != float64(0) {
		t.Errorf("second detach = %v", v)
	}
	wantError(t, e.admin(t, tok, "DELETE", "/machine/token/UBOM1/luks/abc", ""), 400, 905,
		"ERR905: The machine token id must be a positive integer.")
	if v := wantOK(t, e.admin(t, tok, "POST", "/machine/deloption", form("name", "gandalf", "serial", "UBOM1", "application", "luks", "key", "slot"))); v != float64(1) {
		t.Errorf("deloption = %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/machine/token?serial=UBOM1", "")); !reflect.DeepEqual(at(v.([]any)[0], "options"), map[string]any{}) {
		t.Errorf("options after deloption = %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "POST", "/machine/deltoken", form("name", "gandalf", "serial", "UBOM1", "application", "luks"))); v != float64(1) {
		t.Errorf("deltoken = %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/machine/token?serial=UBOM1", "")); !reflect.DeepEqual(v, []any{}) {
		t.Errorf("after deltoken = %v", v)
	}
	// Machine-less bindings with the placeholders.
	wantOK(t, e.admin(t, tok, "POST", "/machine/token", form("serial", "SSHK2", "application", "ssh", "service_id", "other")))
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/machine/token/SSHK2/"+url.PathEscape("any machine")+"/"+url.PathEscape("no resolver")+"/ssh", "")); v != float64(1) {
		t.Errorf("detach any machine = %v", v)
	}

	// Deleting a token drops its machine tokens.
	wantOK(t, e.admin(t, tok, "DELETE", "/token/SSHK1", ""))
	if got := serials("/machine/token?application=ssh"); got != "" {
		t.Errorf("machine tokens of a deleted token: %q", got)
	}
	// A new token of the same serial starts without them.
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "sshkey", "serial", "SSHK1", "sshkey", aliceKey)))
	if v := wantOK(t, e.admin(t, tok, "GET", "/machine/token?serial=SSHK1", "")); !reflect.DeepEqual(v, []any{}) {
		t.Errorf("the new token inherited %v", v)
	}
}

func TestApplicationAPI(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	v := wantOK(t, e.admin(t, tok, "GET", "/application/", ""))
	wantLUKS := map[string]any{"options": map[string]any{"totp": map[string]any{
		"slot":      map[string]any{"type": "int", "value": []any{0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0}},
		"partition": map[string]any{"type": "str"},
	}}}
	if !reflect.DeepEqual(at(v, "luks"), wantLUKS) {
		t.Errorf("luks = %v", at(v, "luks"))
	}
	ssh := at(v, "ssh.options.sshkey").(map[string]any)
	if len(ssh) != 2 || at(ssh, "user.type") != "str" || at(ssh, "service_id.type") != "str" ||
		!reflect.DeepEqual(at(ssh, "service_id.value"), []any{}) || at(ssh, "user.description") == "" {
		t.Errorf("ssh = %v", ssh)
	}
	if _, ok := at(v, "ssh.options").(map[string]any)["sshkey"]; !ok {
		t.Errorf("ssh options = %v", at(v, "ssh.options"))
	}
	wantOK(t, e.admin(t, tok, "GET", "/application", ""))
}

func TestMachineTokenRights(t *testing.T) {
	e, tok, _, _ := mtEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/policy/mt", form("scope", "admin", "action", "fetch_authentication_items, policywrite")))
	wantError(t, e.admin(t, tok, "POST", "/machine/token", form("serial", "SSHK1", "application", "ssh", "service_id", "web")), 403, 303,
		"ERR303: Admin actions are defined, but the action manage_machine_tokens is not allowed!")
	wantError(t, e.admin(t, tok, "GET", "/machine/token?serial=SSHK1", ""), 403, 303,
		"ERR303: Admin actions are defined, but the action manage_machine_tokens is not allowed!")
	wantOK(t, e.mtRaw(t, tok, "GET", "/machine/authitem?hostname=gandalf", ""))
	wantOK(t, e.admin(t, tok, "POST", "/policy/mt", form("scope", "admin", "action", "manage_machine_tokens, policywrite")))
	wantError(t, e.admin(t, tok, "GET", "/machine/authitem?hostname=gandalf", ""), 403, 303,
		"ERR303: Admin actions are defined, but the action fetch_authentication_items is not allowed!")
	wantOK(t, e.admin(t, tok, "POST", "/machine/token", form("serial", "SSHK1", "application", "ssh", "service_id", "web")))
}
