package server_test

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"

	"github.com/authsrv/authsrv"
)

const rfcKeyHex = "3132333435363738393031323334353637383930"

var rfcHOTP = []string{"755224", "287082", "359152", "969429", "338314", "254676", "287922", "162583", "399871", "520489"}

// tokenEnv is an env with realm1 (mem1: alice, bob, …) as default realm.
func tokenEnv(t *testing.T) (*env, string) {
	t.Helper()
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes())})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem2", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm2", form("resolvers", "mem2")))
	return e, tok
}

func userLogin(t *testing.T, e *env, login, pw string) string {
	t.Helper()
	r := e.do(t, "POST", "/auth", formType, form("username", login, "password", pw), nil)
	tok, _ := at(r.json, "result.value.token").(string)
	if r.status != 200 || tok == "" {
		t.Fatalf("login %s: %d %s", login, r.status, r.body)
	}
	return tok
}

func listOne(t *testing.T, e *env, tok, serial string) map[string]any {
	t.Helper()
	v := wantOK(t, e.admin(t, tok, "GET", "/token/?serial="+serial, "")).(map[string]any)
	list := v["tokens"].([]any)
	if len(list) != 1 {
		t.Fatalf("GET /token/?serial=%s: %v", serial, v)
	}
	return list[0].(map[string]any)
}

func TestTokenLifecycleAPI(t *testing.T) {
	e, tok := tokenEnv(t)
	r := e.admin(t, tok, "POST", "/token/init", form("type", "hotp", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "1234", "serial", "OATH0001A1B2"))
	if wantOK(t, r) != true || at(r.json, "detail.serial") != "OATH0001A1B2" || at(r.json, "detail.rollout_state") != "enrolled" {
		t.Fatalf("init: %s", r.body)
	}
	if g := at(r.json, "detail.googleurl.value"); g != "otpauth://hotp/OATH0001A1B2?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&counter=1&digits=6&creator=privacyidea&issuer=authsrv&serial=OATH0001A1B2" {
		t.Errorf("googleurl %v", g)
	}
	if v := at(r.json, "detail.otpkey.value"); v != "seed://"+rfcKeyHex || at(r.json, "detail.otpkey.value_b32") != "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ" {
		t.Errorf("otpkey %v", at(r.json, "detail.otpkey"))
	}
	rec := listOne(t, e, tok, "OATH0001A1B2")
	keys := make([]string, 0, len(rec))
	for k := range rec {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"active", "container_serial", "count", "count_window", "description", "failcount", "id", "info", "locked", "maxfail",
		"otplen", "realms", "resolver", "revoked", "rollout_state", "serial", "sync_window", "tokengroup", "tokentype", "user_editable",
		"user_id", "user_realm", "username"}
	if !slices.Equal(keys, want) {
		t.Errorf("record keys %v\nwant %v", keys, want)
	}
	if rec["tokentype"] != "hotp" || rec["active"] != true || rec["count"] != float64(0) || rec["otplen"] != float64(6) ||
		rec["count_window"] != float64(10) || rec["maxfail"] != float64(10) || rec["sync_window"] != float64(1000) ||
		rec["username"] != "alice" || rec["user_realm"] != "realm1" || rec["resolver"] != "mem1" || rec["user_id"] == "" ||
		at(rec, "info.tokenkind") != "software" || at(rec, "info.creation_date") == nil {
		t.Errorf("record %v", rec)
	}
	if rs := rec["realms"].([]any); len(rs) != 1 || rs[0] != "realm1" {
		t.Errorf("realms %v", rs)
	}
	if strings.Contains(string(e.admin(t, tok, "GET", "/token/", "").body), rfcKeyHex) {
		t.Error("the seed is listed")
	}
	// disable / enable: the number of changed tokens.
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/disable", form("serial", "OATH0001A1B2"))); v != float64(1) {
		t.Errorf("disable %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/disable/OATH0001A1B2", "")); v != float64(0) {
		t.Errorf("disable again %v", v)
	}
	if listOne(t, e, tok, "OATH0001A1B2")["active"] != false {
		t.Error("still active")
	}
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/enable/OATH0001A1B2", "")); v != float64(1) {
		t.Errorf("enable %v", v)
	}
	// resync with two consecutive values far ahead.
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/resync", form("serial", "OATH0001A1B2", "otp1", rfcHOTP[5], "otp2", rfcHOTP[7]))); v != false {
		t.Errorf("bad resync %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/resync/OATH0001A1B2", form("otp1", rfcHOTP[5], "otp2", rfcHOTP[6]))); v != true {
		t.Errorf("resync %v", v)
	}
	if c := listOne(t, e, tok, "OATH0001A1B2")["count"]; c != float64(7) {
		t.Errorf("count after resync %v", c)
	}
	// a new PIN.
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/setpin", form("serial", "OATH0001A1B2", "otppin", "5678"))); v != float64(1) {
		t.Errorf("setpin %v", v)
	}
	stored, err := e.s.Tokens().Get(t.Context(), "OATH0001A1B2")
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := e.s.Tokens().CheckPIN(t.Context(), stored, "5678"); !ok {
		t.Error("new PIN not set")
	}
	// Deleting the realm is refused while alice holds a token.
	wantError(t, e.admin(t, tok, "DELETE", "/realm/realm1", ""), 400, 904,
		"ERR904: Realm can not be deleted, because a user of this realm is still assigned to a token.")
	// assign twice, unassign, delete.
	wantError(t, e.admin(t, tok, "POST", "/token/assign", form("serial", "OATH0001A1B2", "user", "bob", "realm", "realm1")), 400, 1103,
		"ERR1103: Token already assigned to user <alice.mem1@realm1>")
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/unassign", form("serial", "OATH0001A1B2"))); v != float64(1) {
		t.Errorf("unassign %v", v)
	}
	rec = listOne(t, e, tok, "OATH0001A1B2")
	if rec["username"] != "" || rec["user_id"] != "" || rec["resolver"] != "" || rec["user_realm"] != "" {
		t.Errorf("unassigned record %v", rec)
	}
	if _, ok := rec["user_editable"]; ok {
		t.Error("unassigned record has user_editable")
	}
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/token/OATH0001A1B2", "")); v != float64(1) {
		t.Errorf("delete %v", v)
	}
	wantError(t, e.admin(t, tok, "DELETE", "/token/OATH0001A1B2", ""), 404, 601, "ERR601: No token found for serials: OATH0001A1B2")
	wantError(t, e.admin(t, tok, "POST", "/token/enable", ""), 400, 905, "ERR905: You need to specify a serial, user or credential_id.")
	wantOK(t, e.admin(t, tok, "DELETE", "/realm/realm1", ""))
}

