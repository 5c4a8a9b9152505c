package piimport

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	smtpd "github.com/emersion/go-smtp"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/builtin"
	"github.com/authsrv/authsrv/token"
)

// cfgFixtureDir is the privacyIDEA 3.10.2 fixture (read-only).
const cfgFixtureDir = "testdata/privacyidea-3.10.2"

// cfgSuperuserAction is the action of the fixture's policy
// admin-superuser, as the database holds it.
const cfgSuperuserAction = "adduser, assign, auditlog, auditlog_download, caconnectordelete, caconnectorread, caconnectorwrite, clienttype, configdelete, configread, configwrite, container_add_token, container_assign_user, container_create, container_delete, container_description, container_info, container_list, container_realms, container_remove_token, container_state, container_unassign_user, copytokenpin, copytokenuser, delete, deleteuser, disable, enable, enroll4EYES, enrollAPPLSPEC, enrollCERTIFICATE, enrollDAPLUG, enrollDAYPASSWORD, enrollEMAIL, enrollHOTP, enrollINDEXEDSECRET, enrollMOTP, enrollOCRA, enrollPAPER, enrollPUSH, enrollPW, enrollQUESTION, enrollRADIUS, enrollREGISTRATION, enrollREMOTE, enrollSMS, enrollSPASS, enrollSSHKEY, enrollTAN, enrollTIQR, enrollTOTP, enrollU2F, enrollVASCO, enrollWEBAUTHN, enrollYUBICO, enrollYUBIKEY, enrollpin, eventhandling_read, eventhandling_write, fetch_authentication_items, getchallenges, getrandom, getserial, importtokens, losttoken, machinelist, manage_machine_tokens, managesubscription, mresolverdelete, mresolverread, mresolverwrite, periodictask_read, periodictask_write, policydelete, policyread, policywrite, privacyideaserver_read, privacyideaserver_write, radiusserver_read, radiusserver_write, reset, resolverdelete, resolverread, resolverwrite, resync, revoke, serviceid_add, serviceid_delete, serviceid_list, set, set_hsm_password, setdescription, setpin, setrandompin, settokeninfo, smsgateway_read, smsgateway_write, smtpserver_read, smtpserver_write, statistics_delete, statistics_read, system_documentation, tokengroup_add, tokengroup_delete, tokengroup_list, tokengroups, tokenlist, tokenrealms, triggerchallenge, unassign, updateuser, userlist, set_custom_user_attributes=:*: *, delete_custom_user_attributes=*, otp_pin_minlength=4, otp_pin_maxlength=31"

// Test-only secrets of the fixture (manifest.json "secrets").
const (
	cfgSMTPPassword = "Smtp-Secret-1"
	cfgRadiusSecret = "Radius-Secret-1"
	cfgPepper       = "38f7c640582ee5e2b4257df7e3b29570da5132acff61bd98"
	cfgAdminHash    = "$argon2id$v=19$m=102400,t=9,p=8$nzMmRGhNqRUCYMx5j3Fu7Q$GjFdODHctCbPpkhSTCVHMw"
)

func cfgStr(v string) ConfigValue { return ConfigValue{Value: v, Type: "string"} }

