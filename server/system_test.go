package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/server"
)

// systemEnv is a server on the data directory dir with the admin
// "admin", served through server.New.
func systemEnv(t *testing.T, dir string) (*authsrv.Server, http.Handler) {
	t.Helper()
	s, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithKDFParams(cheapKDF))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if ok, err := s.Admins().Exists(t.Context(), "admin"); err != nil {
		t.Fatal(err)
	} else if !ok {
		if err := s.Admins().Add(t.Context(), "admin", adminPass); err != nil {
			t.Fatal(err)
		}
	}
	return s, server.New(s)
}

// enrolledOTPLen enrolls an HOTP token without otplen over HTTP and
// returns the otplen the token list shows (and the URL's digits).
func enrolledOTPLen(t *testing.T, e *env, tok, serial string) any {
	t.Helper()
	r := e.admin(t, tok, "POST", "/token/init", form("type", "hotp", "genkey", "1", "serial", serial))
	wantOK(t, r)
	list := wantOK(t, e.admin(t, tok, "GET", "/token/?serial="+serial, ""))
	toks, _ := at(list, "tokens").([]any)
	if len(toks) != 1 {
		t.Fatalf("token list: %v", list)
	}
	n := toks[0].(map[string]any)["otplen"]
	// The QR code the user scans has the token's length.
	if u, _ := at(r.json, "detail.googleurl.value").(string); !strings.Contains(u, fmt.Sprintf("&digits=%v&", n)) {
		t.Errorf("otpauth URL %s does not have the token's %v digits", u, n)
	}
	return n
}

