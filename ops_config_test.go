package authsrv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

// configServer is a server with an editable in-memory user store (mem1,
// in realm1 and realm2), a spare resolver, a user-scope policy "base",
// the SMTP server mail1, the SMS gateway gw1, the RADIUS server rad1 and
// alice's custom attribute k=v, all written without the audit.
func configServer(t *testing.T, opts ...authsrv.Option) *authsrv.Server {
	t.Helper()
	types := authsrv.DefaultResolverTypes()
	types[resolvertest.MemTypeName] = resolvertest.MemType()
	key := []byte(strings.Repeat("k", 32))
	s, err := authsrv.New(append([]authsrv.Option{authsrv.WithStore(storetest.Open(t)), authsrv.WithEncKey(key),
		authsrv.WithJWTKey(key), cheapKDF, authsrv.WithResolverTypes(types)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.Resolvers().Save(ctx, "mem1", map[string]string{"type": resolvertest.MemTypeName, "Editable": "True"})
	must(err)
	_, err = s.Resolvers().Save(ctx, "spare", map[string]string{"type": resolvertest.MemTypeName})
	must(err)
	for _, r := range []string{"realm1", "realm2"} {
		_, _, err = s.Realms().Set(ctx, r, []realm.Entry{{Name: "mem1"}})
		must(err)
	}
	_, err = s.Policies().Set(ctx, policy.Policy{Name: "base", Scope: policy.ScopeUser, Action: "enable", Active: true, Priority: 1})
	must(err)
	must(s.Notify().SetSMTP(ctx, notify.SMTPServer{Identifier: "mail1", Server: "127.0.0.1", Sender: "pi@example.org"}))
	_, err = s.Notify().SetGateway(ctx, notify.Gateway{Name: "gw1", Module: notify.ModuleSMTP,
		Options: map[string]string{"MAILTO": "sms@example.org", "SMTPIDENTIFIER": "mail1", "SUBJECT": "otp"}})
	must(err)
	must(s.Notify().SetRadius(ctx, notify.RadiusServer{Identifier: "rad1", Server: "127.0.0.1", Secret: "s3cret"}))
	u, _, err := s.Realms().Resolve(ctx, "alice", "realm1")
	must(err)
	_, err = s.UserAttributes().Set(ctx, u, "k", "v", "")
	must(err)
	return s
}

// configState is everything the configuration operations can change, as
// one comparable text.
func configState(t *testing.T, s *authsrv.Server) string {
	t.Helper()
	ctx := t.Context()
	var parts []any
	add := func(v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, v)
	}
	add(s.Policies().List(ctx, policy.Filter{}))
	realms, def, err := s.Realms().List(ctx)
	add(realms, err)
	parts = append(parts, def)
	add(s.Resolvers().List(ctx, "", false))
	add(s.Notify().SMTPServers(ctx))
	add(s.Notify().Gateways(ctx, 0))
	add(s.Notify().RadiusServers(ctx))
	users, err := s.Realms().Users(ctx, []string{"realm1"}, "", map[string]string{})
	slices.SortFunc(users, func(a, b realm.Listed) int { return strings.Compare(a.Info.String("userid"), b.Info.String("userid")) })
	add(users, err)
	u, _, err := s.Realms().Resolve(ctx, "alice", "realm1")
	if err == nil {
		add(s.UserAttributes().Get(ctx, u))
	}
	b, err := json.Marshal(parts)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// auditRows returns every audit entry, oldest first.
func auditRows(t *testing.T, s *authsrv.Server) []audit.Row {
	t.Helper()
	var rows []audit.Row
	if err := s.Audit().Each(t.Context(), audit.Query{Ascending: true}, func(r audit.Row) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

func alice(t *testing.T, s *authsrv.Server) user.User {
	t.Helper()
	u, _, err := s.Realms().Resolve(t.Context(), "alice", "realm1")
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// configOp is one configuration operation: run does it as who, done
// reports whether its change is in the store, cols are audit columns its
// entry must have besides action and success.
type configOp struct {
	name   string
	action string
	run    func(ctx context.Context, s *authsrv.Server, who caller.Caller) error
	done   func(t *testing.T, s *authsrv.Server) bool
	cols   map[string]string
}

func configOps() []configOp {
	ctx := context.Background()
	policyActive := func(t *testing.T, s *authsrv.Server) bool {
		p, _, _ := s.Policies().Get(ctx, "base")
		return p.Active
	}
	policyExists := func(name string) func(*testing.T, *authsrv.Server) bool {
		return func(t *testing.T, s *authsrv.Server) bool { _, ok, _ := s.Policies().Get(ctx, name); return ok }
	}
	realmExists := func(name string) func(*testing.T, *authsrv.Server) bool {
		return func(t *testing.T, s *authsrv.Server) bool { return s.Realms().Exists(ctx, name) }
	}
	resolverExists := func(name string) func(*testing.T, *authsrv.Server) bool {
		return func(t *testing.T, s *authsrv.Server) bool { _, ok, _ := s.Resolvers().Get(ctx, name); return ok }
	}
	smtpExists := func(id string) func(*testing.T, *authsrv.Server) bool {
		return func(t *testing.T, s *authsrv.Server) bool {
			l, _ := s.Notify().SMTPServers(ctx)
			for _, d := range l {
				if d.Identifier == id {
					return true
				}
			}
			return false
		}
	}
	gateway := func(s *authsrv.Server, name string) (notify.Gateway, bool) {
		l, _ := s.Notify().Gateways(ctx, 0)
		for _, g := range l {
			if g.Name == name {
				return g, true
			}
		}
		return notify.Gateway{}, false
	}
	radiusExists := func(id string) func(*testing.T, *authsrv.Server) bool {
		return func(t *testing.T, s *authsrv.Server) bool {
			l, _ := s.Notify().RadiusServers(ctx)
			for _, d := range l {
				if d.Identifier == id {
					return true
				}
			}
			return false
		}
	}
	userExists := func(login string) func(*testing.T, *authsrv.Server) bool {
		return func(t *testing.T, s *authsrv.Server) bool {
			_, _, err := s.Realms().Resolve(ctx, login, "realm1")
			return err == nil
		}
	}
	not := func(f func(*testing.T, *authsrv.Server) bool) func(*testing.T, *authsrv.Server) bool {
		return func(t *testing.T, s *authsrv.Server) bool { return !f(t, s) }
	}
	attr := func(t *testing.T, s *authsrv.Server, k string) string {
		a, _ := s.UserAttributes().Get(ctx, alice(t, s))
		return a[k]
	}
	exported := policy.Export([]policy.Policy{{Name: "imp", Scope: policy.ScopeUser, Action: "disable", Active: true, Priority: 1}})
	return []configOp{
		{"SetPolicy", "POST /policy/p1", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().SetPolicy(ctx, who, policy.Policy{Name: "p1", Scope: policy.ScopeUser, Action: "enable", Realm: []string{"realm1"}, Active: true, Priority: 1})
			return err
		}, policyExists("p1"), map[string]string{"realm": "realm1"}},
		{"DisablePolicy", "POST /policy/disable/base", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().DisablePolicy(ctx, who, "base")
			return err
		}, not(policyActive), nil},
		{"DeletePolicy", "DELETE /policy/base", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().DeletePolicy(ctx, who, "base")
			return err
		}, not(policyExists("base")), nil},
		{"RenamePolicy", "PATCH /policy/base", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().RenamePolicy(ctx, who, "base", "base2")
			return err
		}, policyExists("base2"), nil},
		{"ImportPolicies", "POST /policy/import", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().ImportPolicies(ctx, who, exported)
			return err
		}, policyExists("imp"), nil},
		{"SetRealm", "POST /realm/realm3", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, _, err := s.Ops().SetRealm(ctx, who, "realm3", []realm.Entry{{Name: "mem1"}})
			return err
		}, realmExists("realm3"), map[string]string{"realm": "realm3"}},
		{"SetRealmNode", "POST /realm/realm1/node/", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, _, err := s.Ops().SetRealmNode(ctx, who, "realm1", s.NodeID(), []realm.Entry{{Name: "spare"}})
			return err
		}, func(t *testing.T, s *authsrv.Server) bool {
			r, _, _ := s.Realms().Get(ctx, "realm1")
			return len(r.Resolvers) == 2
		}, map[string]string{"realm": "realm1"}},
		{"DeleteRealm", "DELETE /realm/realm2", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().DeleteRealm(ctx, who, "realm2", false)
			return err
		}, not(realmExists("realm2")), map[string]string{"realm": "realm2"}},
		{"SetDefaultRealm", "POST /defaultrealm/realm2", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().SetDefaultRealm(ctx, who, "realm2")
			return err
		}, func(t *testing.T, s *authsrv.Server) bool { d, _ := s.Realms().Default(ctx); return d == "realm2" }, map[string]string{"realm": "realm2"}},
		{"ClearDefaultRealm", "DELETE /defaultrealm", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().ClearDefaultRealm(ctx, who)
			return err
		}, func(t *testing.T, s *authsrv.Server) bool { d, _ := s.Realms().Default(ctx); return d == "" }, nil},
		{"SetResolver", "POST /resolver/mem2", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().SetResolver(ctx, who, "mem2", map[string]string{"type": resolvertest.MemTypeName})
			return err
		}, resolverExists("mem2"), map[string]string{"resolver": "mem2"}},
		{"DeleteResolver", "DELETE /resolver/spare", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().DeleteResolver(ctx, who, "spare")
			return err
		}, not(resolverExists("spare")), map[string]string{"resolver": "spare"}},
		{"SetSMTPServer", "POST /smtpserver/mail2", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			return s.Ops().SetSMTPServer(ctx, who, notify.SMTPServer{Identifier: "mail2", Server: "127.0.0.1", Password: "pw"})
		}, smtpExists("mail2"), nil},
		{"DeleteSMTPServer", "DELETE /smtpserver/mail1", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			// The gateway gw1 names mail1 but does not hold it.
			return s.Ops().DeleteSMTPServer(ctx, who, "mail1")
		}, not(smtpExists("mail1")), nil},
		{"SetSMSGateway", "POST /smsgateway", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().SetSMSGateway(ctx, who, notify.Gateway{Name: "gw2", Module: notify.ModuleSMTP,
				Options: map[string]string{"MAILTO": "x@example.org", "SMTPIDENTIFIER": "mail1"}})
			return err
		}, func(t *testing.T, s *authsrv.Server) bool { _, ok := gateway(s, "gw2"); return ok }, nil},
		{"DeleteSMSGateway", "DELETE /smsgateway/gw1", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().DeleteSMSGateway(ctx, who, "gw1")
			return err
		}, func(t *testing.T, s *authsrv.Server) bool { _, ok := gateway(s, "gw1"); return !ok }, nil},
		{"DeleteSMSGatewayOption", "DELETE /smsgateway/option/", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			g, _ := gateway(s, "gw1")
			_, err := s.Ops().DeleteSMSGatewayOption(ctx, who, g.ID, "SUBJECT")
			return err
		}, func(t *testing.T, s *authsrv.Server) bool {
			g, _ := gateway(s, "gw1")
			_, has := g.Options["SUBJECT"]
			return !has
		}, nil},
		{"SetRadiusServer", "POST /radiusserver/rad2", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			return s.Ops().SetRadiusServer(ctx, who, notify.RadiusServer{Identifier: "rad2", Server: "127.0.0.1", Secret: "x"})
		}, radiusExists("rad2"), nil},
		{"DeleteRadiusServer", "DELETE /radiusserver/rad1", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			return s.Ops().DeleteRadiusServer(ctx, who, "rad1")
		}, not(radiusExists("rad1")), nil},
		{"AddUser", "POST /user/", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().AddUser(ctx, who, authsrv.UserRequest{User: "zed", Resolver: "mem1",
				Fields: map[string]string{"email": "zed@example.org", "password": "Zed-pw-1"}})
			return err
		}, userExists("zed"), map[string]string{"user": "zed", "resolver": "mem1"}},
		{"UpdateUser", "PUT /user/", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			return s.Ops().UpdateUser(ctx, who, authsrv.UserRequest{User: "alice", Resolver: "mem1",
				Fields: map[string]string{"email": "new@example.org"}})
		}, func(t *testing.T, s *authsrv.Server) bool {
			l, _ := s.Realms().Users(ctx, []string{"realm1"}, "", map[string]string{"username": "alice"})
			return len(l) == 1 && l[0].Info.String("email") == "new@example.org"
		}, map[string]string{"user": "alice", "resolver": "mem1"}},
		{"DeleteUser", "DELETE /user/mem1/alice", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			return s.Ops().DeleteUser(ctx, who, "mem1", "alice")
		}, not(userExists("alice")), map[string]string{"user": "alice", "resolver": "mem1"}},
		{"SetUserAttribute", "POST /user/attribute", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().SetUserAttribute(ctx, who, authsrv.AttributeRequest{User: "alice", Realm: "realm1", Key: "dep", Value: "sales"})
			return err
		}, func(t *testing.T, s *authsrv.Server) bool { return attr(t, s, "dep") == "sales" },
			map[string]string{"user": "alice", "realm": "realm1", "resolver": "mem1"}},
		{"DeleteUserAttribute", "DELETE /user/attribute/k/alice/realm1", func(ctx context.Context, s *authsrv.Server, who caller.Caller) error {
			_, err := s.Ops().DeleteUserAttribute(ctx, who, authsrv.AttributeRequest{User: "alice", Realm: "realm1", Key: "k"})
			return err
		}, func(t *testing.T, s *authsrv.Server) bool { return attr(t, s, "k") == "" },
			map[string]string{"user": "alice", "realm": "realm1", "resolver": "mem1"}},
	}
}