func TestTokenInitErrorsAPI(t *testing.T) {
	e, tok := tokenEnv(t)
	wantError(t, e.admin(t, tok, "POST", "/token/init", form("type", "nosuch")), 400, 1610, "ERR1610: init token failed. Unknown token type: nosuch")
	r := e.admin(t, tok, "POST", "/token/init", form("serial", "a b", "otpkey", rfcKeyHex))
	if r.status != 400 || at(r.json, "result.error.code") != float64(905) {
		t.Errorf("bad serial: %s", r.body)
	}
	for _, bad := range [][]string{{"otplen", "12"}, {"hashlib", "md5"}, {"otpkey", "xyz"}, {"type", "totp", "timeStep", "20"}} {
		kv := append([]string{"serial", "BAD1"}, bad...)
		if bad[0] != "otpkey" {
			kv = append(kv, "otpkey", rfcKeyHex)
		}
		r := e.admin(t, tok, "POST", "/token/init", form(kv...))
		if r.status != 400 || at(r.json, "result.error.code") != float64(905) {
			t.Errorf("%v: %s", bad, r.body)
		}
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/token/", "")).(map[string]any); v["count"] != float64(0) {
		t.Errorf("bad input stored a token: %v", v)
	}
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "S1", "otpkey", rfcKeyHex)))
	wantError(t, e.admin(t, tok, "POST", "/token/init", form("serial", "S1", "type", "totp", "otpkey", rfcKeyHex)), 400, 301,
		"ERR301: Token S1 already exists with type hotp. Can not initialize token with new type totp")
}

