package piimport

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/store"
)

// TestImportAdmins adopts the fixture's administrator with privacyIDEA's
// hash and PI_PEPPER: the password logs in, a wrong one does not, and the
// first login re-hashes it so that the record no longer holds the pepper.
func TestImportAdmins(t *testing.T) {
	ctx := t.Context()
	e := newCfgEnv(t)
	snap := cfgSnapshot()
	var sum Summary
	if err := importAdmins(ctx, e.s, snap, []byte(cfgPepper), &sum); err != nil {
		t.Fatal(err)
	}
	if r, ok := cfgRow(&sum, "admin", "admin"); !ok || !r.Imported || strings.Contains(r.Detail, cfgPepper) {
		t.Fatalf("admin row = %+v", r)
	}
	stored := func() map[string]any {
		t.Helper()
		var rec map[string]any
		err := e.s.Store().View(ctx, func(tx store.Tx) error {
			return json.Unmarshal(tx.Bucket("admins").Get([]byte("admin")), &rec)
		})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	if rec := stored(); rec["pepper"] == nil || rec["hash"] != cfgAdminHash {
		t.Fatalf("adopted record: pepper kept %v, hash kept %v", rec["pepper"] != nil, rec["hash"] == cfgAdminHash)
	}
	found, err := e.s.Audit().Search(ctx, audit.Query{Filters: map[string]string{"action": "POST /admins"}})
	if err != nil || found.Count != 1 {
		t.Fatalf("audit of the adoption = %+v, %v", found, err)
	}
	if b, _ := json.Marshal(found); strings.Contains(string(b), cfgPepper) || strings.Contains(string(b), "argon2") {
		t.Error("the audit shows the pepper or the hash")
	}
	list, err := e.s.Admins().List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "admin" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if b, _ := json.Marshal(list); strings.Contains(string(b), "pepper") || strings.Contains(string(b), cfgPepper) {
		t.Errorf("List shows the pepper: %s", b)
	}

	admins := e.s.Admins()
	if ok, err := admins.Check(ctx, "admin", "wrong-Passw0rd"); err != nil || ok {
		t.Fatalf("wrong password: %v, %v", ok, err)
	}
	if rec := stored(); rec["pepper"] == nil {
		t.Fatal("a failed login dropped the pepper")
	}
	if ok, err := admins.Check(ctx, "admin", "admin-Passw0rd"); err != nil || !ok {
		t.Fatalf("fixture password: %v, %v", ok, err)
	}
	rec := stored()
	if _, has := rec["pepper"]; has || rec["hash"] == cfgAdminHash {
		t.Fatalf("after the first login: pepper kept %v, hash kept %v", has, rec["hash"] == cfgAdminHash)
	}
	if ok, err := admins.Check(ctx, "admin", "admin-Passw0rd"); err != nil || !ok {
		t.Fatalf("after the re-hash: %v, %v", ok, err)
	}
	if ok, err := admins.Check(ctx, "admin", "wrong-Passw0rd"); err != nil || ok {
		t.Fatalf("wrong password after the re-hash: %v, %v", ok, err)
	}
}

// TestImportAdminsWithoutPepper leaves the administrators out, with the
// reason, when no PI_PEPPER is given.
func TestImportAdminsWithoutPepper(t *testing.T) {
	ctx := t.Context()
	e := newCfgEnv(t)
	var sum Summary
	if err := importAdmins(ctx, e.s, cfgSnapshot(), nil, &sum); err != nil {
		t.Fatal(err)
	}
	r, ok := cfgRow(&sum, "admin", "admin")
	if !ok || r.Imported || r.Reason != "no PI_PEPPER given: set a password with authsrv admin add" {
		t.Errorf("admin row = %+v", r)
	}
	if n, err := e.s.Admins().Count(ctx); err != nil || n != 0 {
		t.Errorf("Count = %d, %v", n, err)
	}
}

// TestImportAdminsBadHash records a hash that is no Argon2 PHC string as
// not brought over.
func TestImportAdminsBadHash(t *testing.T) {
	ctx := t.Context()
	e := newCfgEnv(t)
	snap := &Snapshot{Admins: []Admin{{Username: "old", PasswordHash: "$pbkdf2-sha512$25000$abc$def"}}}
	var sum Summary
	if err := importAdmins(ctx, e.s, snap, []byte(cfgPepper), &sum); err != nil {
		t.Fatal(err)
	}
	if r, ok := cfgRow(&sum, "admin", "old"); !ok || r.Imported || !strings.Contains(r.Reason, "Argon2") {
		t.Errorf("admin row = %+v", r)
	}
}