// TestConfigOpsAudited: each configuration operation of a trusted caller
// makes its change and writes exactly one audit entry, a success with the
// operation's action and target columns.
func TestConfigOpsAudited(t *testing.T) {
	for _, op := range configOps() {
		t.Run(op.name, func(t *testing.T) {
			s := configServer(t)
			if op.done(t, s) {
				t.Fatal("the change exists before the operation")
			}
			before := len(auditRows(t, s))
			if err := op.run(t.Context(), s, caller.Caller{UserAgent: "tool/1.0"}); err != nil {
				t.Fatal(err)
			}
			if !op.done(t, s) {
				t.Fatal("the change is missing")
			}
			rows := auditRows(t, s)
			if len(rows) != before+1 {
				t.Fatalf("%d audit entries written, want 1", len(rows)-before)
			}
			e := rows[len(rows)-1]
			if a := fmt.Sprint(e["action"]); !strings.HasPrefix(a, op.action) {
				t.Errorf("action %q, want %q", a, op.action)
			}
			if fmt.Sprint(e["success"]) != "1" || e["user_agent"] != "tool" {
				t.Errorf("entry %v", e)
			}
			for k, v := range op.cols {
				if e[k] != v {
					t.Errorf("%s = %v, want %q", k, e[k], v)
				}
			}
		})
	}
}