func TestTOTPEnrollQRCode(t *testing.T) {
	e, tok := tokenEnv(t)
	r := e.admin(t, tok, "POST", "/token/init", form("type", "totp", "genkey", "1", "user", "alice", "realm", "realm1", "timeStep", "60", "hashlib", "sha256", "otplen", "8"))
	wantOK(t, r)
	url, _ := at(r.json, "detail.googleurl.value").(string)
	serial, _ := at(r.json, "detail.serial").(string)
	if !strings.HasPrefix(url, "otpauth://totp/"+serial+"?secret=") || !strings.Contains(url, "&algorithm=SHA256&period=60&digits=8&creator=privacyidea&issuer=authsrv&serial="+serial) {
		t.Fatalf("googleurl %q", url)
	}
	img, _ := at(r.json, "detail.googleurl.img").(string)
	const prefix = "data:image/png;base64,"
	if !strings.HasPrefix(img, prefix) {
		t.Fatalf("img %.40q", img)
	}
	raw, err := base64.StdEncoding.DecodeString(img[len(prefix):])
	if err != nil {
		t.Fatal(err)
	}
	pic, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(pic)
	if err != nil {
		t.Fatal(err)
	}
	res, err := qrcode.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		t.Fatalf("QR decode: %v", err)
	}
	if res.GetText() != url {
		t.Fatalf("QR holds %q, want %q", res.GetText(), url)
	}
	if rec := listOne(t, e, tok, serial); at(rec, "info.timeStep") != "60" || at(rec, "info.hashlib") != "sha256" || rec["otplen"] != float64(8) {
		t.Errorf("totp record %v", rec)
	}
}

func TestTokenRightsAPI(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "AL1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "BO1", "otpkey", rfcKeyHex, "user", "bob", "realm", "realm1")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "R2", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm2")))
	alice := userLogin(t, e, "alice@realm1", "alice-Pw1")

	// A user sees and changes only her own tokens.
	v := wantOK(t, e.admin(t, alice, "GET", "/token/", "")).(map[string]any)
	if v["count"] != float64(1) || at(v["tokens"].([]any)[0], "serial") != "AL1" {
		t.Errorf("user list %v", v)
	}
	wantError(t, e.admin(t, alice, "POST", "/token/disable/BO1", ""), 404, 601, "ERR601: No token found for serials: BO1")
	if v := wantOK(t, e.admin(t, alice, "POST", "/token/disable", "")); v != float64(1) {
		t.Errorf("user disables own tokens: %v", v)
	}
	wantError(t, e.admin(t, alice, "POST", "/token/set/AL1", form("count_window", "5")), 401, 4306,
		"ERR4306: Authentication failure. You do not have the necessary role (['admin']) to access this resource!")
	r := e.admin(t, alice, "POST", "/token/init", form("type", "hotp", "genkey", "1", "user", "bob"))
	wantOK(t, r)
	if rec := listOne(t, e, tok, at(r.json, "detail.serial").(string)); rec["username"] != "alice" {
		t.Errorf("user enrolled for someone else: %v", rec)
	}

	// User policies: enrollHOTP without enrollpin.
	wantOK(t, e.admin(t, tok, "POST", "/policy/u1", form("scope", "user", "action", "enrollHOTP, disable", "realm", "realm1")))
	wantError(t, e.admin(t, alice, "POST", "/token/init", form("type", "hotp", "genkey", "1", "pin", "1234")), 403, 303,
		"ERR303: Setting a PIN is not allowed due to missing 'enrollpin' right.")
	wantError(t, e.admin(t, alice, "POST", "/token/init", form("type", "totp", "genkey", "1")), 403, 303,
		"ERR303: User actions are defined, but the action enrollTOTP is not allowed!")
	wantError(t, e.admin(t, alice, "POST", "/token/enable/AL1", ""), 403, 303,
		"ERR303: User actions are defined, but the action enable is not allowed!")

	// Admin policies restricted to realm2.
	wantOK(t, e.admin(t, tok, "POST", "/policy/a1", form("scope", "admin", "action", "enable, disable, tokenlist, policywrite, policydelete, unassign", "realm", "realm2")))
	wantError(t, e.admin(t, tok, "POST", "/token/enable/AL1", ""), 403, 303,
		"ERR303: Admin actions are defined, but the action enable is not allowed!")
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/disable/R2", "")); v != float64(1) {
		t.Errorf("disable in realm2 %v", v)
	}
	v = wantOK(t, e.admin(t, tok, "GET", "/token/", "")).(map[string]any)
	if v["count"] != float64(1) {
		t.Errorf("admin sees tokens outside realm2: %v", v)
	}
	res := wantOK(t, e.admin(t, tok, "POST", "/token/unassign", form("serial", "AL1,R2"))).(map[string]any)
	if res["count_success"] != float64(1) || len(res["unauthorized"].([]any)) != 1 || res["unauthorized"].([]any)[0] != "AL1" {
		t.Errorf("multi unassign %v", res)
	}
	wantError(t, e.admin(t, tok, "POST", "/token/init", form("type", "hotp", "genkey", "1", "user", "bob", "realm", "realm1")), 403, 303,
		"ERR303: Admin actions are defined, but the action enrollHOTP is not allowed!")
}

