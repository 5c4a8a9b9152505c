package main

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeFileRootOtherFiles: the binary's default roots also confine
// the other files an administrator names (catalogue B7): an LDAP
// resolver's TLS_CA_FILE, a SQLite resolver's Database (ERR907) and an
// SMTP server's S/MIME key (ERR905) naming the enckey, a symlink to it in
// files/ or /etc/shadow are refused with the rule; nothing is stored.
func TestServeFileRootOtherFiles(t *testing.T) {
	dir := shortDir(t)
	addr, jwt := serveFor(t, map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled"})
	enckey := filepath.Join(dir, "enckey")
	link := filepath.Join(dir, "files", "keylink")
	if err := os.Symlink(enckey, link); err != nil {
		t.Fatal(err)
	}
	outside := "is outside the allowed directories"
	inData := "is in the server's data directory"
	refused := func(what, path string, v url.Values, code float64, want string) {
		t.Helper()
		status, m := apiCall(t, http.MethodPost, addr, path, jwt, v)
		result, _ := m["result"].(map[string]any)
		e, _ := result["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if status != http.StatusBadRequest || e["code"] != code || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %v; want ERR%v with %q", what, status, m, code, want)
		}
	}
	for _, tc := range []struct{ file, want string }{
		{enckey, "The file " + enckey + " " + inData},
		{link, "The file " + link + " " + inData},
		{"/etc/shadow", "The file /etc/shadow " + outside},
	} {
		refused("LDAP TLS_CA_FILE "+tc.file, "/resolver/ldap1", url.Values{"type": {"ldapresolver"}, "LDAPURI": {"ldaps://127.0.0.1:1"},
			"LDAPBASE": {"dc=x"}, "LOGINNAMEATTRIBUTE": {"uid"}, "TLS_CA_FILE": {tc.file}}, 907, tc.want)
		refused("SQLite Database "+tc.file, "/resolver/sql1", url.Values{"type": {"sqlresolver"}, "Driver": {"sqlite"},
			"Database": {tc.file}, "Table": {"users"}, "Map": {`{"username": "login", "userid": "id"}`}}, 907, tc.want)
		refused("S/MIME key "+tc.file, "/smtpserver/mail1", url.Values{"server": {"127.0.0.1"}, "sender": {"a@example.org"},
			"smime": {"1"}, "private_key": {tc.file}, "certificate": {filepath.Join(dir, "files", "cert.pem")}}, 905, tc.want)
	}
	for _, path := range []string{"/resolver/", "/smtpserver/"} {
		_, m := apiCall(t, http.MethodGet, addr, path, jwt, nil)
		result, _ := m["result"].(map[string]any)
		if v, _ := result["value"].(map[string]any); len(v) != 0 {
			t.Errorf("GET %s after the refusals: %v", path, v)
		}
	}
}
