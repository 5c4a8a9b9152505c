package token_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// pinHash is a PHC hash of pin at a cheap cost, as another server's
// token PIN column holds it.
func pinHash(t *testing.T, pin string) string {
	t.Helper()
	h, err := secret.NewHasher(secret.HasherConfig{Params: cheap})
	if err != nil {
		t.Fatal(err)
	}
	s, err := h.Hash(context.Background(), pin)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestImportMigratedKeepsState(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	owner := &user.User{Login: "alice", Realm: "corp", Resolver: "files", UID: "1001"}
	rec := token.Migrated{
		Serial: "MIG-HOTP", Type: "hotp", Description: "adopted", OTPLen: 6,
		Params:  token.Params{"otpkey": rfcKey, "hashlib": "sha1", "pin": "ignored"},
		PINHash: pinHash(t, "alice-pin"),
		Count:   3, CountWindow: 5, SyncWindow: 50, FailCount: 1, MaxFail: 7,
		Active: true,
		Info: map[string]string{"count_auth": "3", "department": "sales", "hashlib": "sha256",
			token.InfoTokenKind: token.KindHardware, token.InfoCreationDate: "2020-01-02T03:04:05+00:00"},
		Owner: owner, Realms: []string{"lab"},
	}
	n, failed := e.svc.ImportMigrated(ctx, []token.Migrated{rec})
	if n != 1 || len(failed) != 0 {
		t.Fatalf("imported %d, failed %v", n, failed)
	}
	tok, err := e.svc.Get(ctx, "MIG-HOTP")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Count != 3 || tok.CountWindow != 5 || tok.SyncWindow != 50 || tok.FailCount != 1 || tok.MaxFail != 7 || !tok.Active || tok.Revoked || tok.Locked {
		t.Errorf("state not kept: %+v", tok)
	}
	if tok.Description != "adopted" || tok.OTPLen != 6 || tok.RolloutState != token.StateEnrolled {
		t.Errorf("description/otplen/rollout: %q %d %q", tok.Description, tok.OTPLen, tok.RolloutState)
	}
	if tok.PIN != rec.PINHash {
		t.Errorf("the PIN hash was not kept as it is")
	}
	for k, want := range map[string]string{"count_auth": "3", "department": "sales", "hashlib": "sha1",
		token.InfoTokenKind: token.KindHardware, token.InfoCreationDate: "2020-01-02T03:04:05+00:00"} {
		if tok.Info[k] != want {
			t.Errorf("info %s = %q, want %q", k, tok.Info[k], want)
		}
	}
	if tok.Owner == nil || *tok.Owner != *owner || strings.Join(tok.Realms, ",") != "corp,lab" {
		t.Errorf("owner %v realms %v", tok.Owner, tok.Realms)
	}
	if ok, err := e.svc.CheckPIN(ctx, tok, "alice-pin"); err != nil || !ok {
		t.Errorf("kept PIN hash: %v %v", ok, err)
	}
	if ok, _ := e.svc.CheckPIN(ctx, tok, "ignored"); ok {
		t.Error("the pin parameter replaced the PIN hash")
	}
	// RFC 4226: counter 2 is 359152 (used), 3 is 969429 (next).
	if m, err := e.svc.Verify(ctx, tok, "359152", nil, nil); err != nil || m.OK {
		t.Errorf("a used counter matched: %v %v", m.OK, err)
	}
	if m, err := e.svc.Verify(ctx, tok, "969429", nil, nil); err != nil || !m.OK || m.Counter != 3 {
		t.Errorf("the next counter: %v %d %v", m.OK, m.Counter, err)
	}
}

func TestImportMigratedRefusesBadRecords(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.initToken(t, "hotp", "TAKEN", token.Params{"otpkey": rfcKey})
	good := func(serial string) token.Migrated {
		return token.Migrated{Serial: serial, Type: "hotp", Params: token.Params{"otpkey": rfcKey}, Active: true}
	}
	bad := map[string]token.Migrated{}
	add := func(serial string, mod func(*token.Migrated)) {
		m := good(serial)
		mod(&m)
		bad[serial] = m
	}
	add("TAKEN", func(m *token.Migrated) {})
	add("BAD-TYPE", func(m *token.Migrated) { m.Type = "push" })
	add("BAD-PIN", func(m *token.Migrated) { m.PINHash = "$1$plain$md5crypt" })
	add("BAD-WINDOW", func(m *token.Migrated) { m.CountWindow = -1 })
	add("BAD-STATE", func(m *token.Migrated) { m.RolloutState = "pending" })
	add("BAD-OWNER", func(m *token.Migrated) { m.Owner = &user.User{Login: "bob", Realm: "corp"} })
	add("BAD-KEY", func(m *token.Migrated) { m.Params["otpkey"] = "not hex" })
	add("BAD-TAN", func(m *token.Migrated) {
		m.Type = "tan"
		m.Params["tan.tan0"] = "nosalt"
	})
	add("BAD-REG", func(m *token.Migrated) { m.Type = "registration"; m.Params = token.Params{} })
	recs := []token.Migrated{good("OK-1")}
	for _, m := range bad {
		recs = append(recs, m)
	}
	recs = append(recs, good("OK-1")) // twice in one batch
	n, failed := e.svc.ImportMigrated(ctx, recs)
	if n != 1 {
		t.Errorf("imported %d, want 1", n)
	}
	got := map[string]int{}
	for _, f := range failed {
		got[f.Serial]++
		if f.Reason == "" {
			t.Errorf("%s: no reason", f.Serial)
		}
	}
	for serial := range bad {
		if got[serial] != 1 {
			t.Errorf("%s refused %d times, want once (failures %v)", serial, got[serial], failed)
		}
	}
	if got["OK-1"] != 1 {
		t.Errorf("the second OK-1 was not refused: %v", failed)
	}
	if tok, err := e.svc.Get(ctx, "TAKEN"); err != nil || tok.Count != 0 {
		t.Errorf("the existing token was touched: %v", err)
	}
}

// piTAN is a TAN entry as privacyIDEA keeps it: SHA-256 of the TAN followed
// by the salt's text.
func piTAN(salt, tan string) string {
	h := sha256.Sum256([]byte(tan + salt))
	return salt + ":" + hex.EncodeToString(h[:])
}

func TestImportMigratedAdoptedTypes(t *testing.T) {
	// A new questionnaire needs five answers; an adopted one keeps its own.
	e, _ := newSettingsEnv(t, token.Settings{Values: map[string]string{"question.num_answers": "5"}})
	ctx := t.Context()
	recs := []token.Migrated{
		{Serial: "MIG-TAN", Type: "tan", OTPLen: 6, Active: true, Params: token.Params{"otpkey": rfcKey,
			"tan.tan3": piTAN("1866076e", "111111"), "tan.tan7": piTAN("60849a28", "222222"), "tan.count": "2"}},
		{Serial: "MIG-REG", Type: "registration", Active: true, Params: token.Params{"otpkey": "kBhN6@zsT|^VCd%mk8T#|)6W"}},
		{Serial: "MIG-QUEST", Type: "question", Active: true, Params: token.Params{"questions": `{"Pet?":"Rex"}`}},
	}
	n, failed := e.svc.ImportMigrated(ctx, recs)
	if n != len(recs) {
		t.Fatalf("imported %d: %v", n, failed)
	}
	tan, err := e.svc.Get(ctx, "MIG-TAN")
	if err != nil {
		t.Fatal(err)
	}
	if tan.Info["tan.count"] != "2" {
		t.Errorf("tan.count %q", tan.Info["tan.count"])
	}
	for otp, want := range map[string]bool{"111111": true, "222222": true, "333333": false, "": false} {
		m, err := e.svc.Verify(ctx, tan, otp, nil, nil)
		if err != nil || m.OK != want {
			t.Errorf("TAN %q: %v %v, want %v", otp, m.OK, err, want)
		}
		if want && m.Apply != nil {
			c := tan.Clone()
			if !m.Apply(c) || c.Info["tan.count"] != "1" {
				t.Errorf("TAN %q: apply left tan.count %q", otp, c.Info["tan.count"])
			}
		}
	}
	reg, err := e.svc.Get(ctx, "MIG-REG")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := e.svc.Verify(ctx, reg, "kBhN6@zsT|^VCd%mk8T#|)6W", nil, nil); err != nil || !m.OK || !m.Delete {
		t.Errorf("registration code: %v %v", m.OK, err)
	}
	if reg.OTPLen != 24 {
		t.Errorf("registration otplen %d", reg.OTPLen)
	}
	q, err := e.svc.Get(ctx, "MIG-QUEST")
	if err != nil || q.Info["question.0"] != "Pet?" {
		t.Errorf("questionnaire: %v %v", q, err)
	}
}

func TestMigratedRedacts(t *testing.T) {
	m := token.Migrated{Serial: "S1", Type: "motp", PINHash: "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo",
		Params: token.Params{"otpkey": "400642bb2385b85b", "motppin": "9876"},
		Owner:  &user.User{Login: "erin", Realm: "corp", UID: "1005"}}
	for _, s := range []string{m.String(), fmt.Sprint(m), fmt.Sprintf("%v %+v %#v", m, m, m)} {
		for _, secret := range []string{"400642bb2385b85b", "9876", "argon2id", "aGFzaGhhc2hoYXNo"} {
			if strings.Contains(s, secret) {
				t.Errorf("%q shows %q", s, secret)
			}
		}
		if !strings.Contains(s, "S1") || !strings.Contains(s, "motppin") {
			t.Errorf("%q does not name the serial and the parameters", s)
		}
	}
}