func TestTokenAdminOpsAPI(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "T1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin1")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "T2", "otpkey", rfcKeyHex)))
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/set/T2", form("count_window", "20", "max_failcount", "3", "description", "d", "validity_period_end", "2027-01-01T00:00+0000"))); v != float64(4) {
		t.Errorf("set %v", v)
	}
	rec := listOne(t, e, tok, "T2")
	if rec["count_window"] != float64(20) || rec["maxfail"] != float64(3) || rec["description"] != "d" || at(rec, "info.validity_period_end") != "2027-01-01T00:00+0000" {
		t.Errorf("after set %v", rec)
	}
	wantOK(t, e.admin(t, tok, "POST", "/token/realm/T2", form("realms", "realm1,realm2")))
	if rs := listOne(t, e, tok, "T2")["realms"].([]any); len(rs) != 2 {
		t.Errorf("realms %v", rs)
	}
	wantError(t, e.admin(t, tok, "POST", "/token/realm/T2", form("realms", "nope")), 400, 905, "ERR905: The realm nope does not exist.")
	wantOK(t, e.admin(t, tok, "POST", "/token/info/T2/mykey", form("value", "v1")))
	if at(listOne(t, e, tok, "T2"), "info.mykey") != "v1" {
		t.Error("tokeninfo not set")
	}
	wantOK(t, e.admin(t, tok, "DELETE", "/token/info/T2/mykey", ""))
	if at(listOne(t, e, tok, "T2"), "info.mykey") != nil {
		t.Error("tokeninfo not deleted")
	}
	wantOK(t, e.admin(t, tok, "POST", "/token/copypin", form("from", "T1", "to", "T2")))
	wantOK(t, e.admin(t, tok, "POST", "/token/copyuser", form("from", "T1", "to", "T2")))
	if rec := listOne(t, e, tok, "T2"); rec["username"] != "alice" {
		t.Errorf("copyuser %v", rec)
	}
	t2, _ := e.s.Tokens().Get(t.Context(), "T2")
	if ok, _ := e.s.Tokens().CheckPIN(t.Context(), t2, "pin1"); !ok {
		t.Error("copypin")
	}
	v := wantOK(t, e.admin(t, tok, "GET", "/token/getserial/"+rfcHOTP[3], "")).(map[string]any)
	if v["serial"] != "T1" && v["serial"] != "T2" {
		t.Errorf("getserial %v", v)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/token/getserial/000000?window=2", "")).(map[string]any); v["serial"] != nil {
		t.Errorf("getserial without a match: serial %v, want null", v["serial"])
	} else if _, sent := v["serial"]; !sent {
		t.Error("getserial without a match sends no serial")
	}
	// revoke: locked for good.
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/revoke/T2", "")); v != float64(1) {
		t.Errorf("revoke %v", v)
	}
	rec = listOne(t, e, tok, "T2")
	if rec["revoked"] != true || rec["locked"] != true || rec["active"] != false {
		t.Errorf("revoked %v", rec)
	}
	wantError(t, e.admin(t, tok, "POST", "/token/enable/T2", ""), 400, 1007, "ERR1007: This action is not possible, since the token is locked")
	// reset, description, setrandompin.
	if v := wantOK(t, e.admin(t, tok, "POST", "/token/reset/T1", "")); v != float64(1) {
		t.Errorf("reset %v", v)
	}
	wantOK(t, e.admin(t, tok, "POST", "/token/description/T1", form("description", "new")))
	r := e.admin(t, tok, "POST", "/token/setrandompin/T1", "")
	if wantOK(t, r) != float64(1) || len(at(r.json, "detail.pin").(string)) != 12 {
		t.Errorf("setrandompin %s", r.body)
	}
	// challenges: list and cancel.
	t1, _ := e.s.Tokens().Get(t.Context(), "T1")
	txid, _ := e.s.Tokens().NewTransactionID()
	if _, _, err := e.s.Tokens().CreateChallenge(t.Context(), t1, txid, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	cv := wantOK(t, e.admin(t, tok, "GET", "/token/challenges/T1", "")).(map[string]any)
	if cv["count"] != float64(1) || at(cv["challenges"].([]any)[0], "transaction_id") != txid {
		t.Errorf("challenges %v", cv)
	}
	// One page: prev and next are sent, as null.
	for _, k := range []string{"prev", "next"} {
		if v, ok := cv[k]; !ok || v != nil {
			t.Errorf("challenges %s = %v (sent %v), want null", k, v, ok)
		}
	}
	dv := wantOK(t, e.admin(t, tok, "DELETE", "/token/challenges/transaction/"+txid, "")).(map[string]any)
	if dv["deleted"] != float64(1) {
		t.Errorf("cancel %v", dv)
	}
	// pagination and CSV.
	for _, s := range []string{"P1", "P2", "P3"} {
		wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", s, "genkey", "1")))
	}
	pv := wantOK(t, e.admin(t, tok, "GET", "/token/?serial=P*&pagesize=2&page=2&sortdir=desc", "")).(map[string]any)
	if pv["count"] != float64(3) || pv["prev"] != float64(1) || len(pv["tokens"].([]any)) != 1 || at(pv["tokens"].([]any)[0], "serial") != "P1" {
		t.Errorf("page 2 %v", pv)
	}
	// prev and next are page numbers, null at the ends (privacyIDEA sends
	// both keys always).
	if v, ok := pv["next"]; !ok || v != nil {
		t.Errorf("last page: next = %v (sent %v), want null", v, ok)
	}
	p1 := wantOK(t, e.admin(t, tok, "GET", "/token/?serial=P*&pagesize=2&page=1", "")).(map[string]any)
	if v, ok := p1["prev"]; !ok || v != nil || p1["next"] != float64(2) || p1["current"] != float64(1) {
		t.Errorf("page 1: prev %v (sent %v), next %v, current %v", v, ok, p1["next"], p1["current"])
	}
	csv := e.admin(t, tok, "GET", "/token/?outform=csv", "")
	if csv.status != 200 || !strings.Contains(string(csv.body), "P3,hotp") {
		t.Errorf("csv %d %s", csv.status, csv.body)
	}
}