// cfgSnapshot holds the fixture's configuration objects as its
// database and manifest.json describe them, plus objects authsrv refuses
// (an HTTP resolver, an unknown setting, an unknown event handler module,
// a node-specific realm entry of a privacyIDEA node).
func cfgSnapshot() *Snapshot {
	return &Snapshot{
		Revision: "eac770c0bbed", Version: "3.10.2",
		Resolvers: []Resolver{
			{Name: "fixture-passwd", Type: "passwdresolver", Config: map[string]ConfigValue{"fileName": cfgStr("/tmp/pifix-users.passwd")}},
			{Name: "corp-ldap", Type: "ldapresolver", Config: map[string]ConfigValue{
				"LDAPURI": cfgStr("ldap://192.0.2.30"), "LDAPBASE": cfgStr("ou=people,dc=example,dc=com"),
				"BINDDN": cfgStr("cn=pi,dc=example,dc=com"), "BINDPW": {Value: "Ldap-Secret-1", Type: "password"},
				"LOGINNAMEATTRIBUTE": cfgStr("uid"), "LDAPSEARCHFILTER": cfgStr("(objectClass=inetOrgPerson)"),
				"USERINFO": cfgStr(`{"username": "uid", "email": "mail", "givenname": "givenName"}`),
				"UIDTYPE":  cfgStr("entryUUID"), "TIMEOUT": {Value: "5", Type: "int"}, "AUTHTYPE": cfgStr("Simple"),
				"SIZELIMIT": {Value: "500", Type: "int"}, "NOREFERRALS": {Value: "True", Type: "bool"},
				"CACHE_TIMEOUT": {Value: "120", Type: "int"}, "EDITABLE": {Value: "False", Type: "bool"}}},
			{Name: "corp-sql", Type: "sqlresolver", Config: map[string]ConfigValue{
				"Driver": cfgStr("postgresql"), "Server": cfgStr("192.0.2.31"), "Port": {Value: "5432", Type: "int"},
				"Database": cfgStr("users"), "User": cfgStr("pi"), "Password": {Value: "Sql-Secret-1", Type: "password"},
				"Table": cfgStr("users"), "Map": cfgStr(`{"userid": "id", "username": "login", "email": "mail"}`),
				"Limit": {Value: "500", Type: "int"}, "Editable": {Value: "False", Type: "bool"}}},
			{Name: "fixture-http", Type: "httpresolver", Config: map[string]ConfigValue{
				"endpoint": cfgStr("https://users.example.com/"), "password": {Value: "Http-Secret-1", Type: "password"}}},
		},
		Realms: []Realm{
			{Name: "corp", Default: true, Resolvers: []RealmResolver{
				{Resolver: "fixture-passwd", Priority: 1, HasPriority: true},
				{Resolver: "fixture-passwd", Priority: 3, HasPriority: true, Node: "3d1219c7-c4c5-404a-aa1f-6d2a48adfda4"},
			}},
			{Name: "lab", Resolvers: []RealmResolver{{Resolver: "fixture-passwd", Priority: 2, HasPriority: true}}},
		},
		Config: []ConfigEntry{
			{Key: "email.identifier", Value: "fixture-smtp"},
			{Key: "sms.identifier", Value: "fixture-sms"},
			{Key: "question.num_answers", Value: "5"},
			{Key: "splitAtSign", Value: "True"},
			{Key: "NoSuchSetting", Value: "1"},
		},
		SMTPServers: []SMTPServer{{Identifier: "fixture-smtp", Server: "mail.example.com", Port: 587, Username: "pi-mailer",
			Password: Secret(cfgSMTPPassword), Sender: "privacyidea@example.com", TLS: true,
			Description: "Fixture SMTP relay", Timeout: 10}},
		SMSGateways: []SMSGateway{{Identifier: "fixture-sms", Description: "Fixture HTTP SMS gateway",
			ProviderModule: "privacyidea.lib.smsprovider.HttpSMSProvider.HttpSMSProvider",
			Options: []SMSOption{
				{Key: "URL", Value: "https://sms.example.com/api/send", Type: "option"},
				{Key: "HTTP_METHOD", Value: "POST", Type: "option"},
				{Key: "RETURN_SUCCESS", Value: "ID", Type: "option"},
				{Key: "USERNAME", Value: "pi-sms", Type: "option"},
				{Key: "PASSWORD", Value: "Sms-Secret-1", Type: "option"},
				{Key: "CHECK_SSL", Value: "yes", Type: "option"},
				{Key: "TIMEOUT", Value: "5", Type: "option"},
				{Key: "to", Value: "{phone}", Type: "option"},
				{Key: "text", Value: "Your OTP is {otp}", Type: "option"},
				{Key: "X-Api-Key", Value: "sms-api-key-123", Type: "header"},
			}}},
		RadiusServers: []RadiusServer{{Identifier: "fixture-radius", Server: "192.0.2.50", Port: 1812,
			Secret: Secret(cfgRadiusSecret), Dictionary: "/etc/privacyidea/dictionary",
			Description: "Fixture RADIUS server", Timeout: 5, Retries: 3}},
		MachineResolvers: []MachineResolver{{Name: "fixture-hosts", Type: "hosts", Config: map[string]ConfigValue{
			"filename": cfgStr("/tmp/pifix-hosts"), "resolver": {Value: "fixture-hosts"}}}},
		ServiceIDs: []ServiceID{{Name: "ssh-servers", Description: "All SSH servers of the fixture"}, {Name: "vpn", Description: "VPN gateways"}},
		CAConnectors: []CAConnector{{Name: "fixture-localca", Type: "local", Config: map[string]ConfigValue{
			"cakey": cfgStr("/tmp/pifix-ca/cakey.pem"), "cacert": cfgStr("/tmp/pifix-ca/cacert.pem"),
			"openssl.cnf": cfgStr("/tmp/pifix-ca/openssl.cnf"), "WorkingDir": cfgStr("/tmp/pifix-ca"),
			"CSRDir": cfgStr("reqs"), "CertificateDir": cfgStr("certs"), "CRL": cfgStr("crl.pem"),
			"CRL_Validity_Period": {Value: "30", Type: "int"}, "CRL_Overlap_Period": {Value: "2", Type: "int"},
			"name": {Value: "fixture-localca"}}}},
		Policies: []Policy{
			{Name: "admin-superuser", Scope: "admin", Action: cfgSuperuserAction, AdminUser: "admin", Active: true, Priority: 1,
				Description: "Local admin 'admin': all boolean admin rights (except *_force_server_generate), custom user attributes, PIN length 4..31"},
			{Name: "admin-helpdesk-corp", Scope: "admin", Action: "tokenlist, enable, disable, reset, resync, setpin, revoke, unassign",
				Realm: "corp", AdminUser: "helpdesk", Active: true, Priority: 5, Description: "Helpdesk admin (not an existing admin) may manage tokens in corp"},
			{Name: "user-corp-selfservice", Scope: "user", Action: "enable, disable, setpin, auditlog, otp_pin_minlength=6", Realm: "corp",
				Active: true, Priority: 1, Description: "Self-service in corp"},
			{Name: "auth-lab-userstore", Scope: "authentication", Action: "otppin=userstore", Realm: "lab", Active: true, Priority: 1,
				Description: "In realm lab the PIN is the userstore password"},
			{Name: "auth-corp-challenge", Scope: "authentication", Action: "challenge_response=hotp totp, challenge_text=Please enter your OTP",
				Realm: "corp", Active: true, Priority: 2, Description: "HOTP/TOTP may be used in challenge-response in corp"},
			{Name: "auth-passthru-inactive", Scope: "authentication", Action: "passthru=fixture-radius", Realm: "corp", Active: false, Priority: 9,
				Description: "Inactive: passthru to the RADIUS server"},
			{Name: "authz-block-net", Scope: "authorization", Action: "authorized=deny_access", Client: "198.51.100.0/24", Active: true, Priority: 1,
				Description: "Deny any authentication from 198.51.100.0/24"},
			{Name: "authz-details", Scope: "authorization", Action: "add_user_in_response, add_resolver_in_response, application_tokentype",
				Realm: "corp", Active: true, Priority: 3, Description: "Return user details on success"},
			{Name: "authz-lab-tokentype-cond", Scope: "authorization", Action: "tokentype=hotp totp", Realm: "lab", Active: true, Priority: 2,
				Description: "Lab users with an example.com address may only use hotp/totp",
				Conditions:  []PolicyCondition{{Section: "userinfo", Key: "email", Comparator: "matches", Value: `.*@example\.com`, Active: true}}},
			{Name: "enroll-corp", Scope: "enrollment", Action: "max_token_per_user=20, tokenlabel={user}@{realm}, tokenissuer=privacyIDEA-fixture, papertoken_count=20",
				Realm: "corp", Active: true, Priority: 1, Description: "Enrollment defaults for corp"},
			{Name: "webui-defaults", Scope: "webui", Action: "logout_time=300, tokenpagesize=25", Active: true, Priority: 1, Description: "Web UI defaults"},
		},
		Attributes: []UserAttribute{
			{UserID: "1001", Resolver: "fixture-passwd", Realm: "corp", Key: "department", Value: "engineering"},
			{UserID: "1001", Resolver: "fixture-passwd", Realm: "corp", Key: "costcenter", Value: "4711"},
			{UserID: "1001", Resolver: "fixture-passwd", Realm: "corp", Key: "employee_type", Value: "internal"},
			{UserID: "4242", Resolver: "fixture-passwd", Realm: "corp", Key: "department", Value: "ghosts"},
		},
		MachineTokens: []MachineToken{
			{Serial: "FX-SSHKEY-DAVE", Application: "ssh", Options: map[string]string{"service_id": "ssh-servers", "user": "dave"}},
			{Serial: "FX-SSHKEY-DAVE", MachineResolver: "fixture-hosts", MachineID: "192.0.2.20", Application: "ssh",
				Options: map[string]string{"service_id": "ssh-servers", "user": "dbadmin"}},
			{Serial: "FX-HOTP-OFFLINE-GRACE", MachineResolver: "fixture-hosts", MachineID: "192.0.2.10", Application: "offline",
				Options: map[string]string{"count": "10", "rounds": "1000"}},
		},
		Events: []EventHandler{
			{ID: 1, Name: "notify-token-init", Active: true, Ordering: 0, Position: "post", Event: "token_init",
				HandlerModule: "UserNotification", Action: "sendmail",
				Conditions: []EventCondition{{Key: "realm", Value: "corp", Comparator: "equal"}},
				Options: []EventOption{
					{Key: "emailconfig", Value: "fixture-smtp"}, {Key: "To", Value: "tokenowner"},
					{Key: "subject", Value: "A new token was enrolled"},
					{Key: "body", Value: "Hello {user}, token {serial} was enrolled for you."},
					{Key: "mimetype", Value: "plain"},
				}},
			{ID: 2, Name: "no-such-module", Active: true, Position: "post", Event: "token_init",
				HandlerModule: "NoSuchHandler", Action: "doit"},
		},
		Admins: []Admin{{Username: "admin", PasswordHash: cfgAdminHash}},
	}
}