// TestConfigOpsDenied: an administrator without the right changes nothing
// and the refusal is audited as a failure under the administrator's name.
func TestConfigOpsDenied(t *testing.T) {
	for _, op := range configOps() {
		t.Run(op.name, func(t *testing.T) {
			s := configServer(t)
			if _, err := s.Policies().Set(t.Context(), policy.Policy{Name: "others", Scope: policy.ScopeAdmin,
				Action: "policyread", AdminUser: []string{"someone-else"}, Active: true, Priority: 1}); err != nil {
				t.Fatal(err)
			}
			state, before := configState(t, s), len(auditRows(t, s))
			err := op.run(t.Context(), s, caller.Caller{Role: caller.Admin, Name: "bob"})
			if err == nil || !strings.Contains(err.Error(), "not allowed") {
				t.Fatalf("err = %v, want a refusal", err)
			}
			if configState(t, s) != state {
				t.Error("a refused operation changed the configuration")
			}
			rows := auditRows(t, s)
			if len(rows) != before+1 {
				t.Fatalf("%d audit entries written, want 1", len(rows)-before)
			}
			if e := rows[len(rows)-1]; fmt.Sprint(e["success"]) != "0" || e["administrator"] != "bob" || !strings.HasSuffix(fmt.Sprint(e["info"]), err.Error()) {
				t.Errorf("entry %v", e)
			}
		})
	}
}