func TestTokenLoadAPI(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "EXIST1", "otpkey", rfcKeyHex)))
	csvFile := "# serial, key, type, otplen, timestep\n" +
		"IMP1, " + rfcKeyHex + ", hotp, 6\n" +
		"IMP2, " + rfcKeyHex + ", totp, 8, 60\n" +
		"EXIST1, " + rfcKeyHex + ", hotp, 6\n" +
		"IMP3, nothex, hotp, 6\n"
	body, ctype := multipartFormBody(t, [][2]string{{"type", "oathcsv"}, {"tokenrealms", "realm1"}}, [][3]string{{"file", "tokens.csv", csvFile}})
	r := e.do(t, "POST", "/token/load/tokens.csv", ctype, body, map[string]string{"Authorization": tok})
	v := wantOK(t, r).(map[string]any)
	if v["n_imported"] != float64(2) || v["n_not_imported"] != float64(2) {
		t.Fatalf("import %s", r.body)
	}
	rec := listOne(t, e, tok, "IMP2")
	if rec["tokentype"] != "totp" || rec["otplen"] != float64(8) || at(rec, "info.timeStep") != "60" || at(rec, "info.tokenkind") != "hardware" {
		t.Errorf("imported totp %v", rec)
	}
	if rs := rec["realms"].([]any); len(rs) != 1 || rs[0] != "realm1" {
		t.Errorf("realms %v", rs)
	}
	if r, _ := e.s.Tokens().CheckOTP(t.Context(), "IMP1", rfcHOTP[0], nil); !r.OK {
		t.Error("imported seed does not work")
	}
	// the existing token was not replaced
	if r, _ := e.s.Tokens().CheckOTP(t.Context(), "EXIST1", rfcHOTP[0], nil); !r.OK {
		t.Error("existing token changed")
	}
	bad, ctype := multipartFormBody(t, [][2]string{{"type", "pskc"}}, [][3]string{{"file", "t.xml", `<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><KeyContainer/>`}})
	r = e.do(t, "POST", "/token/load/t.xml", ctype, bad, map[string]string{"Authorization": tok})
	if r.status != 400 || at(r.json, "result.error.code") != float64(304) {
		t.Errorf("malformed pskc: %s", r.body)
	}
	big, ctype := multipartFormBody(t, [][2]string{{"type", "oathcsv"}}, [][3]string{{"file", "big.csv", strings.Repeat("X,00,hotp,6\n", 200000)}})
	r = e.do(t, "POST", "/token/load/big.csv", ctype, big, map[string]string{"Authorization": tok})
	if r.status < 400 || at(r.json, "result.status") != false {
		t.Errorf("oversized import: %d", r.status)
	}
	wantError(t, e.admin(t, tok, "POST", "/token/load/x", form("type", "oathcsv")), 400, 905, "ERR905: Missing parameter: file")
}