// cfgCopyFile copies a fixture file into dir.
func cfgCopyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// cfgEnv is a new Server on a temporary data directory, with the
// fixture's files copied into a temporary files directory (the only place
// its resolvers may read), and the relocation of privacyIDEA's paths to
// them.
type cfgEnv struct {
	s     *authsrv.Server
	o     *authsrv.Ops
	files string
	reloc func(string) string
}

func newCfgEnv(t *testing.T, opts ...authsrv.Option) *cfgEnv {
	t.Helper()
	files := t.TempDir()
	cfgCopyFile(t, filepath.Join(cfgFixtureDir, "users.passwd"), filepath.Join(files, "users.passwd"))
	cfgCopyFile(t, filepath.Join(cfgFixtureDir, "hosts"), filepath.Join(files, "hosts"))
	for _, f := range []string{"cacert.pem", "cakey.pem", "openssl.cnf"} {
		cfgCopyFile(t, filepath.Join(cfgFixtureDir, "ca", f), filepath.Join(files, "ca", f))
	}
	base := []authsrv.Option{
		authsrv.WithDataDir(t.TempDir()), authsrv.WithFileRoots(files),
		authsrv.WithResolverTypes(builtin.Types(builtin.WithFileRoots(files))),
		authsrv.WithKDFParams(authsrv.KDFParams{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}),
	}
	s, err := authsrv.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	reloc := relocator(map[string]string{
		"/tmp/pifix-users.passwd": filepath.Join(files, "users.passwd"),
		"/tmp/pifix-hosts":        filepath.Join(files, "hosts"),
		"/tmp/pifix-ca":           filepath.Join(files, "ca"),
	})
	return &cfgEnv{s: s, o: s.Ops(), files: files, reloc: reloc}
}

