package piimport

import (
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/validate"
)

// tokFixtureDir is the privacyIDEA 3.10.2 fixture, a test input that
// must be there.
func tokFixtureDir(t *testing.T) string {
	t.Helper()
	const dir = "testdata/privacyidea-3.10.2"
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil {
		t.Fatalf("the privacyIDEA 3.10.2 fixture is missing: %v", err)
	}
	return dir
}

// tokMF is a token of the fixture's manifest.
type tokMF struct {
	Serial        string            `json:"serial"`
	Type          string            `json:"type"`
	User          *string           `json:"user"`
	UserRealm     string            `json:"user_realm"`
	Resolver      string            `json:"resolver"`
	UserID        string            `json:"user_id"`
	TokenRealms   []string          `json:"token_realms"`
	Description   string            `json:"description"`
	OTPKeyHex     *string           `json:"otpkey_hex"`
	OTPKeyText    string            `json:"otpkey_text"`
	PIN           string            `json:"pin"`
	Hashlib       *string           `json:"hashlib"`
	OTPLen        int               `json:"otplen"`
	Counter       uint64            `json:"counter"`
	CountWindow   int               `json:"count_window"`
	SyncWindow    int               `json:"sync_window"`
	State         string            `json:"state"`
	Active        bool              `json:"active"`
	Revoked       bool              `json:"revoked"`
	Locked        bool              `json:"locked"`
	FailCount     int               `json:"failcount"`
	MaxFail       int               `json:"maxfail"`
	RolloutState  string            `json:"rollout_state"`
	TimestepSecs  int               `json:"timestep_seconds"`
	MOTPPIN       string            `json:"motppin"`
	SSHKey        string            `json:"sshkey"`
	PrintedOTPs   map[string]string `json:"printed_otps"`
	TANs          map[string]string `json:"tans"`
	Questions     map[string]string `json:"questions"`
	PublicID      string            `json:"public_id_modhex"`
	PrivateUIDHex string            `json:"private_uid_hex"`
	TokeninfoDB   map[string]struct {
		Value string  `json:"value"`
		Type  *string `json:"type"`
	} `json:"tokeninfo_db"`
}

type tokMFVerification struct {
	Serial   string `json:"serial"`
	PassSent string `json:"pass_sent"`
}

type tokManifest struct {
	Tokens       []tokMF `json:"tokens"`
	Verification struct {
		Results []tokMFVerification `json:"results"`
	} `json:"verification"`
}

func tokLoadManifest(t *testing.T, dir string) *tokManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m tokManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Tokens) != 23 {
		t.Fatalf("manifest lists %d tokens, want 23", len(m.Tokens))
	}
	return &m
}

// tokCopyFile copies a fixture file into dir (the fixture is read-only).
func tokCopyFile(t *testing.T, from, dir string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(dir, filepath.Base(from))
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return to
}

// tokPINHashes reads the pin_hash column of a copy of the fixture's database.
func tokPINHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", tokCopyFile(t, filepath.Join(dir, "pi.sqlite"), t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), "SELECT serial, COALESCE(pin_hash, '') FROM token")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var serial, h string
		if err := rows.Scan(&serial, &h); err != nil {
			t.Fatal(err)
		}
		out[serial] = h
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// tokSnapshot builds the Snapshot's tokens from the manifest, as the
// reader would decrypt them from the database.
func tokSnapshot(t *testing.T, m *tokManifest, hashes map[string]string) []Token {
	t.Helper()
	var out []Token
	for i, mt := range m.Tokens {
		tok := Token{
			ID: int64(i + 1), Serial: mt.Serial, Type: mt.Type, Description: mt.Description, OTPLen: mt.OTPLen,
			PINHash: hashes[mt.Serial], MaxFail: mt.MaxFail, FailCount: mt.FailCount, Count: mt.Counter,
			CountWindow: mt.CountWindow, SyncWindow: mt.SyncWindow, Active: mt.Active, Revoked: mt.Revoked,
			Locked: mt.Locked, RolloutState: mt.RolloutState, Realms: mt.TokenRealms,
		}
		if !strings.HasPrefix(tok.PINHash, "$argon2id$v=19$m=102400,t=9,p=8$") {
			t.Fatalf("%s: pin_hash %.20q... is not privacyIDEA's argon2id", mt.Serial, tok.PINHash)
		}
		switch {
		case mt.OTPKeyText != "":
			tok.Key = Secret(mt.OTPKeyText)
		case mt.OTPKeyHex != nil:
			tok.Key = Secret(*mt.OTPKeyHex)
		}
		if mt.MOTPPIN != "" {
			tok.UserPIN = Secret(mt.MOTPPIN)
		}
		for k, v := range mt.TokeninfoDB {
			ti := TokenInfo{Key: k, Value: v.Value}
			if v.Type != nil {
				ti.Type = *v.Type
			}
			if ti.Type == "password" {
				// Decrypted as the reader does it: the manifest has the
				// plain values.
				ti.Secret = true
				switch {
				case k == "ssh_key":
					f := strings.Fields(mt.SSHKey)
					ti.Value = f[1]
				case mt.Questions[k] != "":
					ti.Value = mt.Questions[k]
				default:
					t.Fatalf("%s: no plain value for the password tokeninfo %s", mt.Serial, k)
				}
			}
			tok.Info = append(tok.Info, ti)
		}
		if mt.User != nil {
			tok.Owners = []Owner{{Resolver: mt.Resolver, UserID: mt.UserID, Realm: mt.UserRealm}}
		}
		out = append(out, tok)
	}
	return out
}

