package piimport_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/piimport"
)

// fixtureDir is the privacyIDEA 3.10.2 fixture (tests copy what they
// change).
const fixtureDir = "testdata/privacyidea-3.10.2"

type manifest struct {
	Secrets struct {
		SMTPPassword  string `json:"smtp_password"`
		RadiusSecret  string `json:"radius_secret"`
		SMSPassword   string `json:"sms_gateway_password"`
		EncKeyHex     string `json:"enckey_hex"`
		PIPepper      string `json:"PI_PEPPER"`
		AdminPassword string
	} `json:"secrets"`
	Tokens []struct {
		Serial       string   `json:"serial"`
		Type         string   `json:"type"`
		User         *string  `json:"user"`
		UserRealm    *string  `json:"user_realm"`
		Resolver     *string  `json:"resolver"`
		UserID       *string  `json:"user_id"`
		TokenRealms  []string `json:"token_realms"`
		Description  string   `json:"description"`
		OTPKeyHex    *string  `json:"otpkey_hex"`
		OTPKeyText   *string  `json:"otpkey_text"`
		MOTPPIN      string   `json:"motppin"`
		OTPLen       int      `json:"otplen"`
		Counter      uint64   `json:"counter"`
		CountWindow  int      `json:"count_window"`
		SyncWindow   int      `json:"sync_window"`
		Active       bool     `json:"active"`
		Revoked      bool     `json:"revoked"`
		Locked       bool     `json:"locked"`
		FailCount    int      `json:"failcount"`
		MaxFail      int      `json:"maxfail"`
		RolloutState string   `json:"rollout_state"`
		SSHKey       string   `json:"sshkey"`
		Questions    map[string]string
		TokenInfoDB  map[string]struct {
			Value string  `json:"value"`
			Type  *string `json:"type"`
		} `json:"tokeninfo_db"`
	} `json:"tokens"`
	Realms           map[string]map[string]any `json:"realms"`
	DefaultRealm     string                    `json:"default_realm"`
	SystemConfig     map[string]string         `json:"system_config"`
	Resolvers        map[string]map[string]string
	MachineResolvers map[string]map[string]string `json:"machineresolvers"`
	CAConnectors     map[string]map[string]string `json:"caconnectors"`
	ServiceIDs       map[string]struct {
		Description string `json:"description"`
	} `json:"serviceids"`
	SMTPServers   map[string]map[string]any `json:"smtpservers"`
	RadiusServers map[string]map[string]any `json:"radiusservers"`
	SMSGateways   []map[string]string       `json:"smsgateways"`
	MachineTokens struct {
		Reported []struct {
			Serial      string            `json:"serial"`
			Application string            `json:"application"`
			MachineID   string            `json:"machine_id"`
			Resolver    string            `json:"resolver"`
			Options     map[string]string `json:"options"`
		} `json:"reported"`
	} `json:"machine_tokens"`
	Attributes struct {
		Reported map[string]string `json:"reported"`
	} `json:"custom_user_attributes"`
	Events   []map[string]any `json:"event_handlers"`
	Policies []struct {
		Name string         `json:"name"`
		Sent map[string]any `json:"sent"`
	} `json:"policies"`
	Database struct {
		RowCounts map[string]int `json:"row_counts"`
	} `json:"database"`
}