// row finds the summary row of kind and name.
func cfgRow(sum *Summary, kind, name string) (Row, bool) {
	for _, r := range sum.Rows {
		if r.Kind == kind && r.Name == name {
			return r, true
		}
	}
	return Row{}, false
}

// TestImportConfig imports the fixture's configuration objects and reads
// each back through the library's operations.
func TestImportConfig(t *testing.T) {
	ctx := t.Context()
	e := newCfgEnv(t)
	snap := cfgSnapshot()
	var sum Summary
	if err := importConfig(ctx, e.o, snap, e.reloc, &sum); err != nil {
		t.Fatal(err)
	}
	// The tokens the machine tokens name (the tokens part brings them
	// over in an import).
	pub, err := os.ReadFile(filepath.Join(cfgFixtureDir, "dave_ed25519.pub"))
	if err != nil {
		t.Fatal(err)
	}
	sshLine := strings.TrimSpace(string(pub))
	for _, req := range []token.InitRequest{
		{Type: "sshkey", Serial: "FX-SSHKEY-DAVE", Params: token.Params{"sshkey": sshLine}},
		{Type: "hotp", Serial: "FX-HOTP-OFFLINE-GRACE", Params: token.Params{"otpkey": "3132333435363738393031323334353637383930"}},
	} {
		if _, _, err := e.s.Tokens().Init(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if err := importLate(ctx, e.o, snap, e.reloc, &sum); err != nil {
		t.Fatal(err)
	}
	for _, r := range sum.Rows {
		t.Logf("%+v", r)
	}

	t.Run("Resolvers", func(t *testing.T) {
		defs, err := e.o.Resolvers(ctx, local, authsrv.ResolverListRequest{})
		if err != nil || len(defs) != 3 {
			t.Fatalf("Resolvers = %+v, %v", defs, err)
		}
		byName := map[string]resolver.Def{}
		for _, d := range defs {
			byName[d.Name] = d
		}
		if d := byName["fixture-passwd"]; d.Type != "passwdresolver" || d.Data["fileName"] != filepath.Join(e.files, "users.passwd") {
			t.Errorf("fixture-passwd = %+v", d)
		}
		// Every parameter is brought over; the passwords sealed.
		for _, r := range snap.Resolvers[1:3] {
			name, d := r.Name, byName[r.Name]
			for k, v := range r.Config {
				got := d.Data[k]
				if v.Type == "password" {
					if got != resolver.Censored {
						t.Errorf("%s %s not sealed (censored: %v)", name, k, got == resolver.Censored)
					}
				} else if got != v.Value {
					t.Errorf("%s %s = %q, want %q", name, k, got, v.Value)
				}
			}
		}
		r, ok := cfgRow(&sum, "resolver", "fixture-http")
		if !ok || r.Imported || !strings.Contains(r.Reason, "httpresolver") {
			t.Errorf("httpresolver row = %+v", r)
		}
		if strings.Contains(r.Reason, "Http-Secret-1") {
			t.Error("the skip reason holds the resolver's password")
		}
	})

	t.Run("Realms", func(t *testing.T) {
		realms, err := e.o.Realms(ctx, local)
		if err != nil || len(realms) != 2 {
			t.Fatalf("Realms = %+v, %v", realms, err)
		}
		prio := map[string]int{}
		for _, ri := range realms {
			if len(ri.Resolvers) != 1 || ri.Resolvers[0].Name != "fixture-passwd" || ri.Resolvers[0].Priority == nil {
				t.Fatalf("realm %s resolvers = %+v", ri.Name, ri.Resolvers)
			}
			prio[ri.Name] = *ri.Resolvers[0].Priority
			if ri.Default != (ri.Name == "corp") {
				t.Errorf("realm %s default = %v", ri.Name, ri.Default)
			}
		}
		if !reflect.DeepEqual(prio, map[string]int{"corp": 1, "lab": 2}) {
			t.Errorf("priorities = %v", prio)
		}
		def, ok, err := e.o.DefaultRealm(ctx, local)
		if err != nil || !ok || def.Name != "corp" {
			t.Errorf("DefaultRealm = %+v, %v, %v", def, ok, err)
		}
		// privacyIDEA's node does not exist here.
		r, ok := cfgRow(&sum, "realm", "corp (node 3d1219c7-c4c5-404a-aa1f-6d2a48adfda4)")
		if !ok || r.Imported || r.Reason == "" {
			t.Errorf("node row = %+v", r)
		}
	})

	t.Run("Settings", func(t *testing.T) {
		want := map[string]string{"email.identifier": "fixture-smtp", "sms.identifier": "fixture-sms", "question.num_answers": "5", "splitAtSign": "True"}
		for k, v := range want {
			st, err := e.o.SystemSettings(ctx, local, k)
			if err != nil || len(st) != 1 || st[0].Value != v || !st[0].Stored {
				t.Errorf("setting %s = %+v, %v", k, st, err)
			}
		}
		r, ok := cfgRow(&sum, "setting", "NoSuchSetting")
		if !ok || r.Imported || !strings.Contains(r.Reason, "NoSuchSetting") {
			t.Errorf("unknown setting row = %+v", r)
		}
	})

	t.Run("SMTPServer", func(t *testing.T) {
		list, err := e.o.SMTPServers(ctx, local)
		if err != nil || len(list) != 1 {
			t.Fatalf("SMTPServers = %v, %v", list, err)
		}
		d := list[0]
		if d.Identifier != "fixture-smtp" || d.Server != "mail.example.com" || d.Port != 587 || d.Username != "pi-mailer" ||
			!d.TLS || d.Sender != "privacyidea@example.com" || d.Timeout != 10 || d.Description != "Fixture SMTP relay" {
			t.Errorf("SMTP server = %v", d)
		}
		if d.Password != notify.Censored {
			t.Error("the SMTP password is not stored (or not censored)")
		}
	})

	t.Run("SMSGateway", func(t *testing.T) {
		list, err := e.o.SMSGateways(ctx, local, 0)
		if err != nil || len(list) != 1 {
			t.Fatalf("SMSGateways = %v, %v", list, err)
		}
		g := list[0]
		if g.Name != "fixture-sms" || g.Module != notify.ModuleHTTP || g.Options["URL"] != "https://sms.example.com/api/send" ||
			g.Options["text"] != "Your OTP is {otp}" || g.Options["USERNAME"] != "pi-sms" {
			t.Errorf("gateway = %v %v", g, g.Options)
		}
		if g.Options["PASSWORD"] != notify.Censored || g.Headers["X-Api-Key"] != notify.Censored {
			t.Errorf("credentials not sealed: PASSWORD %t, X-Api-Key %t",
				g.Options["PASSWORD"] == notify.Censored, g.Headers["X-Api-Key"] == notify.Censored)
		}
	})

	t.Run("RadiusServer", func(t *testing.T) {
		list, err := e.o.RadiusServers(ctx, local)
		if err != nil || len(list) != 1 {
			t.Fatalf("RadiusServers = %v, %v", list, err)
		}
		d := list[0]
		if d.Identifier != "fixture-radius" || d.Server != "192.0.2.50" || d.Port != 1812 || d.Retries != 3 || d.Timeout != 5 ||
			d.Secret != notify.Censored {
			t.Errorf("RADIUS server = %+v", d.Identifier)
		}
		r, _ := cfgRow(&sum, "radiusserver", "fixture-radius")
		if !r.Imported || !strings.Contains(r.Detail, "ignored") {
			t.Errorf("RADIUS row = %+v", r)
		}
	})

	t.Run("ServiceIDs", func(t *testing.T) {
		list, err := e.o.ServiceIDs(ctx, local, "")
		if err != nil || len(list) != 2 {
			t.Fatalf("ServiceIDs = %+v, %v", list, err)
		}
	})

	t.Run("CAConnector", func(t *testing.T) {
		list, err := e.o.CAConnectors(ctx, local, "fixture-localca")
		if err != nil || len(list) != 1 || list[0].Type != "local" {
			t.Fatalf("CAConnectors = %+v, %v", list, err)
		}
		if got, want := list[0].Data["cacert"], filepath.Join(e.files, "ca", "cacert.pem"); got != want {
			t.Errorf("cacert = %q, want %q", got, want)
		}
		if got, want := list[0].Data["WorkingDir"], filepath.Join(e.files, "ca"); got != want {
			t.Errorf("WorkingDir = %q, want %q", got, want)
		}
	})

	t.Run("MachineResolver", func(t *testing.T) {
		list, err := e.o.MachineResolvers(ctx, local, authsrv.MachineResolverListRequest{})
		if err != nil || len(list) != 1 || list[0].Type != "hosts" {
			t.Fatalf("MachineResolvers = %+v, %v", list, err)
		}
		if got, want := list[0].Data["filename"], filepath.Join(e.files, "hosts"); got != want {
			t.Errorf("filename = %q, want %q", got, want)
		}
	})

	t.Run("Policies", func(t *testing.T) {
		list, err := e.o.Policies(ctx, local, policy.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]policy.Policy{}
		for _, p := range list {
			byName[p.Name] = p
		}
		for _, p := range snap.Policies {
			r, ok := cfgRow(&sum, "policy", p.Name)
			if !ok {
				t.Errorf("policy %s: no summary row", p.Name)
				continue
			}
			_, stored := byName[p.Name]
			if r.Imported != stored || (!r.Imported && r.Reason == "") {
				t.Errorf("policy %s: row %+v, stored %v", p.Name, r, stored)
			}
		}
		cond, ok := byName["authz-lab-tokentype-cond"]
		if !ok {
			t.Fatal("authz-lab-tokentype-cond not imported")
		}
		if len(cond.Conditions) != 1 || cond.Conditions[0].Section != "userinfo" || cond.Conditions[0].Key != "email" ||
			cond.Conditions[0].Comparator != "matches" || cond.Conditions[0].Value != `.*@example\.com` || !cond.Conditions[0].Active {
			t.Errorf("condition = %+v", cond.Conditions)
		}
		if cond.Priority != 2 || !slices.Equal(cond.Realm, []string{"lab"}) || cond.Action != "tokentype=hotp totp" {
			t.Errorf("authz-lab-tokentype-cond = %+v", cond)
		}
		if p := byName["authz-block-net"]; !slices.Equal(p.Client, []string{"198.51.100.0/24"}) || !p.Active {
			t.Errorf("authz-block-net = %+v", p)
		}
		if p, ok := byName["auth-passthru-inactive"]; !ok || p.Active || p.Priority != 9 || p.Description != "Inactive: passthru to the RADIUS server" {
			t.Errorf("auth-passthru-inactive = %+v, %v", p, ok)
		}
		if p, ok := byName["admin-helpdesk-corp"]; !ok || p.Priority != 5 || !slices.Equal(p.AdminUser, []string{"helpdesk"}) {
			t.Errorf("admin-helpdesk-corp = %+v, %v", p, ok)
		}
	})

	t.Run("UserAttributes", func(t *testing.T) {
		got, err := e.o.UserAttributes(ctx, local, authsrv.Target{User: "alice", Realm: "corp"})
		want := map[string]string{"department": "engineering", "costcenter": "4711", "employee_type": "internal"}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("alice's attributes = %v, %v", got, err)
		}
		r, ok := cfgRow(&sum, "userattribute", "fixture-passwd/4242: department")
		if !ok || r.Imported || !strings.Contains(r.Reason, "4242") {
			t.Errorf("unknown user's attribute row = %+v", r)
		}
	})

	t.Run("MachineTokens", func(t *testing.T) {
		items, err := e.o.MachineAuthItems(ctx, local, machine.AuthItemRequest{Hostname: "any-host", Application: "ssh",
			Filter: map[string]string{"service_id": "ssh-servers", "user": "dave"}})
		if err != nil || len(items["ssh"]) != 1 || items["ssh"][0]["sshkey"] != sshLine || items["ssh"][0]["user"] != "dave" {
			t.Errorf("dave's ssh items = %v, %v", items, err)
		}
		items, err = e.o.MachineAuthItems(ctx, local, machine.AuthItemRequest{Hostname: "db01.example.com", Application: "ssh",
			Filter: map[string]string{"user": "dbadmin"}})
		if err != nil || len(items["ssh"]) != 1 || items["ssh"][0]["sshkey"] != sshLine {
			t.Errorf("db01's ssh items = %v, %v", items, err)
		}
		ms, err := e.o.MachinesOfToken(ctx, local, "FX-HOTP-OFFLINE-GRACE")
		if err != nil || len(ms) != 1 {
			t.Fatalf("MachinesOfToken = %+v, %v", ms, err)
		}
		m := ms[0]
		if m.Application != "offline" || m.MachineID != "192.0.2.10" || m.Resolver != "fixture-hosts" || m.Hostname != "web01.example.com" ||
			!reflect.DeepEqual(m.Options, map[string]string{"count": "10", "rounds": "1000"}) {
			t.Errorf("offline attachment = %+v", m)
		}
	})

	t.Run("EventHandlers", func(t *testing.T) {
		defs, err := e.o.EventDefinitions(ctx, local, 0)
		if err != nil || len(defs) != 1 {
			t.Fatalf("EventDefinitions = %+v, %v", defs, err)
		}
		d := defs[0]
		wantOpts := map[string]string{"emailconfig": "fixture-smtp", "To": "tokenowner", "subject": "A new token was enrolled",
			"body": "Hello {user}, token {serial} was enrolled for you.", "mimetype": "plain"}
		if d.Name != "notify-token-init" || !d.Active || d.HandlerModule != "UserNotification" || d.Action != "sendmail" ||
			d.Position != "post" || !slices.Equal(d.Events, []string{"token_init"}) ||
			!reflect.DeepEqual(d.Conditions, map[string]string{"realm": "corp"}) || !reflect.DeepEqual(d.Options, wantOpts) {
			t.Errorf("event handler = %+v", d)
		}
		r, ok := cfgRow(&sum, "eventhandler", "no-such-module")
		if !ok || r.Imported || !strings.Contains(r.Reason, "NoSuchHandler") {
			t.Errorf("unknown module row = %+v", r)
		}
	})

	t.Run("NoSecretInSummary", func(t *testing.T) {
		for _, r := range sum.Rows {
			for _, secret := range []string{cfgSMTPPassword, cfgRadiusSecret, "Sms-Secret-1", "sms-api-key-123", "Http-Secret-1", "Ldap-Secret-1", "Sql-Secret-1"} {
				if strings.Contains(r.Name+r.Detail+r.Reason, secret) {
					t.Errorf("row %s %s shows a secret", r.Kind, r.Name)
				}
			}
		}
	})
}

// smtpChildEnv marks the child process of TestImportedSMTPPassword: the
// parent starts it with SSL_CERT_FILE naming the test server's
// certificate, since the system roots are read once per process.
const smtpChildEnv = "PIIMPORT_SMTP_CHILD_DIR"

// TestImportedSMTPPassword sends a mail through the imported SMTP server
// definition to a server that requires STARTTLS and AUTH PLAIN with the
// fixture's password: the password was brought over usable.
func TestImportedSMTPPassword(t *testing.T) {
	dir := os.Getenv(smtpChildEnv)
	if dir == "" {
		dir = t.TempDir()
		writeTestCert(t, dir)
		cmd := exec.Command(os.Args[0], "-test.run=^TestImportedSMTPPassword$", "-test.v")
		cmd.Env = append(os.Environ(), smtpChildEnv+"="+dir, "SSL_CERT_FILE="+filepath.Join(dir, "cert.pem"))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestImportedSMTPPassword") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return
	}
	ctx := t.Context()
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	k := &authSink{}
	srv := smtpd.NewServer(k)
	srv.Domain = "sink.test"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.ErrorLog = log.New(io.Discard, "", 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); _ = l.Close(); <-done })

	dial, err := netguard.Parse("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	e := newCfgEnv(t, authsrv.WithDialPolicy(dial))
	m := cfgSnapshot().SMTPServers[0]
	m.Server, m.Port = "127.0.0.1", l.Addr().(*net.TCPAddr).Port
	var sum Summary
	if err := importConfig(ctx, e.o, &Snapshot{SMTPServers: []SMTPServer{m}}, e.reloc, &sum); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Notify().SendMail(ctx, "fixture-smtp", notify.Mail{To: []string{"alice@example.com"}, Subject: "s", Body: "b"}); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.mails != 1 || k.user != "pi-mailer" {
		t.Errorf("the sink got %d mails from %q", k.mails, k.user)
	}
}

