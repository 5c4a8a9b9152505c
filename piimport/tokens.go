package piimport

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// tokenTypes maps privacyIDEA's token types to authsrv's, for the types
// whose secrets and state map clearly. The others (those authsrv lacks:
// push, webauthn, passkey, u2f, tiqr, ocra, vasco, 4eyes, remote, yubico,
// daplug, ...; and unmapped) are skipped with the reason.
var tokenTypes = map[string]string{
	"hotp": "hotp", "totp": "totp", "motp": "motp", "spass": "spass", "pw": "pw",
	"paper": "paper", "tan": "tan", "email": "email", "sms": "sms", "sshkey": "sshkey",
	"yubikey": "yubikey", "registration": "registration", "daypassword": "daypassword",
	"indexedsecret": "indexedsecret", "question": "question", "radius": "radius",
}

// unmapped are the privacyIDEA types authsrv has but the import does not
// bring over, with the reason.
var unmapped = map[string]string{
	"certificate": "enroll the certificates again through the imported CA connector",
	"applspec":    "privacyIDEA's stored application password is not mapped; enroll it again",
}

// consumedInfo are tokeninfo keys that go into the enrollment parameters
// (the type derives its own tokeninfo from them), not into the carried
// tokeninfo. ssh_type and ssh_comment go into the sshkey line and are
// carried too, as privacyIDEA shows them.
var consumedInfo = map[string]bool{
	"hashlib": true, "timeStep": true, "timeWindow": true, "timeShift": true,
	"email": true, "dynamic_email": true, "phone": true, "dynamic_phone": true,
	"ssh_key": true,
}

// importTokens brings every token of snap over, with its secrets, PIN
// hash, counters, state, tokeninfo, owner and realms. A token of a type
// authsrv lacks, or one the library refuses, is skipped with the reason.
// A token whose owner no longer exists in the user store (privacyIDEA
// keeps such orphans, which nobody can use) is imported unassigned and
// disabled: its record and secret are kept, but nobody can use it, not
// even through autoassignment, until an administrator reviews it.
func importTokens(ctx context.Context, o *authsrv.Ops, snap *Snapshot, sum *Summary) error {
	var recs []token.Migrated
	detail := map[string]string{}
	for _, t := range snap.Tokens {
		m, reason := migrateToken(t)
		if reason != "" {
			sum.Skip("token", t.Serial, reason)
			continue
		}
		recs = append(recs, m)
		detail[m.Serial] = t.Type
		if m.Type != t.Type {
			detail[m.Serial] = t.Type + " (as " + m.Type + ")"
		}
	}
	res, err := o.ImportMigratedTokens(ctx, caller.Caller{}, recs)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	failed := map[string]string{}
	for _, f := range res.NotImported {
		failed[f.Serial] = f.Reason
	}
	var orphans []token.Migrated
	for _, m := range recs {
		if r, ok := failed[m.Serial]; ok && strings.HasPrefix(r, authsrv.ReasonOwnerUnknown) {
			m.Owner, m.Active = nil, false
			orphans = append(orphans, m)
			detail[m.Serial] += "; " + r + ": imported unassigned and disabled"
			delete(failed, m.Serial)
		}
	}
	if len(orphans) > 0 {
		res2, err := o.ImportMigratedTokens(ctx, caller.Caller{}, orphans)
		if err != nil {
			return fmt.Errorf("tokens: %w", err)
		}
		for _, f := range res2.NotImported {
			failed[f.Serial] = f.Reason
		}
	}
	for _, m := range recs {
		if r, ok := failed[m.Serial]; ok {
			sum.Skip("token", m.Serial, r)
			continue
		}
		d := detail[m.Serial]
		if u, ok := res.Owners[m.Serial]; ok {
			d += ", owner " + u.Login + "@" + u.Realm
		}
		sum.Add("token", m.Serial, d)
	}
	return nil
}