// TestConfigOpsBadInput: refused input changes nothing and is audited as
// a failure.
func TestConfigOpsBadInput(t *testing.T) {
	cases := []struct {
		name string
		run  func(ctx context.Context, s *authsrv.Server) error
	}{
		{"policy scope", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().SetPolicy(ctx, caller.Caller{}, policy.Policy{Name: "p1", Scope: "nope", Action: "enable", Priority: 1})
			return err
		}},
		{"policy without scope", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().SetPolicy(ctx, caller.Caller{}, policy.Policy{Name: "p1", Action: "enable", Priority: 1})
			return err
		}},
		{"unknown policy", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().EnablePolicy(ctx, caller.Caller{}, "nope")
			return err
		}},
		{"rename onto existing", func(ctx context.Context, s *authsrv.Server) error {
			if _, err := s.Policies().Set(ctx, policy.Policy{Name: "other", Scope: policy.ScopeUser, Action: "enable", Active: true, Priority: 1}); err != nil {
				return nil // makes the test fail below
			}
			_, err := s.Ops().RenamePolicy(ctx, caller.Caller{}, "base", "other")
			return err
		}},
		{"empty import", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().ImportPolicies(ctx, caller.Caller{}, nil)
			return err
		}},
		{"realm name", func(ctx context.Context, s *authsrv.Server) error {
			_, _, err := s.Ops().SetRealm(ctx, caller.Caller{}, "bad/name", nil)
			return err
		}},
		{"realm with attributes", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().DeleteRealm(ctx, caller.Caller{}, "realm1", false)
			return err
		}},
		{"unknown node", func(ctx context.Context, s *authsrv.Server) error {
			_, _, err := s.Ops().SetRealmNode(ctx, caller.Caller{}, "realm1", "no-such-node", nil)
			return err
		}},
		{"resolver without type", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().SetResolver(ctx, caller.Caller{}, "mem9", map[string]string{})
			return err
		}},
		{"resolver in use", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().DeleteResolver(ctx, caller.Caller{}, "mem1")
			return err
		}},
		{"smtp without server", func(ctx context.Context, s *authsrv.Server) error {
			return s.Ops().SetSMTPServer(ctx, caller.Caller{}, notify.SMTPServer{Identifier: "mail9"})
		}},
		{"unknown sms module", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().SetSMSGateway(ctx, caller.Caller{}, notify.Gateway{Name: "gw9", Module: "nope"})
			return err
		}},
		{"radius without secret", func(ctx context.Context, s *authsrv.Server) error {
			return s.Ops().SetRadiusServer(ctx, caller.Caller{}, notify.RadiusServer{Identifier: "rad9", Server: "127.0.0.1"})
		}},
		{"user in unknown resolver", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().AddUser(ctx, caller.Caller{}, authsrv.UserRequest{User: "zed", Resolver: "nope"})
			return err
		}},
		{"existing user", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().AddUser(ctx, caller.Caller{}, authsrv.UserRequest{User: "alice", Resolver: "mem1"})
			return err
		}},
		{"attribute key", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().SetUserAttribute(ctx, caller.Caller{}, authsrv.AttributeRequest{User: "alice", Realm: "realm1", Key: "a:b", Value: "v"})
			return err
		}},
		{"attribute of unknown user", func(ctx context.Context, s *authsrv.Server) error {
			_, err := s.Ops().SetUserAttribute(ctx, caller.Caller{}, authsrv.AttributeRequest{User: "nobody", Realm: "realm1", Key: "k", Value: "v"})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := configServer(t)
			ctx := t.Context()
			state, before := configState(t, s), len(auditRows(t, s))
			err := tc.run(ctx, s)
			if err == nil {
				t.Fatal("bad input accepted")
			}
			if tc.name == "rename onto existing" {
				// The case wrote "other" itself; compare without it.
				_, _ = s.Policies().Delete(ctx, "other")
			}
			if configState(t, s) != state {
				t.Error("refused input changed the configuration")
			}
			rows := auditRows(t, s)
			if len(rows) != before+1 {
				t.Fatalf("%d audit entries written, want 1", len(rows)-before)
			}
			if e := rows[len(rows)-1]; fmt.Sprint(e["success"]) != "0" {
				t.Errorf("entry %v", e)
			}
		})
	}
}