func loadManifest(t *testing.T) *manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Tokens []struct {
			Questions map[string]string `json:"questions"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for i := range m.Tokens {
		m.Tokens[i].Questions = raw.Tokens[i].Questions
	}
	return &m
}

// copyFixtureDB copies pi.sqlite into a temporary directory.
func copyFixtureDB(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "pi.sqlite"))
	if err != nil {
		t.Skipf("privacyIDEA fixture missing: %v", err)
	}
	p := filepath.Join(t.TempDir(), "pi.sqlite")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func fixtureKeys(t *testing.T) *piimport.Keys {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, "enckey"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := piimport.ParseEncKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func readSource(t *testing.T, source string, keys *piimport.Keys) (*piimport.Snapshot, error) {
	t.Helper()
	db, err := piimport.Open(t.Context(), source)
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }()
	return piimport.Read(t.Context(), db, keys)
}

func hashFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestReadFixture(t *testing.T) {
	m := loadManifest(t)
	path := copyFixtureDB(t)
	before := hashFile(t, path)
	snap, err := readSource(t, "sqlite:///"+path, fixtureKeys(t))
	if err != nil {
		t.Fatal(err)
	}
	if after := hashFile(t, path); after != before {
		t.Error("reading changed the SQLite file")
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("reading left files beside the database: %v", entries)
	}
	if snap.Revision != "eac770c0bbed" || snap.Version != "3.10.2" {
		t.Errorf("revision %q version %q", snap.Revision, snap.Version)
	}
	checkTokens(t, m, snap)
	checkConfiguration(t, m, snap)
}

func checkTokens(t *testing.T, m *manifest, snap *piimport.Snapshot) {
	t.Helper()
	if len(snap.Tokens) != len(m.Tokens) {
		t.Fatalf("%d tokens, manifest has %d", len(snap.Tokens), len(m.Tokens))
	}
	byserial := map[string]piimport.Token{}
	for _, tok := range snap.Tokens {
		byserial[tok.Serial] = tok
	}
	for _, want := range m.Tokens {
		t.Run(want.Serial, func(t *testing.T) {
			got, ok := byserial[want.Serial]
			if !ok {
				t.Fatal("missing")
			}
			wantKey := ""
			switch {
			case want.OTPKeyText != nil:
				wantKey = *want.OTPKeyText
			case want.OTPKeyHex != nil:
				wantKey = *want.OTPKeyHex
			}
			if string(got.Key) != wantKey {
				t.Errorf("key: got %d bytes, not the manifest's %d-byte secret", len(got.Key), len(wantKey))
			}
			if string(got.UserPIN) != want.MOTPPIN {
				t.Errorf("user PIN: got %d bytes, want the manifest's motppin", len(got.UserPIN))
			}
			if !strings.HasPrefix(got.PINHash, "$argon2id$v=19$") {
				t.Errorf("PIN hash %q is not argon2id", got.PINHash)
			}
			if got.Type != want.Type || got.Description != want.Description || got.OTPLen != want.OTPLen ||
				got.Count != want.Counter || got.CountWindow != want.CountWindow || got.SyncWindow != want.SyncWindow ||
				got.FailCount != want.FailCount || got.MaxFail != want.MaxFail || got.RolloutState != want.RolloutState ||
				got.Active != want.Active || got.Revoked != want.Revoked || got.Locked != want.Locked {
				t.Errorf("got %+v", got)
			}
			if !reflect.DeepEqual(got.Realms, want.TokenRealms) {
				t.Errorf("realms %v, want %v", got.Realms, want.TokenRealms)
			}
			var wantOwners []piimport.Owner
			if want.User != nil {
				wantOwners = []piimport.Owner{{Resolver: deref(want.Resolver), UserID: deref(want.UserID), Realm: deref(want.UserRealm)}}
			}
			if !reflect.DeepEqual(got.Owners, wantOwners) {
				t.Errorf("owners %v, want %v", got.Owners, wantOwners)
			}
			if len(got.Info) != len(want.TokenInfoDB) {
				t.Errorf("%d tokeninfo rows, want %d", len(got.Info), len(want.TokenInfoDB))
			}
			for _, info := range got.Info {
				w, ok := want.TokenInfoDB[info.Key]
				if !ok {
					t.Errorf("unexpected tokeninfo %s", info.Key)
					continue
				}
				if info.Type != deref(w.Type) || info.Secret != (info.Type == "password") {
					t.Errorf("tokeninfo %s", info)
				}
				switch {
				case info.Key == "ssh_key":
					// privacyIDEA keeps the key's base64 blob there; type
					// and comment are in ssh_type and ssh_comment.
					if f := strings.Fields(want.SSHKey); len(f) != 3 || info.Value != f[1] {
						t.Errorf("ssh_key does not decrypt to the manifest's key")
					}
				case info.Secret:
					if a, ok := want.Questions[info.Key]; !ok || info.Value != a {
						t.Errorf("answer to %q does not decrypt to the manifest's", info.Key)
					}
				case info.Value != w.Value:
					t.Errorf("tokeninfo %s = %q, want %q", info.Key, info.Value, w.Value)
				}
				if strings.Contains(info.String(), "Hamburg") {
					t.Errorf("TokenInfo.String leaks a secret value")
				}
			}
			if want.Type == "question" && len(want.Questions) != 5 {
				t.Errorf("manifest: %d questions", len(want.Questions))
			}
			if s := fmt.Sprintf("%v %+v %#v", got.Key, got, got); wantKey != "" && strings.Contains(s, wantKey) {
				t.Error("printing a token shows its secret")
			}
		})
	}
}

func checkConfiguration(t *testing.T, m *manifest, snap *piimport.Snapshot) {
	t.Helper()
	// Realms and the default realm.
	if len(snap.Realms) != len(m.Realms) {
		t.Errorf("%d realms, want %d", len(snap.Realms), len(m.Realms))
	}
	for _, r := range snap.Realms {
		want, ok := m.Realms[r.Name]
		if !ok {
			t.Errorf("unexpected realm %s", r.Name)
			continue
		}
		if r.Default != (r.Name == m.DefaultRealm) {
			t.Errorf("realm %s default %v", r.Name, r.Default)
		}
		if len(r.Resolvers) != 1 || r.Resolvers[0].Resolver != want["resolvers"] || !r.Resolvers[0].HasPriority ||
			float64(r.Resolvers[0].Priority) != want["priority."+r.Resolvers[0].Resolver] {
			t.Errorf("realm %s resolvers %+v, want %v", r.Name, r.Resolvers, want)
		}
	}
	// Resolvers, machine resolvers, CA connectors: every configured key.
	checkDefs := func(kind, name, typ string, cfg map[string]piimport.ConfigValue, want map[string]map[string]string) {
		t.Helper()
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected %s %s", kind, name)
			return
		}
		if typ != w["type"] {
			t.Errorf("%s %s type %q, want %q", kind, name, typ, w["type"])
		}
		for k, v := range w {
			if k != "type" && cfg[k].Value != v {
				t.Errorf("%s %s: %s = %q, want %q", kind, name, k, cfg[k].Value, v)
			}
		}
	}
	if len(snap.Resolvers) != len(m.Resolvers) || len(snap.MachineResolvers) != len(m.MachineResolvers) || len(snap.CAConnectors) != len(m.CAConnectors) {
		t.Errorf("%d resolvers, %d machine resolvers, %d CA connectors", len(snap.Resolvers), len(snap.MachineResolvers), len(snap.CAConnectors))
	}
	for _, r := range snap.Resolvers {
		checkDefs("resolver", r.Name, r.Type, r.Config, m.Resolvers)
	}
	for _, r := range snap.MachineResolvers {
		checkDefs("machine resolver", r.Name, r.Type, r.Config, m.MachineResolvers)
	}
	for _, c := range snap.CAConnectors {
		checkDefs("CA connector", c.Name, c.Type, c.Config, m.CAConnectors)
		// privacyIDEA also stores the name among the keys.
		if len(c.Config) != len(m.CAConnectors[c.Name]) || c.Config["name"].Value != c.Name {
			t.Errorf("CA connector %s: %d config keys", c.Name, len(c.Config))
		}
	}

	// System settings, without __timestamp__.
	gotConfig := map[string]string{}
	for _, c := range snap.Config {
		gotConfig[c.Key] = c.Value
	}
	if !reflect.DeepEqual(gotConfig, m.SystemConfig) {
		t.Errorf("config %v, want %v", gotConfig, m.SystemConfig)
	}

	// Policies.
	if len(snap.Policies) != 11 || len(m.Policies) != 11 {
		t.Fatalf("%d policies, manifest %d", len(snap.Policies), len(m.Policies))
	}
	for i, p := range snap.Policies {
		w := m.Policies[i]
		sent := func(k string) string { s, _ := w.Sent[k].(string); return s }
		wantActive := w.Name != "auth-passthru-inactive"
		if p.Name != w.Name || p.Scope != sent("scope") || p.Action != sent("action") || p.Realm != sent("realm") ||
			p.AdminUser != sent("adminuser") || p.Client != sent("client") || p.Description != sent("description") ||
			float64(p.Priority) != w.Sent["priority"] || p.Active != wantActive {
			t.Errorf("policy %d: %+v, want %v", i, p, w.Sent)
		}
		var wantConds []piimport.PolicyCondition
		if cs, ok := w.Sent["conditions"].([]any); ok {
			for _, c := range cs {
				c := c.([]any)
				wantConds = append(wantConds, piimport.PolicyCondition{Section: c[0].(string), Key: c[1].(string),
					Comparator: c[2].(string), Value: c[3].(string), Active: c[4].(bool)})
			}
		}
		if !reflect.DeepEqual(p.Conditions, wantConds) {
			t.Errorf("policy %s conditions %+v, want %+v", p.Name, p.Conditions, wantConds)
		}
	}

	// Servers and gateways, with their secrets.
	if len(snap.SMTPServers) != 1 || len(snap.RadiusServers) != 1 || len(snap.SMSGateways) != 1 {
		t.Fatalf("%d SMTP, %d RADIUS servers, %d SMS gateways", len(snap.SMTPServers), len(snap.RadiusServers), len(snap.SMSGateways))
	}
	smtp, wsmtp := snap.SMTPServers[0], m.SMTPServers[snap.SMTPServers[0].Identifier]
	if string(smtp.Password) != m.Secrets.SMTPPassword || smtp.Server != wsmtp["server"] || float64(smtp.Port) != wsmtp["port"] ||
		smtp.Username != wsmtp["username"] || smtp.Sender != wsmtp["sender"] || smtp.TLS != wsmtp["tls"] ||
		float64(smtp.Timeout) != wsmtp["timeout"] || smtp.EnqueueJob != wsmtp["enqueue_job"] || smtp.Description != wsmtp["description"] {
		t.Errorf("SMTP server %+v, want %v", smtp, wsmtp)
	}
	rad, wrad := snap.RadiusServers[0], m.RadiusServers[snap.RadiusServers[0].Identifier]
	if string(rad.Secret) != m.Secrets.RadiusSecret || rad.Server != wrad["server"] || float64(rad.Port) != wrad["port"] ||
		rad.Dictionary != wrad["dictionary"] || float64(rad.Retries) != wrad["retries"] || float64(rad.Timeout) != wrad["timeout"] {
		t.Errorf("RADIUS server %+v, want %v", rad, wrad)
	}
	if s := fmt.Sprintf("%v %+v", smtp, rad); strings.Contains(s, m.Secrets.SMTPPassword) || strings.Contains(s, m.Secrets.RadiusSecret) {
		t.Error("printing a server shows its secret")
	}
	sms, wsms := snap.SMSGateways[0], m.SMSGateways[0]
	if sms.Identifier != wsms["name"] || sms.ProviderModule != wsms["module"] || sms.Description != wsms["description"] || len(sms.Options) != 10 {
		t.Errorf("SMS gateway %+v", sms)
	}
	for _, o := range sms.Options {
		if w, ok := wsms[o.Type+"."+o.Key]; !ok || w != o.Value {
			t.Errorf("SMS option %s.%s = %q, want %q", o.Type, o.Key, o.Value, w)
		}
	}

	// Machine tokens, service IDs, attributes, events, admins.
	if len(snap.MachineTokens) != len(m.MachineTokens.Reported) {
		t.Fatalf("%d machine tokens", len(snap.MachineTokens))
	}
	for i, mt := range snap.MachineTokens {
		w := m.MachineTokens.Reported[i]
		wantResolver, wantMachine := w.Resolver, w.MachineID
		if wantResolver == "no resolver" {
			wantResolver, wantMachine = "", ""
		}
		if mt.Serial != w.Serial || mt.Application != w.Application || mt.MachineResolver != wantResolver ||
			mt.MachineID != wantMachine || !reflect.DeepEqual(mt.Options, w.Options) {
			t.Errorf("machine token %d: %+v, want %+v", i, mt, w)
		}
	}
	gotIDs := map[string]string{}
	for _, s := range snap.ServiceIDs {
		gotIDs[s.Name] = s.Description
	}
	for name, w := range m.ServiceIDs {
		if gotIDs[name] != w.Description {
			t.Errorf("service ID %s: %q", name, gotIDs[name])
		}
	}
	if len(snap.ServiceIDs) != len(m.ServiceIDs) {
		t.Errorf("%d service IDs", len(snap.ServiceIDs))
	}
	if len(snap.Attributes) != len(m.Attributes.Reported) {
		t.Errorf("%d attributes", len(snap.Attributes))
	}
	for _, a := range snap.Attributes {
		if a.UserID != "1001" || a.Resolver != "fixture-passwd" || a.Realm != "corp" || a.Value != m.Attributes.Reported[a.Key] {
			t.Errorf("attribute %+v", a)
		}
	}
	if len(snap.Events) != 1 {
		t.Fatalf("%d event handlers", len(snap.Events))
	}
	ev, wev := snap.Events[0], m.Events[0]
	if ev.Name != wev["name"] || ev.Event != wev["event"] || ev.HandlerModule != wev["handlermodule"] || ev.Action != wev["action"] ||
		ev.Position != wev["position"] || float64(ev.Ordering) != wev["ordering"] || ev.Active != wev["active"] {
		t.Errorf("event handler %+v, want %v", ev, wev)
	}
	wantConds := []piimport.EventCondition{}
	for k, v := range wev["conditions"].(map[string]any) {
		wantConds = append(wantConds, piimport.EventCondition{Key: k, Value: v.(string)})
	}
	if len(ev.Conditions) != 1 || ev.Conditions[0].Key != wantConds[0].Key || ev.Conditions[0].Value != wantConds[0].Value {
		t.Errorf("event conditions %+v, want %+v", ev.Conditions, wantConds)
	}
	if len(ev.Options) != 5 {
		t.Errorf("%d event options", len(ev.Options))
	}
	for _, o := range ev.Options {
		if wev["option."+o.Key] != o.Value {
			t.Errorf("event option %s = %q", o.Key, o.Value)
		}
	}
	if len(snap.Admins) != 1 || snap.Admins[0].Username != "admin" || !strings.HasPrefix(snap.Admins[0].PasswordHash, "$argon2id$") {
		t.Errorf("admins %+v", snap.Admins)
	}

	// Every other table with rows is listed with a reason.
	unread := map[string]string{}
	for _, r := range snap.Unread {
		if r.Kind != "table" || r.Imported || r.Reason == "" {
			t.Errorf("unread row %+v", r)
		}
		unread[r.Name] = r.Reason
	}
	want := map[string]bool{"pidea_audit": true, "clientapplication": true, "nodename": true}
	for name := range want {
		if unread[name] == "" {
			t.Errorf("table %s not listed as unread", name)
		}
	}
	if len(unread) != len(want) {
		t.Errorf("unread tables %v", unread)
	}
	if r := unread["pidea_audit"]; !strings.Contains(r, "96 rows") {
		t.Errorf("pidea_audit reason %q", r)
	}
}

// TestReadWrongKey flips one byte of each key: the first value that key
// encrypts stops Read with ErrWrongKey naming it.
func TestReadWrongKey(t *testing.T) {
	path := copyFixtureDB(t)
	good, err := os.ReadFile(filepath.Join(fixtureDir, "enckey"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		at   int
		what string
	}{
		{"token key", 5, "token FX-HOTP6-ALICE's seed"},
		{"config key", 40, "token FX-SSHKEY-DAVE's tokeninfo \"ssh_key\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := append([]byte(nil), good...)
			bad[tc.at] ^= 0x55
			k, err := piimport.ParseEncKey(bad)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := readSource(t, path, k)
			if !errors.Is(err, piimport.ErrWrongKey) {
				t.Fatalf("got %v, %v; want ErrWrongKey", snap, err)
			}
			t.Log(err)
			if !strings.Contains(err.Error(), tc.what) {
				t.Errorf("error %q does not name %s", err, tc.what)
			}
		})
	}
}

func TestReadUnsupportedVersion(t *testing.T) {
	path := copyFixtureDB(t)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.Exec(`UPDATE alembic_version SET version_num = 'ffffffffffff'`); err != nil {
		t.Fatal(err)
	}
	_, err = readSource(t, path, fixtureKeys(t))
	if !errors.Is(err, piimport.ErrUnsupportedVersion) {
		t.Fatalf("got %v, want ErrUnsupportedVersion", err)
	}
	for _, want := range []string{"ffffffffffff", "privacyIDEA 3.10.2 (alembic eac770c0bbed)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	t.Log(err)

	// No revision at all (tables created without stamping).
	if _, err := db.Exec(`DELETE FROM alembic_version`); err != nil {
		t.Fatal(err)
	}
	if _, err = readSource(t, path, fixtureKeys(t)); !errors.Is(err, piimport.ErrUnsupportedVersion) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty alembic_version: %v", err)
	}

	// 3.10 and 3.10.1 have the same tables as far as the import reads.
	if _, err := db.Exec(`INSERT INTO alembic_version VALUES ('69e7817b9863')`); err != nil {
		t.Fatal(err)
	}
	snap, err := readSource(t, path, fixtureKeys(t))
	if err != nil || snap.Version != "3.10 or 3.10.1" || len(snap.Tokens) != 23 {
		t.Errorf("3.10: %v", err)
	}
}

func TestReadNotPrivacyIDEA(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.sqlite")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT)`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	_, err = readSource(t, path, fixtureKeys(t))
	t.Log(err)
	if !errors.Is(err, piimport.ErrNotPrivacyIDEA) || !strings.Contains(err.Error(), "not a privacyIDEA database") {
		t.Fatalf("got %v, want ErrNotPrivacyIDEA", err)
	}

	// Not a database at all.
	junk := filepath.Join(t.TempDir(), "junk.sqlite")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not sqlite ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readSource(t, junk, fixtureKeys(t)); err == nil {
		t.Fatal("a file that is not SQLite was read")
	}
}