// TestSystemSetConfigOTPLen is the "done when": DefaultOtpLen=8
// with POST /system/setConfig makes the next /token/init 8 digits on the
// running server, and on a new server opened on the same data directory.
func TestSystemSetConfigOTPLen(t *testing.T) {
	dir := t.TempDir()
	s, h := systemEnv(t, dir)
	e := &env{s: s, h: h}
	tok := e.login(t)
	if n := enrolledOTPLen(t, e, tok, "HOTPA"); n != float64(6) {
		t.Fatalf("otplen before = %v", n)
	}
	v := wantOK(t, e.admin(t, tok, "POST", "/system/setConfig", form("DefaultOtpLen", "8")))
	if at(v, "DefaultOtpLen") != "insert" {
		t.Errorf("setConfig value = %v", v)
	}
	if n := enrolledOTPLen(t, e, tok, "HOTPB"); n != float64(8) {
		t.Errorf("otplen on the running server = %v, want 8", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, h2 := systemEnv(t, dir)
	e2 := &env{s: s2, h: h2}
	tok2 := e2.login(t)
	if n := enrolledOTPLen(t, e2, tok2, "HOTPC"); n != float64(8) {
		t.Errorf("otplen on the restarted server = %v, want 8", n)
	}
	if v := wantOK(t, e2.admin(t, tok2, "GET", "/system/DefaultOtpLen", "")); v != "8" {
		t.Errorf("GET /system/DefaultOtpLen = %v", v)
	}
}

// TestSystemEndpoints: GET /system/ lists the settings as strings; a key
// reads one value; setConfig takes JSON and companions and answers
// insert/update; bad input is a 400 naming the problem and changes
// nothing; DELETE answers true, then 0; users read the public settings
// only and write nothing; /system/random answers random hex.
func TestSystemEndpoints(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes())})
	tok := e.login(t)
	all := wantOK(t, e.admin(t, tok, "GET", "/system/", "")).(map[string]any)
	for k, want := range map[string]string{"DefaultOtpLen": "6", "PrependPin": "True", "splitAtSign": "True",
		"DefaultMaxFailCount": "10", "totp.hashlib": "sha1", "failcounter_clear_timeout": "0", "email.identifier": ""} {
		if all[k] != want {
			t.Errorf("GET /system/ %s = %#v, want %q", k, all[k], want)
		}
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/system/?key=AutoResync", "")); v != "False" {
		t.Errorf("?key=AutoResync = %v", v)
	}
	if r := e.do(t, "GET", "/system/NoSuchKey", "", "", map[string]string{"Authorization": tok}); r.status != 200 || at(r.json, "result.value") != nil {
		t.Errorf("unknown key read: %d %s", r.status, r.body)
	}

	v := wantOK(t, e.admin(t, tok, "POST", "/system/setConfig", `{"splitAtSign": false, "totp.hashlib": "sha256", "totp.hashlib.desc": "hash of TOTP", "DefaultSyncWindow": 500}`))
	if m := v.(map[string]any); m["splitAtSign"] != "insert" || m["totp.hashlib"] != "insert" || m["DefaultSyncWindow"] != "insert" || len(m) != 3 {
		t.Errorf("setConfig = %v", v)
	}
	v = wantOK(t, e.admin(t, tok, "POST", "/system/setConfig", form("splitAtSign", "True")))
	if at(v, "splitAtSign") != "update" {
		t.Errorf("second setConfig = %v", v)
	}
	all = wantOK(t, e.admin(t, tok, "GET", "/system/", "")).(map[string]any)
	if all["splitAtSign"] != "True" || all["totp.hashlib"] != "sha256" || all["DefaultSyncWindow"] != "500" {
		t.Errorf("after setConfig: %v", all)
	}
	// A Go caller through the library gets the same settings.
	list, err := e.s.Ops().SystemSettings(t.Context(), caller.Caller{Role: caller.Admin, Name: "admin"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(all) {
		t.Errorf("Ops lists %d settings, HTTP %d", len(list), len(all))
	}
	for _, st := range list {
		if all[st.Name] != st.Value {
			t.Errorf("%s: Ops %q, HTTP %v", st.Name, st.Value, all[st.Name])
		}
	}

	for _, tc := range []struct{ body, msg string }{
		{form("DefaultOtpLength", "8"), `ERR905: Unknown system configuration key: "DefaultOtpLength".`},
		{form("DefaultCountWindow", "ten"), "ERR905: The value of DefaultCountWindow must be an integer."},
		{form("DefaultMaxFailCount", "-1"), "ERR905: The value of DefaultMaxFailCount must be between 1 and 1000000."},
		{form("DefaultOtpLen", "7"), "ERR905: The value of DefaultOtpLen must be one of 6, 8."},
		{form("hotp.hashlib", "md5"), "ERR905: The value of hotp.hashlib must be one of sha1, sha256, sha512."},
		{form("DefaultOtpLen", "8", "DefaultSyncWindow", "x"), "ERR905: The value of DefaultSyncWindow must be an integer."},
		{"", "ERR905: No system configuration key was given."},
	} {
		wantError(t, e.admin(t, tok, "POST", "/system/setConfig", tc.body), 400, 905, tc.msg)
	}
	if all2 := wantOK(t, e.admin(t, tok, "GET", "/system/", "")).(map[string]any); all2["DefaultOtpLen"] != "6" || all2["DefaultSyncWindow"] != "500" {
		t.Errorf("bad input changed the settings: %v", all2)
	}

	wantError(t, e.admin(t, tok, "POST", "/system/setDefault", form("foo", "1")), 400, 77,
		"ERR77: Usage: parameters are: DefaultMaxFailCount, DefaultSyncWindow, DefaultCountWindow, DefaultOtpLen, DefaultResetFailCount")
	if v := wantOK(t, e.admin(t, tok, "POST", "/system/setDefault", form("defaultmaxfailcount", "20"))); at(v, "DefaultMaxFailCount") != "insert" {
		t.Errorf("setDefault = %v", v)
	}

	if v := wantOK(t, e.admin(t, tok, "DELETE", "/system/DefaultSyncWindow", "")); v != true {
		t.Errorf("DELETE = %v, want true", v)
	}
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/system/DefaultSyncWindow", "")); v != float64(0) {
		t.Errorf("second DELETE = %v, want 0", v)
	}
	wantError(t, e.admin(t, tok, "DELETE", "/system/NoSuchKey", ""), 400, 905, `ERR905: Unknown system configuration key: "NoSuchKey".`)
	if v := wantOK(t, e.admin(t, tok, "GET", "/system/DefaultSyncWindow", "")); v != "1000" {
		t.Errorf("after DELETE = %v, want the default", v)
	}

	rnd, _ := wantOK(t, e.admin(t, tok, "GET", "/system/random?len=16", "")).(string)
	if len(rnd) != 32 || strings.Trim(rnd, "0123456789abcdef") != "" {
		t.Errorf("random = %q", rnd)
	}
	if r := wantOK(t, e.admin(t, tok, "GET", "/system/random?len=3&encode=b64", "")); r != nil && len(r.(string)) != 4 {
		t.Errorf("b64 random = %v", r)
	}

	// A user reads the public settings only and writes nothing.
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", "type=memresolver&Editable=True"))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", "resolvers=mem1"))
	wantOK(t, e.admin(t, tok, "POST", "/user/", form("user", "carol", "resolver", "mem1", "password", "c4rol-pass")))
	utok := tokenOf(t, e.loginAs(t, "carol@realm1", "c4rol-pass"))
	pub := wantOK(t, e.admin(t, utok, "GET", "/system/", "")).(map[string]any)
	if len(pub) != 4 || pub["PrependPin"] != "True" || pub["splitAtSign"] != "True" || pub["IncFailCountOnFalsePin"] != "True" || pub["ReturnSamlAttributes"] != "True" {
		t.Errorf("a user reads %v", pub)
	}
	if r := e.do(t, "GET", "/system/DefaultOtpLen", "", "", map[string]string{"Authorization": utok}); r.status != 200 || at(r.json, "result.value") != nil {
		t.Errorf("a user reads DefaultOtpLen: %s", r.body)
	}
	wantError(t, e.admin(t, utok, "POST", "/system/setConfig", form("PrependPin", "0")), 401, 4306,
		"ERR4306: Authentication failure. You do not have the necessary role (['admin']) to access this resource!")
	wantError(t, e.admin(t, utok, "DELETE", "/system/PrependPin", ""), 401, 4306,
		"ERR4306: Authentication failure. You do not have the necessary role (['admin']) to access this resource!")
}
