package authsrv_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/token"
)

// readServer is tokenServer with a second realm (realm2, same users),
// the tokens A1 (alice@realm1), B1 (bob@realm1), B2 (bob@realm2) and U1
// (unassigned, in realm2), and the admin policies: "full" (admin: every
// read), "realm1only" (radm: token and user list in realm1 only) and
// "enableonly" (norights: enable only).
func readServer(t *testing.T) *authsrv.Server {
	t.Helper()
	s, _ := tokenServer(t)
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := s.Realms().Set(ctx, "realm2", []realm.Entry{{Name: "files"}})
	must(err)
	trusted := caller.Caller{}
	for _, tk := range []authsrv.TokenInit{
		{Serial: "A1", User: authsrv.Target{User: "alice", Realm: "realm1"}},
		{Serial: "B1", User: authsrv.Target{User: "bob", Realm: "realm1"}},
		{Serial: "B2", User: authsrv.Target{User: "bob", Realm: "realm2"}},
		{Serial: "U1", Realm: "realm2"},
	} {
		tk.Params = token.Params{"otpkey": rfcKeyHex}
		_, err := s.Ops().InitToken(ctx, trusted, tk)
		must(err)
	}
	must(s.Ops().SetTokenInfo(ctx, trusted, authsrv.TokenSelect{Serials: []string{"A1"}}, "secretnote", "hidden"))
	for _, p := range []policy.Policy{
		{Name: "full", Scope: policy.ScopeAdmin, AdminUser: []string{"admin"},
			Action: "tokenlist, userlist, getserial, getchallenges, auditlog, auditlog_download, policyread, resolverread, resolverwrite, smtpserver_read, smsgateway_read, radiusserver_read"},
		{Name: "realm1only", Scope: policy.ScopeAdmin, AdminUser: []string{"radm"}, Realm: []string{"realm1"}, Action: "tokenlist, userlist, hide_tokeninfo=secretnote"},
		{Name: "enableonly", Scope: policy.ScopeAdmin, AdminUser: []string{"norights"}, Action: "enable"},
	} {
		p.Active, p.Priority = true, 1
		_, err := s.Policies().Set(ctx, p)
		must(err)
	}
	return s
}

func adminCaller(name string) caller.Caller {
	return caller.Caller{Role: caller.Admin, Name: name, RequestID: "read-test"}
}

func serials(p token.Page) []string {
	out := []string{}
	for _, t := range p.Tokens {
		out = append(out, t.Serial)
	}
	slices.Sort(out)
	return out
}