func TestOpenMissingFile(t *testing.T) {
	dir := t.TempDir()
	for _, source := range []string{filepath.Join(dir, "nope.sqlite"), "sqlite:///" + filepath.Join(dir, "nope2.sqlite")} {
		if db, err := piimport.Open(t.Context(), source); err == nil {
			_ = db.Close()
			t.Errorf("%s: opened", source)
		} else if !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("%s: %v", source, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("Open created %v", entries)
	}
}

func TestOpenSources(t *testing.T) {
	path := copyFixtureDB(t)
	for _, source := range []string{path, "sqlite:///" + path, "sqlite+pysqlite:///" + path + "?check_same_thread=false"} {
		db, err := piimport.Open(t.Context(), source)
		if err != nil {
			t.Errorf("%s: %v", source, err)
			continue
		}
		_ = db.Close()
	}
	// Errors never show the password, whatever goes wrong.
	for _, source := range []string{
		"mysql+pymysql://pi:S3cret-Pw@127.0.0.1:1/pi",
		"postgresql+psycopg2://pi:S3cret-Pw@127.0.0.1:1/pi",
		"postgresql://pi:S3cret-Pw@127.0.0.1:1/pi?sslmode=bogus",
		"mysql://pi:S3cret-Pw@[::1/pi",
		"oracle://pi:S3cret-Pw@127.0.0.1/pi",
		"sqlite://",
	} {
		db, err := piimport.Open(t.Context(), source)
		if err == nil {
			_ = db.Close()
			t.Errorf("%s: opened", source)
			continue
		}
		t.Logf("%v", err)
		if strings.Contains(err.Error(), "S3cret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// TestReadPostgres loads the fixture into PostgreSQL as privacyIDEA's
// schema would be there and reads the same Snapshot as from SQLite.
func TestReadPostgres(t *testing.T) {
	path := copyFixtureDB(t)
	keys := fixtureKeys(t)
	want, err := readSource(t, path, keys)
	if err != nil {
		t.Fatal(err)
	}
	pg := testsvc.Postgres(t)
	dsn := testsvc.LoadPrivacyIDEAFixture(t, pg, path)
	if !strings.HasPrefix(dsn, "postgresql://") {
		t.Errorf("dsn %q", dsn)
	}
	got, err := readSource(t, dsn, keys)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PostgreSQL snapshot differs from SQLite's")
		gv, wv := reflect.ValueOf(*got), reflect.ValueOf(*want)
		for i := range gv.NumField() {
			if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
				t.Errorf("field %s differs", gv.Type().Field(i).Name)
			}
		}
	}
	// The PostgreSQL URL with a driver name, as pi.cfg would have it.
	if _, err := readSource(t, strings.Replace(dsn, "postgresql://", "postgresql+psycopg2://", 1), keys); err != nil {
		t.Error(err)
	}
	if _, err := readSource(t, strings.Replace(dsn, pg.Password, "wrong", 1), keys); err == nil || strings.Contains(err.Error(), pg.Password) {
		t.Errorf("wrong password: %v", err)
	}
}

// legacyEncrypt encrypts text as privacyIDEA before 3.0 did: hex of the
// text, 0x01 0x02, zero bytes up to the block size.
func legacyEncrypt(t *testing.T, key, iv []byte, text string) string {
	t.Helper()
	p := append([]byte(hex.EncodeToString([]byte(text))), 1, 2)
	for len(p)%aes.BlockSize != 0 {
		p = append(p, 0)
	}
	c, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(p))
	cipher.NewCBCEncrypter(c, iv).CryptBlocks(out, p)
	return hex.EncodeToString(out)
}

// TestReadLegacyPadding reads values written by privacyIDEA 2.x, which an
// upgraded installation still holds, and refuses an oversized value.
func TestReadLegacyPadding(t *testing.T) {
	path := copyFixtureDB(t)
	rawKey, err := os.ReadFile(filepath.Join(fixtureDir, "enckey"))
	if err != nil {
		t.Fatal(err)
	}
	iv := bytes.Repeat([]byte{7}, aes.BlockSize)
	seed := "3132333435363738393031323334353637383930"
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.Exec(`UPDATE token SET key_enc = ?, key_iv = ? WHERE serial = 'FX-HOTP6-ALICE'`,
		legacyEncrypt(t, rawKey[:32], iv, seed), hex.EncodeToString(iv)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE radiusserver SET secret = ?`,
		hex.EncodeToString(iv)+":"+legacyEncrypt(t, rawKey[32:64], iv, "Legacy-Radius-1")); err != nil {
		t.Fatal(err)
	}
	snap, err := readSource(t, path, fixtureKeys(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(snap.Tokens[0].Key) != seed || snap.Tokens[0].Serial != "FX-HOTP6-ALICE" {
		t.Errorf("legacy seed of %s not decrypted", snap.Tokens[0].Serial)
	}
	if string(snap.RadiusServers[0].Secret) != "Legacy-Radius-1" {
		t.Error("legacy RADIUS secret not decrypted")
	}

	// A value beyond what the column takes is refused.
	if _, err := db.Exec(`UPDATE tokeninfo SET "Value" = printf('%.*c', 2000000, 'x') WHERE "Key" = 'asset_tag'`); err != nil {
		t.Fatal(err)
	}
	_, err = readSource(t, path, fixtureKeys(t))
	if err == nil || !strings.Contains(err.Error(), "reading tokeninfo") || !strings.Contains(err.Error(), "more than the 1048576") {
		t.Errorf("oversized tokeninfo value: %v", err)
	}
	t.Logf("%v", err)
}
