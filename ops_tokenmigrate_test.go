package authsrv_test

import (
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// migrated is an adopted HOTP token record.
func migrated(serial string, owner *user.User, realms ...string) token.Migrated {
	return token.Migrated{Serial: serial, Type: "hotp", Params: token.Params{"otpkey": rfcKeyHex},
		Count: 4, Active: true, Owner: owner, Realms: realms}
}

func TestImportMigratedTokens(t *testing.T) {
	s, rs := tokenServer(t)
	ctx := t.Context()
	owner := func(login, realmName, resolverName, uid string) *user.User {
		return &user.User{Login: login, Realm: realmName, Resolver: resolverName, UID: uid}
	}
	recs := []token.Migrated{
		migrated("M-ALICE", owner("", "Realm1", "files", "1000")),
		migrated("M-BOB", owner("bob", "realm1", "files", "1001"), "realm1"),
		migrated("M-UNASSIGNED", nil, "realm1"),
		migrated("M-GHOST", owner("", "realm1", "files", "9999")),
		migrated("M-NO-TOKEN-REALM", nil, "nowhere"),
		migrated("M-NO-OWNER-REALM", owner("", "nowhere", "files", "1000")),
		migrated("M-OTHER-RESOLVER", owner("", "realm1", "other", "1000")),
		migrated("M-WRONG-LOGIN", owner("bob", "realm1", "files", "1000")),
		migrated("M-BAD-KEY", nil, "realm1"),
	}
	recs[len(recs)-1].Params["otpkey"] = "zz"
	n := rs.count()
	res, err := s.Ops().ImportMigratedTokens(ctx, caller.Caller{}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Imported != 3 {
		t.Errorf("imported %d, want 3", res.Imported)
	}
	oneAuditedCommit(t, rs, n, "import migrated")
	want := map[string]string{
		"M-GHOST":          authsrv.ReasonOwnerUnknown,
		"M-NO-TOKEN-REALM": "the token realm nowhere does not exist",
		"M-NO-OWNER-REALM": "the owner's realm nowhere does not exist",
		"M-OTHER-RESOLVER": "the resolver other is not in the owner's realm realm1",
		"M-WRONG-LOGIN":    "the owner's login does not match",
		"M-BAD-KEY":        "otpkey",
	}
	if len(res.NotImported) != len(want) {
		t.Errorf("not imported: %v", res.NotImported)
	}
	for _, f := range res.NotImported {
		if w, ok := want[f.Serial]; !ok || !strings.Contains(f.Reason, w) {
			t.Errorf("%s: reason %q, want %q", f.Serial, f.Reason, w)
		}
	}
	for serial, login := range map[string]string{"M-ALICE": "alice", "M-BOB": "bob"} {
		tok, err := s.Tokens().Get(ctx, serial)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Owner == nil || tok.Owner.Login != login || tok.Owner.Realm != "realm1" || tok.Count != 4 {
			t.Errorf("%s: owner %v count %d", serial, tok.Owner, tok.Count)
		}
		if u := res.Owners[serial]; u.Login != login || u.Realm != "realm1" || u.Resolver != "files" {
			t.Errorf("%s: result owner %+v", serial, u)
		}
	}
	if _, ok := res.Owners["M-UNASSIGNED"]; ok {
		t.Error("an owner for the unassigned token")
	}
	entries := rows(t, s, map[string]string{"action": "POST /token/load/migrated"})
	if len(entries) != 1 || entries[0]["info"] != "imported 3 migrated tokens" || entries[0]["success"] != 1 {
		t.Errorf("audit: %v", entries)
	}
	// Importing again refuses every serial and changes nothing.
	res, err = s.Ops().ImportMigratedTokens(ctx, caller.Caller{}, recs[:3])
	if err != nil || res.Imported != 0 || len(res.NotImported) != 3 {
		t.Errorf("again: %+v %v", res, err)
	}
}

func TestImportMigratedTokensRights(t *testing.T) {
	s, _ := tokenServer(t)
	ctx := t.Context()
	recs := []token.Migrated{migrated("M-1", nil, "realm1")}
	if _, err := s.Ops().ImportMigratedTokens(ctx, userCaller("alice"), recs); err == nil {
		t.Error("a user imported tokens")
	}
	if _, err := s.Policies().Set(ctx, policy.Policy{Name: "admins", Scope: policy.ScopeAdmin, Action: "enrollHOTP", Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Ops().ImportMigratedTokens(ctx, admin, recs)
	if !apierr.Is(err, apierr.Policy) {
		t.Errorf("an admin without importtokens: %v", err)
	}
	if _, err := s.Policies().Set(ctx, policy.Policy{Name: "admins", Scope: policy.ScopeAdmin, Action: "importtokens", Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Ops().ImportMigratedTokens(ctx, admin, recs)
	if err != nil || res.Imported != 1 {
		t.Errorf("an admin with importtokens: %+v %v", res, err)
	}
	if ok, _ := s.Tokens().Exists(ctx, "M-1"); !ok {
		t.Error("M-1 is missing")
	}
}