// writeTestCert writes a self-signed certificate for 127.0.0.1 and its key
// into dir (cert.pem, key.pem).
func writeTestCert(t *testing.T, dir string) {
	t.Helper()
	c := testsvc.SelfSignedCert(t)
	for name, b := range map[string][]byte{"cert.pem": c.CertPEM, "key.pem": c.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// authSink is an SMTP server backend that requires TLS and AUTH PLAIN
// with the fixture's SMTP credentials, and counts the mails it accepts.
type authSink struct {
	mu    sync.Mutex
	mails int
	user  string
}

func (k *authSink) NewSession(c *smtpd.Conn) (smtpd.Session, error) {
	return &authSession{k: k, conn: c}, nil
}

type authSession struct {
	k    *authSink
	conn *smtpd.Conn
	user string
}

func (s *authSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *authSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "pi-mailer" || pass != cfgSMTPPassword {
			return smtpd.ErrAuthFailed
		}
		s.user = user
		return nil
	}), nil
}

func (s *authSession) Mail(string, *smtpd.MailOptions) error {
	if _, isTLS := s.conn.TLSConnectionState(); !isTLS || s.user == "" {
		return smtpd.ErrAuthRequired
	}
	return nil
}

func (s *authSession) Rcpt(string, *smtpd.RcptOptions) error { return nil }

func (s *authSession) Data(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	s.k.mu.Lock()
	s.k.mails++
	s.k.user = s.user
	s.k.mu.Unlock()
	return nil
}

func (s *authSession) Reset()        {}
func (s *authSession) Logout() error { return nil }