// tokServer is a server on a temporary data directory with the
// fixture's passwd resolver and the realms corp (default) and lab.
func tokServer(t *testing.T, dir string) *authsrv.Server {
	t.Helper()
	s, err := authsrv.New(authsrv.WithDataDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, o := t.Context(), s.Ops()
	passwd := tokCopyFile(t, filepath.Join(dir, "users.passwd"), t.TempDir())
	if _, err := o.SetResolver(ctx, caller.Caller{}, "fixture-passwd", map[string]string{"type": "passwdresolver", "fileName": passwd}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"corp", "lab"} {
		prio := i + 1
		if _, _, err := o.SetRealm(ctx, caller.Caller{}, name, []realm.Entry{{Name: "fixture-passwd", Priority: &prio}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := o.SetDefaultRealm(ctx, caller.Caller{}, "corp"); err != nil {
		t.Fatal(err)
	}
	return s
}

// tokYubicoOTP builds a Yubico OTP of the fixture's YubiKey.
func tokYubicoOTP(t *testing.T, keyHex, pub, uidHex string, use uint16, session uint8) string {
	t.Helper()
	key, _ := hex.DecodeString(keyHex)
	uid, _ := hex.DecodeString(uidHex)
	s, err := otp.EncodeYubico(otp.YubicoToken{PublicID: pub, PrivateID: uid, UseCounter: use, SessionCounter: session, Timestamp: 0x032010, Random: 0xbeef}, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tokHash(mt tokMF) otp.Hash {
	if mt.Hashlib == nil {
		return otp.SHA1
	}
	return otp.HashOrSHA1(*mt.Hashlib)
}

func tokSeed(t *testing.T, mt tokMF) []byte {
	t.Helper()
	k, err := hex.DecodeString(*mt.OTPKeyHex)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestImportTokensFixture imports the fixture's tokens and authenticates
// every active one through the validator with the manifest's PIN and an
// OTP computed from the manifest; the disabled, revoked and locked ones,
// and used OTPs, are rejected. The PINs are the fixture's own argon2id
// hashes (m=100 MiB, t=9): each check costs about a second here, so each
// token is checked by serial, a few times at most.
func TestImportTokensFixture(t *testing.T) {
	dir := tokFixtureDir(t)
	m := tokLoadManifest(t, dir)
	snap := &Snapshot{Tokens: tokSnapshot(t, m, tokPINHashes(t, dir))}
	// An orphan (its owner was deleted from the user store) and a type
	// authsrv lacks.
	orphan := snap.Tokens[len(snap.Tokens)-1]
	orphan.Serial, orphan.ID = "FX-ORPHAN", 100
	orphan.Owners = []Owner{{Resolver: "fixture-passwd", UserID: "4242", Realm: "corp"}}
	snap.Tokens = append(snap.Tokens, orphan, Token{ID: 101, Serial: "FX-PUSH", Type: "push", Active: true})

	s := tokServer(t, dir)
	ctx := t.Context()
	var sum Summary
	if err := importTokens(ctx, s.Ops(), snap, &sum); err != nil {
		t.Fatal(err)
	}
	rows := map[string]Row{}
	for _, r := range sum.Rows {
		if r.Kind != "token" {
			t.Errorf("row of kind %q", r.Kind)
		}
		rows[r.Name] = r
	}
	for _, mt := range m.Tokens {
		r, ok := rows[mt.Serial]
		if !ok || !r.Imported {
			t.Errorf("%s not imported: %+v", mt.Serial, r)
			continue
		}
		if !strings.HasPrefix(r.Detail, mt.Type) {
			t.Errorf("%s: detail %q does not name the type", mt.Serial, r.Detail)
		}
		if mt.User != nil && !strings.Contains(r.Detail, "owner "+*mt.User+"@"+mt.UserRealm) {
			t.Errorf("%s: detail %q does not name the owner", mt.Serial, r.Detail)
		}
		for _, secret := range []string{mt.PIN, mt.OTPKeyText, mt.MOTPPIN} {
			if secret != "" && (strings.Contains(r.Detail, secret) || strings.Contains(r.Reason, secret)) {
				t.Errorf("%s: the summary shows a secret", mt.Serial)
			}
		}
	}
	if r := rows["FX-PUSH"]; r.Imported || r.Reason != "type push is not supported by authsrv" {
		t.Errorf("FX-PUSH: %+v", r)
	}
	if r := rows["FX-ORPHAN"]; !r.Imported || !strings.Contains(r.Detail, "imported unassigned and disabled") {
		t.Errorf("FX-ORPHAN: %+v", r)
	}
	if tok, err := s.Tokens().Get(ctx, "FX-ORPHAN"); err != nil || tok.Assigned() || tok.Active {
		t.Errorf("FX-ORPHAN is assigned or active: %v", err)
	}

	// The stored state.
	for _, mt := range m.Tokens {
		tok, err := s.Tokens().Get(ctx, mt.Serial)
		if err != nil {
			t.Errorf("%s: %v", mt.Serial, err)
			continue
		}
		if tok.FailCount != mt.FailCount || tok.MaxFail != mt.MaxFail || tok.Active != mt.Active || tok.Revoked != mt.Revoked || tok.Locked != mt.Locked {
			t.Errorf("%s: state %d/%d %t %t %t", mt.Serial, tok.FailCount, tok.MaxFail, tok.Active, tok.Revoked, tok.Locked)
		}
		if mt.Type != "daypassword" && tok.Count != mt.Counter {
			t.Errorf("%s: count %d, want %d", mt.Serial, tok.Count, mt.Counter)
		}
		if strings.Join(tok.Realms, ",") != strings.Join(mt.TokenRealms, ",") {
			t.Errorf("%s: realms %v, want %v", mt.Serial, tok.Realms, mt.TokenRealms)
		}
		switch {
		case mt.User == nil && tok.Owner != nil:
			t.Errorf("%s: owner %v, want none", mt.Serial, tok.Owner)
		case mt.User != nil && (tok.Owner == nil || tok.Owner.Login != *mt.User || tok.Owner.UID != mt.UserID || tok.Owner.Realm != mt.UserRealm || tok.Owner.Resolver != mt.Resolver):
			t.Errorf("%s: owner %v", mt.Serial, tok.Owner)
		}
		for k, v := range mt.TokeninfoDB {
			if (v.Type == nil || *v.Type == "") && !strings.HasPrefix(k, "tan.tan") && k != "timeShift" && k != "timeStep" && tok.Info[k] != v.Value {
				t.Errorf("%s: tokeninfo %s = %q, want %q", mt.Serial, k, tok.Info[k], v.Value)
			}
		}
		if mt.Type == "sshkey" && tok.Info["ssh_key"] != mt.SSHKey {
			t.Errorf("%s: ssh_key %q, want %q", mt.Serial, tok.Info["ssh_key"], mt.SSHKey)
		}
	}

	v := s.Validator()
	check := func(serial, pass, txid string) validate.Response {
		t.Helper()
		res, err := v.Check(ctx, validate.Request{Serial: serial, Pass: pass, TransactionID: txid})
		if err != nil {
			return validate.Response{Message: "error: " + err.Error()}
		}
		return res
	}
	expect := func(serial, pass string, want bool, what string) validate.Response {
		t.Helper()
		res := check(serial, pass, "")
		if res.Value != want {
			t.Errorf("%s (%s): value %t (%q), want %t", serial, what, res.Value, res.Message, want)
		}
		return res
	}
	sent := map[string]string{}
	for _, r := range m.Verification.Results {
		if _, ok := sent[r.Serial]; !ok && r.PassSent != "" {
			sent[r.Serial] = r.PassSent
		}
	}
	now := time.Now()
	for _, mt := range m.Tokens {
		pin := mt.PIN
		switch {
		case mt.State != "active":
			// Disabled, revoked, locked: PIN + the next HOTP value is
			// refused.
			expect(mt.Serial, pin+otp.HOTP(tokSeed(t, mt), mt.Counter, mt.OTPLen, tokHash(mt)), false, mt.State)
		case mt.Type == "hotp" || mt.Type == "paper" || mt.Type == "email" || mt.Type == "sms":
			value := otp.HOTP(tokSeed(t, mt), mt.Counter, mt.OTPLen, tokHash(mt))
			if mt.Type == "paper" {
				value = mt.PrintedOTPs[strconv.FormatUint(mt.Counter, 10)]
			}
			if p := sent[mt.Serial]; mt.Serial != "FX-HOTP-LAB-HEIDI" && p != pin+value {
				t.Errorf("%s: the tokManifest's verification sent another value", mt.Serial)
			}
			if mt.Serial == "FX-HOTP-LAB-HEIDI" {
				// By user: the owner index of the imported token. (The
				// otppin=userstore policy of realm lab is not set here.)
				res, err := v.Check(ctx, validate.Request{User: "heidi", Realm: "lab", Pass: pin + value})
				if err != nil || !res.Value || res.Serial != mt.Serial {
					t.Errorf("heidi@lab: %v %q %s %v", res.Value, res.Message, res.Serial, err)
				}
				continue
			}
			expect(mt.Serial, pin+value, true, "next HOTP")
			if mt.Serial == "FX-HOTP6-ALICE" {
				expect(mt.Serial, pin+value, false, "the same HOTP again")
			}
		case mt.Type == "totp":
			expect(mt.Serial, pin+otp.TOTP(tokSeed(t, mt), now, mt.TimestepSecs, 0, mt.OTPLen, tokHash(mt)), true, "TOTP now")
		case mt.Type == "daypassword":
			expect(mt.Serial, pin+otp.DayPassword(tokSeed(t, mt), now, mt.TimestepSecs, mt.OTPLen, tokHash(mt)), true, "day password")
		case mt.Type == "motp":
			expect(mt.Serial, pin+otp.MOTP(*mt.OTPKeyHex, mt.MOTPPIN, now), true, "mOTP now")
		case mt.Type == "spass":
			expect(mt.Serial, pin, true, "PIN only")
		case mt.Type == "pw" || mt.Type == "registration":
			expect(mt.Serial, pin+mt.OTPKeyText, true, "the password")
			if mt.Type == "registration" {
				if _, err := s.Tokens().Get(ctx, mt.Serial); err == nil {
					t.Errorf("%s: the registration token was not deleted after its use", mt.Serial)
				}
			}
		case mt.Type == "tan":
			expect(mt.Serial, pin+mt.TANs["0"], true, "TAN 0")
			expect(mt.Serial, pin+mt.TANs["0"], false, "TAN 0 again")
			expect(mt.Serial, pin+mt.TANs["7"], true, "TAN 7")
		case mt.Type == "yubikey":
			if sent[mt.Serial] == "" {
				t.Fatalf("%s: no verification value", mt.Serial)
			}
			// The OTP privacyIDEA accepted after the copy (use counter 1).
			expect(mt.Serial, sent[mt.Serial], true, "privacyIDEA's verification OTP")
			expect(mt.Serial, sent[mt.Serial], false, "the same OTP again")
			expect(mt.Serial, pin+tokYubicoOTP(t, *mt.OTPKeyHex, mt.PublicID, mt.PrivateUIDHex, 2, 0), true, "a new OTP")
		case mt.Type == "sshkey":
			expect(mt.Serial, pin, false, "not an OTP token")
		case mt.Type == "indexedsecret":
			res := expect(mt.Serial, pin, false, "challenge")
			if res.TransactionID == "" {
				t.Errorf("%s: no challenge: %q", mt.Serial, res.Message)
				continue
			}
			var answer strings.Builder
			for _, p := range regexp.MustCompile(`\d+`).FindAllString(res.Message, -1) {
				n, _ := strconv.Atoi(p)
				answer.WriteByte(mt.OTPKeyText[n-1])
			}
			if r := check(mt.Serial, answer.String(), res.TransactionID); !r.Value {
				t.Errorf("%s: answer to %q refused: %q", mt.Serial, res.Message, r.Message)
			}
		case mt.Type == "question":
			res := expect(mt.Serial, pin, false, "challenge")
			a, ok := mt.Questions[res.Message]
			if res.TransactionID == "" || !ok {
				t.Errorf("%s: challenge %q is not one of the questions", mt.Serial, res.Message)
				continue
			}
			if r := check(mt.Serial, "wrong-"+a, res.TransactionID); r.Value {
				t.Errorf("%s: a wrong answer was accepted", mt.Serial)
			}
			res = expect(mt.Serial, pin, false, "challenge")
			if r := check(mt.Serial, mt.Questions[res.Message], res.TransactionID); !r.Value {
				t.Errorf("%s: the answer to %q was refused: %q", mt.Serial, res.Message, r.Message)
			}
		default:
			t.Errorf("%s: no check for type %s", mt.Serial, mt.Type)
		}
	}
}