// migrateToken maps one privacyIDEA token to the library's record, or
// says why it cannot be brought over.
func migrateToken(t Token) (token.Migrated, string) {
	typ, ok := tokenTypes[strings.ToLower(t.Type)]
	if !ok {
		if why, has := unmapped[strings.ToLower(t.Type)]; has {
			return token.Migrated{}, "type " + t.Type + " is not brought over: " + why
		}
		return token.Migrated{}, "type " + t.Type + " is not supported by authsrv"
	}
	m := token.Migrated{
		Serial: t.Serial, Type: typ, Description: t.Description, OTPLen: t.OTPLen,
		Params: token.Params{}, PINHash: t.PINHash,
		Count: t.Count, CountWindow: t.CountWindow, SyncWindow: t.SyncWindow,
		FailCount: t.FailCount, MaxFail: t.MaxFail,
		Active: t.Active, Revoked: t.Revoked, Locked: t.Locked,
		Info: map[string]string{}, Realms: t.Realms,
	}
	if t.RolloutState != "" && t.RolloutState != token.StateEnrolled {
		m.RolloutState = t.RolloutState
	}
	info := map[string]string{}
	secrets := map[string]string{}
	for _, i := range t.Info {
		if i.Secret || i.Type == "password" {
			secrets[i.Key] = i.Value
			continue
		}
		info[i.Key] = i.Value
	}
	p := m.Params
	// Type-specific tokeninfo ("yubikey.prefix", "tan.tan0", "email.identifier",
	// "radius.identifier", ...) is an enrollment parameter of the same name.
	prefix := strings.ToLower(t.Type) + "."
	for k, v := range info {
		switch {
		case strings.HasPrefix(k, prefix):
			p[k] = v
		case consumedInfo[k]:
		default:
			m.Info[k] = v
		}
	}
	key := string(t.Key)
	switch typ {
	case "hotp", "totp", "paper", "email", "sms", "daypassword", "spass", "tan":
		if key == "" && typ != "tan" {
			return m, "the token has no OTP key"
		}
		if key != "" {
			p["otpkey"] = key
		}
		for _, k := range []string{"hashlib", "timeStep", "timeWindow", "timeShift"} {
			if v := info[k]; v != "" && (k == "hashlib" || typ == "totp" || (typ == "daypassword" && k == "timeStep")) {
				p[k] = v
			}
		}
		switch typ {
		case "email":
			if token.IsTrue(info["dynamic_email"]) {
				p["dynamic_email"] = "1"
			} else {
				p["email"] = info["email"]
			}
		case "sms":
			if token.IsTrue(info["dynamic_phone"]) {
				p["dynamic_phone"] = "1"
			} else {
				p["phone"] = info["phone"]
			}
		}
	case "motp":
		if key == "" || len(t.UserPIN) == 0 {
			return m, "the mOTP token has no key or no mOTP PIN"
		}
		p["otpkey"], p["motppin"] = key, string(t.UserPIN)
	case "pw", "indexedsecret", "registration":
		if key == "" {
			return m, "the token has no secret"
		}
		p["otpkey"] = key
	case "yubikey":
		if key == "" {
			return m, "the YubiKey has no AES key"
		}
		p["otpkey"] = key
		if v := info["yubikey.tokenid"]; v != "" {
			p[token.InfoYubikeyUID] = v
		}
	case "sshkey":
		k := strings.TrimSpace(secrets["ssh_key"])
		if k == "" {
			return m, "the SSH key token has no key"
		}
		line := k
		if !strings.Contains(k, " ") {
			line = strings.TrimSpace(info["ssh_type"] + " " + k + " " + info["ssh_comment"])
		}
		p["sshkey"] = line
	case "question":
		if len(secrets) == 0 {
			return m, "the questionnaire has no questions"
		}
		qa, err := json.Marshal(secrets)
		if err != nil {
			return m, "the questions could not be read"
		}
		p["questions"] = string(qa)
	}
	if len(t.Owners) > 0 {
		ow := t.Owners[0]
		m.Owner = &user.User{Realm: ow.Realm, Resolver: ow.Resolver, UID: ow.UserID}
	}
	return m, ""
}