// recorder is an EventHandler that remembers what it saw and can refuse
// in Pre.
type recorder struct {
	mu     sync.Mutex
	seen   []string
	posts  []authsrv.Event
	refuse error
}

func (r *recorder) Pre(_ context.Context, ev authsrv.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, "pre "+ev.Name)
	return r.refuse
}

func (r *recorder) Post(_ context.Context, ev authsrv.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, "post "+ev.Name)
	r.posts = append(r.posts, ev)
}

// TestConfigOpsEvents: a registered EventHandler sees Pre and Post of each
// operation; an error from Pre aborts it with nothing changed.
func TestConfigOpsEvents(t *testing.T) {
	for _, op := range configOps() {
		t.Run(op.name, func(t *testing.T) {
			rec := &recorder{}
			s := configServer(t, authsrv.WithEventHandler(rec))
			if err := op.run(t.Context(), s, caller.Caller{}); err != nil {
				t.Fatal(err)
			}
			if len(rec.seen) != 2 || !strings.HasPrefix(rec.seen[0], "pre ") || rec.seen[1] != "post"+strings.TrimPrefix(rec.seen[0], "pre") {
				t.Fatalf("handler saw %v", rec.seen)
			}
			if ev := rec.posts[0]; ev.Err != nil || !ev.Entry.Success || !strings.HasPrefix(ev.Entry.Action, op.action) {
				t.Errorf("post event %+v", ev)
			}

			refusing := &recorder{refuse: errors.New("not now")}
			s = configServer(t, authsrv.WithEventHandler(refusing))
			state, before := configState(t, s), len(auditRows(t, s))
			if err := op.run(t.Context(), s, caller.Caller{}); err == nil || err.Error() != "not now" {
				t.Fatalf("err = %v, want the handler's", err)
			}
			if op.done(t, s) || configState(t, s) != state {
				t.Error("an operation aborted by Pre changed the configuration")
			}
			rows := auditRows(t, s)
			if len(rows) != before+1 || fmt.Sprint(rows[len(rows)-1]["success"]) != "0" {
				t.Errorf("aborted operation: %d entries, last %v", len(rows)-before, rows[len(rows)-1])
			}
			if len(refusing.posts) != 1 || refusing.posts[0].Err == nil {
				t.Errorf("post after an abort: %+v", refusing.posts)
			}
		})
	}
}