func TestTokenLostAndBaseTypesAPI(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "L1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin1")))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "L2", "otpkey", rfcKeyHex)))
	wantError(t, e.admin(t, tok, "POST", "/token/lost/L2", ""), 400, 2012, "ERR2012: You can only define a lost token for an assigned token.")
	alice := userLogin(t, e, "alice@realm1", "alice-Pw1")
	v := wantOK(t, e.admin(t, alice, "POST", "/token/lost/L1", "")).(map[string]any)
	pw, _ := v["password"].(string)
	if v["serial"] != "lostL1" || len(pw) != 16 || v["init"] != true || v["disable"] != float64(1) || v["end_date"] == "" {
		t.Fatalf("lost %v", v)
	}
	if listOne(t, e, tok, "L1")["active"] != false {
		t.Error("lost token still active")
	}
	rec := listOne(t, e, tok, "lostL1")
	if rec["tokentype"] != "pw" || rec["username"] != "alice" || at(rec, "info.validity_period_end") != v["end_date"] {
		t.Errorf("replacement %v", rec)
	}
	if r, _ := e.s.Tokens().CheckOTP(t.Context(), "lostL1", pw, nil); !r.OK {
		t.Error("the replacement password does not work")
	}
	lost, _ := e.s.Tokens().Get(t.Context(), "lostL1")
	if ok, _ := e.s.Tokens().CheckPIN(t.Context(), lost, "pin1"); !ok {
		t.Error("PIN not copied to the replacement")
	}
	wantError(t, e.admin(t, tok, "POST", "/token/init", form("type", "spass", "genkey", "1", "otpkey", "00")), 400, 344,
		"ERR344: [ParameterError] You may either specify genkey or otpkey, but not both!")
	r := e.admin(t, tok, "POST", "/token/init", form("type", "sshkey", "sshkey", "ssh-dss AAAAB3NzaC1kc3MAAACBAP1 x"))
	if r.status != 400 || at(r.json, "result.error.message") != "ERR301: The keytype you specified is not supported." {
		t.Errorf("sshkey type: %s", r.body)
	}
	r = e.admin(t, tok, "POST", "/token/init", form("type", "registration", "user", "bob", "realm", "realm1"))
	if code, _ := at(r.json, "detail.registrationcode").(string); wantOK(t, r) != true || len(code) != 24 {
		t.Errorf("registration %s", r.body)
	}
	r = e.admin(t, tok, "POST", "/token/init", form("type", "paper", "otpkey", rfcKeyHex, "papertoken_count", "3"))
	if otps := at(r.json, "detail.otps").(map[string]any); len(otps) != 3 || otps["1"] != rfcHOTP[1] {
		t.Errorf("paper %s", r.body)
	}
}