// TestReadsRealmAdmin: an administrator whose policies name realm1 sees
// only realm1's tokens and users, and the hide_tokeninfo of its policy;
// an unrestricted one sees all of them.
func TestReadsRealmAdmin(t *testing.T) {
	s := readServer(t)
	ctx, o := t.Context(), s.Ops()

	p, err := o.ListTokens(ctx, adminCaller("radm"), authsrv.TokenListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := serials(p); !slices.Equal(got, []string{"A1", "B1"}) || p.Count != 2 {
		t.Errorf("realm1 admin lists %v (count %d), want [A1 B1]", got, p.Count)
	}
	for _, tk := range p.Tokens {
		if _, ok := tk.Info["secretnote"]; ok {
			t.Errorf("%s: hide_tokeninfo key listed", tk.Serial)
		}
	}
	p, err = o.ListTokens(ctx, adminCaller("admin"), authsrv.TokenListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := serials(p); !slices.Equal(got, []string{"A1", "B1", "B2", "U1"}) {
		t.Errorf("admin lists %v, want all four", got)
	}
	for _, tk := range p.Tokens {
		if tk.Serial == "A1" && tk.Info["secretnote"] != "hidden" {
			t.Errorf("A1 info %v: the unrestricted admin has no hide_tokeninfo", tk.Info)
		}
		if len(tk.Sealed) > 0 || len(tk.PINSealed) > 0 || tk.PIN != "" {
			t.Errorf("%s: a read hands out sealed values or the PIN", tk.Serial)
		}
	}

	realmsOf := func(who caller.Caller) []string {
		t.Helper()
		list, err := o.ListUsers(ctx, who, authsrv.UserListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var rs []string
		for _, u := range list {
			rs = append(rs, u.Realm+"/"+u.Info.String(resolver.KeyUsername))
		}
		slices.Sort(rs)
		return rs
	}
	if got := realmsOf(adminCaller("radm")); !slices.Equal(got, []string{"realm1/alice", "realm1/bob"}) {
		t.Errorf("realm1 admin lists users %v", got)
	}
	if got := realmsOf(adminCaller("admin")); len(got) != 4 {
		t.Errorf("admin lists users %v, want both users in both realms", got)
	}
	if _, err := o.ListUsers(ctx, adminCaller("radm"), authsrv.UserListRequest{Realms: []string{"realm2"}}); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("realm1 admin asking for realm2 users: err = %v, want a refusal", err)
	}
}

// TestReadsUserOwn: a user lists only its own tokens and audit entries,
// whatever it asks for.
func TestReadsUserOwn(t *testing.T) {
	s := readServer(t)
	ctx, o := t.Context(), s.Ops()
	bob := userCaller("bob")

	for _, req := range []authsrv.TokenListRequest{{}, {Owner: authsrv.Target{User: "alice", Realm: "realm1"}}, {Filter: token.Filter{Serial: "A1"}}} {
		p, err := o.ListTokens(ctx, bob, req)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"B1"}
		if req.Filter.Serial == "A1" {
			want = []string{}
		}
		if got := serials(p); !slices.Equal(got, want) {
			t.Errorf("bob@realm1 with %+v lists %v, want %v", req, got, want)
		}
	}

	// Entries about alice and about bob exist (the enrollments).
	if len(rows(t, s, map[string]string{"user": "alice"})) == 0 || len(rows(t, s, map[string]string{"user": "bob"})) == 0 {
		t.Fatal("setup wrote no entries about alice and bob")
	}
	for _, f := range []map[string]string{nil, {"user": "alice"}, {"realm": "realm2"}} {
		res, err := o.SearchAudit(ctx, bob, audit.Query{Filters: f, PageSize: audit.MaxPageSize})
		if err != nil {
			t.Fatal(err)
		}
		if f == nil && len(res.Rows) == 0 {
			t.Error("bob sees none of its own entries")
		}
		for _, r := range res.Rows {
			if r["user"] != "bob" || r["realm"] != "realm1" {
				t.Errorf("filters %v: bob@realm1 sees %v@%v's entry", f, r["user"], r["realm"])
			}
		}
	}
	var n int
	dl, err := o.DownloadAudit(ctx, bob, audit.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dl(ctx, func(r audit.Row) error {
		n++
		if r["user"] != "bob" {
			t.Errorf("bob's download holds %v's entry", r["user"])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("bob's download is empty")
	}
}

// TestReadsRefusedAudited: an administrator without tokenlist, auditlog,
// auditlog_download or policyread is refused, and each refusal is one
// failed audit entry under its name.
func TestReadsRefusedAudited(t *testing.T) {
	s := readServer(t)
	ctx, o := t.Context(), s.Ops()
	who := adminCaller("norights")
	for name, read := range map[string]func() error{
		"tokenlist": func() error { _, err := o.ListTokens(ctx, who, authsrv.TokenListRequest{}); return err },
		"auditlog":  func() error { _, err := o.SearchAudit(ctx, who, audit.Query{}); return err },
		"auditlog_download": func() error {
			_, err := o.DownloadAudit(ctx, who, audit.Query{})
			return err
		},
		"policyread": func() error { _, err := o.Policies(ctx, who, policy.Filter{}); return err },
		"userlist":   func() error { _, err := o.ListUsers(ctx, who, authsrv.UserListRequest{}); return err },
	} {
		t.Run(name, func(t *testing.T) {
			before := auditRows(t, s)
			err := read()
			if err == nil || !strings.Contains(err.Error(), "action "+name+" is not allowed") {
				t.Fatalf("err = %v, want the refusal of %s", err, name)
			}
			after := auditRows(t, s)
			if len(after) != len(before)+1 {
				t.Fatalf("%d entries written, want 1", len(after)-len(before))
			}
			e := after[len(after)-1]
			if fmt.Sprint(e["success"]) != "0" || e["administrator"] != "norights" || !strings.Contains(fmt.Sprint(e["info"]), name) {
				t.Errorf("refusal entry %v", e)
			}
		})
	}
}

// TestReadsOneAuditEntry: every read writes exactly one entry, a success
// under the caller's name, and changes nothing else.
func TestReadsOneAuditEntry(t *testing.T) {
	s := readServer(t)
	o := s.Ops()
	admin := adminCaller("admin")
	reads := []struct {
		name   string
		action string
		run    func(ctx context.Context) error
	}{
		{"token list", "GET /token/", func(ctx context.Context) error {
			_, err := o.ListTokens(ctx, admin, authsrv.TokenListRequest{PageSize: 2})
			return err
		}},
		{"user's token list", "GET /token/", func(ctx context.Context) error {
			_, err := o.ListTokens(ctx, userCaller("alice"), authsrv.TokenListRequest{})
			return err
		}},
		{"getserial", "GET /token/getserial/", func(ctx context.Context) error {
			_, _, err := o.GetSerial(ctx, admin, "755224", token.GetSerialFilter{})
			return err
		}},
		{"challenges", "GET /token/challenges/", func(ctx context.Context) error {
			_, err := o.Challenges(ctx, admin, authsrv.ChallengeListRequest{})
			return err
		}},
		{"users", "GET /user/", func(ctx context.Context) error {
			_, err := o.ListUsers(ctx, admin, authsrv.UserListRequest{})
			return err
		}},
		{"user attributes", "GET /user/attribute", func(ctx context.Context) error {
			_, err := o.UserAttributes(ctx, admin, authsrv.Target{User: "alice", Realm: "realm1"})
			return err
		}},
		{"editable attributes", "GET /user/editable_attributes/", func(ctx context.Context) error {
			_, err := o.EditableAttributes(ctx, userCaller("alice"), authsrv.Target{})
			return err
		}},
		{"realms", "GET /realm/", func(ctx context.Context) error { _, err := o.Realms(ctx, admin); return err }},
		{"default realm", "GET /defaultrealm", func(ctx context.Context) error { _, _, err := o.DefaultRealm(ctx, admin); return err }},
		{"superuser realms", "GET /realm/superuser", func(ctx context.Context) error { _, err := o.SuperuserRealms(ctx, admin); return err }},
		{"resolvers", "GET /resolver/", func(ctx context.Context) error {
			_, err := o.Resolvers(ctx, admin, authsrv.ResolverListRequest{})
			return err
		}},
		{"resolver defaults", "GET /resolver/passwdresolver/default", func(ctx context.Context) error {
			_, err := o.ResolverDefaults(ctx, admin, "passwdresolver")
			return err
		}},
		{"policies", "GET /policy/", func(ctx context.Context) error { _, err := o.Policies(ctx, admin, policy.Filter{}); return err }},
		{"policy defs", "GET /policy/defs/", func(ctx context.Context) error { _, err := o.PolicyDefs(ctx, admin, ""); return err }},
		{"policy export", "GET /policy/export/", func(ctx context.Context) error { _, err := o.ExportPolicies(ctx, admin); return err }},
		{"policy check", "GET /policy/check", func(ctx context.Context) error {
			_, err := o.CheckPolicies(ctx, admin, authsrv.PolicyCheck{User: "alice", Realm: "realm1", Scope: policy.ScopeAdmin, Action: "tokenlist"})
			return err
		}},
		{"audit", "GET /audit/", func(ctx context.Context) error { _, err := o.SearchAudit(ctx, admin, audit.Query{}); return err }},
		{"smtp servers", "GET /smtpserver/", func(ctx context.Context) error { _, err := o.SMTPServers(ctx, admin); return err }},
		{"sms gateways", "GET /smsgateway/", func(ctx context.Context) error { _, err := o.SMSGateways(ctx, admin, 0); return err }},
		{"radius servers", "GET /radiusserver/", func(ctx context.Context) error { _, err := o.RadiusServers(ctx, admin); return err }},
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			before := auditRows(t, s)
			if err := r.run(t.Context()); err != nil {
				t.Fatal(err)
			}
			after := auditRows(t, s)
			if len(after) != len(before)+1 {
				t.Fatalf("%d entries written, want 1", len(after)-len(before))
			}
			e := after[len(after)-1]
			if fmt.Sprint(e["success"]) != "1" || !strings.HasPrefix(fmt.Sprint(e["action"]), r.action) {
				t.Errorf("entry %v", e)
			}
			if e["administrator"] != "admin" && e["user"] != "alice" {
				t.Errorf("entry names neither the administrator nor the user: %v", e)
			}
		})
	}
}

// TestReadsAdminOnly: the administrators' reads refuse users by role, and
// the refusal is audited.
func TestReadsAdminOnly(t *testing.T) {
	s := readServer(t)
	ctx, o := t.Context(), s.Ops()
	alice := userCaller("alice")
	for name, read := range map[string]func() error{
		"getserial":  func() error { _, _, err := o.GetSerial(ctx, alice, "755224", token.GetSerialFilter{}); return err },
		"challenges": func() error { _, err := o.Challenges(ctx, alice, authsrv.ChallengeListRequest{}); return err },
		"realms":     func() error { _, err := o.Realms(ctx, alice); return err },
		"policies":   func() error { _, err := o.Policies(ctx, alice, policy.Filter{}); return err },
		"radius":     func() error { _, err := o.RadiusServers(ctx, alice); return err },
	} {
		t.Run(name, func(t *testing.T) {
			before := len(auditRows(t, s))
			if err := read(); err == nil || !strings.Contains(err.Error(), "necessary role") {
				t.Fatalf("err = %v, want the role refusal", err)
			}
			after := auditRows(t, s)
			if len(after) != before+1 || fmt.Sprint(after[len(after)-1]["success"]) != "0" {
				t.Errorf("%d entries, last %v", len(after)-before, after[len(after)-1])
			}
		})
	}
}

// TestReadsGetSerial: getserial finds the token of an OTP value without
// changing its counter.
func TestReadsGetSerial(t *testing.T) {
	s := readServer(t)
	ctx, o := t.Context(), s.Ops()
	// RFC 4226's value for counter 1 of its key.
	serial, _, err := o.GetSerial(ctx, adminCaller("admin"), "287082", token.GetSerialFilter{Serial: "A1"})
	if err != nil || serial != "A1" {
		t.Fatalf("GetSerial = %q, %v; want A1", serial, err)
	}
	if _, _, err := o.GetSerial(ctx, adminCaller("admin"), "287082", token.GetSerialFilter{Window: 1001}); err == nil {
		t.Error("a window above 1000 was accepted")
	}
	tk, err := s.Tokens().Get(ctx, "A1")
	if err != nil || tk.Count != 0 {
		t.Errorf("A1 counter %d after getserial, want 0 (err %v)", tk.Count, err)
	}
}

// TestReadsEvents: the event handlers run around a read under its event
// name; an error from Pre refuses the read, and the refusal is audited.
func TestReadsEvents(t *testing.T) {
	rec := &recorder{}
	s := configServer(t, authsrv.WithEventHandler(rec))
	if _, err := s.Ops().ListUsers(t.Context(), caller.Caller{}, authsrv.UserListRequest{Realms: []string{"realm1"}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.seen, []string{"pre user_list", "post user_list"}) {
		t.Errorf("handler saw %v", rec.seen)
	}

	refusing := &recorder{refuse: fmt.Errorf("not now")}
	s = configServer(t, authsrv.WithEventHandler(refusing))
	before := len(auditRows(t, s))
	if _, err := s.Ops().SMTPServers(t.Context(), caller.Caller{}); err == nil || err.Error() != "not now" {
		t.Fatalf("err = %v, want the handler's", err)
	}
	after := auditRows(t, s)
	if len(after) != before+1 || fmt.Sprint(after[len(after)-1]["success"]) != "0" {
		t.Errorf("%d entries, last %v", len(after)-before, after[len(after)-1])
	}
}
