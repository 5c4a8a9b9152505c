package policy_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store/storetest"
)

// svcNow is a Wednesday, 10:00.
var svcNow = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func svcNew(t testing.TB) *policy.Service {
	t.Helper()
	defs := policy.NewDefs()
	if err := defs.Add(policy.Builtin()...); err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"realm1": true, "realm2": true, "reso1": true, "reso2": true, "node1": true}
	exists := func(_ context.Context, n string) bool { return known[n] }
	return policy.New(policy.Config{
		Store: storetest.Open(t), Defs: defs, Now: func() time.Time { return svcNow }, NodeName: "node1",
		Superusers: []string{"super"}, RealmExists: exists, ResolverExists: exists, NodeExists: exists,
		UserResolvers: func(_ context.Context, login, realm string) []string {
			if login == "alice" && realm == "realm1" {
				return []string{"reso1", "reso2"}
			}
			return nil
		},
	})
}

func svcSet(t testing.TB, s *policy.Service, p policy.Policy) {
	t.Helper()
	if p.Priority == 0 {
		p.Priority = 1
	}
	p.Active = true
	if _, err := s.Set(context.Background(), p); err != nil {
		t.Fatalf("Set(%s): %v", p.Name, err)
	}
}

func TestSvcValidation(t *testing.T) {
	s := svcNew(t)
	base := func(mod func(*policy.Policy)) policy.Policy {
		p := policy.Policy{Name: "p1", Scope: "admin", Action: "enable", Priority: 1, Active: true}
		mod(&p)
		return p
	}
	cases := []struct {
		name string
		p    policy.Policy
		code int
		msg  string
	}{
		{"check name", base(func(p *policy.Policy) { p.Name = "Check" }), 905, "Invalid policy name: Check"},
		{"update prefix", base(func(p *policy.Policy) { p.Name = "pi-update-policy-x" }), 905, "Invalid policy name: pi-update-policy-x"},
		{"bad chars", base(func(p *policy.Policy) { p.Name = "a/b" }), 905, "The name of the policy may only contain the characters a-zA-Z0-9_. -"},
		{"space", base(func(p *policy.Policy) { p.Name = "a b" }), 905, "Policy name must not contain white spaces!"},
		{"scope", base(func(p *policy.Policy) { p.Scope = "nope" }), 905, "Invalid scope 'nope' in policy 'p1'!"},
		{"no scope", base(func(p *policy.Policy) { p.Scope = "" }), 905, "Missing parameter: scope"},
		{"no action", base(func(p *policy.Policy) { p.Action = "" }), 905, "Missing parameter: action"},
		{"bad action", base(func(p *policy.Policy) { p.Action = "enable, foo, !bar" }), 905, "Invalid actions ['bar', 'foo']!"},
		{"spaced key", base(func(p *policy.Policy) { p.Scope = "authentication"; p.Action = "otppin = userstore" }), 905, "Invalid actions ['otppin ']!"},
		{"priority", base(func(p *policy.Policy) { p.Priority = 0 }), 905, "Priority must be at least 1"},
		{"realm", base(func(p *policy.Policy) { p.Realm = []string{"realm1", "!ghost"} }), 905, "Undefined User-realms: ['ghost']!"},
		{"resolver", base(func(p *policy.Policy) { p.Resolver = []string{"nope"} }), 905, "Undefined Resolvers: ['nope']!"},
		{"pinode", base(func(p *policy.Policy) { p.PINode = []string{"node9"} }), 905, "Undefined Privacyidea nodes: ['node9']!"},
		{"adminrealm", base(func(p *policy.Policy) { p.AdminRealm = []string{"realm1"} }), 905, "Undefined Admin realms: ['realm1']!"},
		{"time", base(func(p *policy.Policy) { p.Time = "Mon: 18-8" }), 905, "Invalid time format 'Mon: 18-8'!"},
		{"client", base(func(p *policy.Policy) { p.Client = []string{"10.0.0.0/33"} }), 302, "Invalid client definition!"},
		{"condition", base(func(p *policy.Policy) {
			p.Conditions = []policy.Condition{{Section: "nope", Key: "k", Comparator: "equals", Value: "v", Active: true}}
		}), 905, "Invalid condition of policy 'p1': Unknown section 'nope' set in condition."},
		{"realm_dropdown", base(func(p *policy.Policy) { p.Scope = "webui"; p.Action = "realm_dropdown=realm1 x" }), 905,
			"Invalid value for action 'realm_dropdown': The following realms do not exist: ['x']!"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Set(t.Context(), tc.p)
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Number() != tc.code || ae.Error() != tc.msg {
				t.Fatalf("err = %v, want %d %q", err, tc.code, tc.msg)
			}
		})
	}
	if list, _ := s.List(t.Context(), policy.Filter{}); len(list) != 0 {
		t.Errorf("refused policies were stored: %v", list)
	}
	// Accepted: patterns, exclusions, an inactive invalid condition, user
	// scope without actions, system scope with anything.
	for _, p := range []policy.Policy{
		base(func(p *policy.Policy) {
			p.Realm = []string{"*", "!realm2", "realm.*"}
			p.User = []string{"*", "!admin"}
		}),
		base(func(p *policy.Policy) {
			p.Name = "p2"
			p.Conditions = []policy.Condition{{Section: "nope", Key: "", Comparator: "x", Value: "", Active: false}}
		}),
		{Name: "p3", Scope: "user", Priority: 1, Active: true},
		{Name: "p4", Scope: "system", Action: "whatever", Priority: 1, Active: true},
		base(func(p *policy.Policy) { p.Name = "p5"; p.AdminRealm = []string{"SUPER"}; p.Action = "*, !delete" }),
	} {
		if _, err := s.Set(t.Context(), p); err != nil {
			t.Errorf("Set(%s): %v", p.Name, err)
		}
	}
}

func TestSvcMatching(t *testing.T) {
	s := svcNew(t)
	svcSet(t, s, policy.Policy{Name: "all", Scope: "admin", Action: "enable, disable"})
	svcSet(t, s, policy.Policy{Name: "realm1only", Scope: "admin", Action: "delete", Realm: []string{"realm1"}})
	svcSet(t, s, policy.Policy{Name: "notadmin", Scope: "admin", Action: "reset", User: []string{"*", "!admin"}})
	svcSet(t, s, policy.Policy{Name: "negonly", Scope: "admin", Action: "revoke", User: []string{"!admin"}})
	svcSet(t, s, policy.Policy{Name: "regex", Scope: "admin", Action: "assign", User: []string{"customer_.*"}})
	svcSet(t, s, policy.Policy{Name: "net", Scope: "admin", Action: "unassign", Client: []string{"10.0.0.0/8", "!10.0.0.1"}})
	svcSet(t, s, policy.Policy{Name: "office", Scope: "admin", Action: "resync", Time: "Mon-Fri: 08:00-18:00"})
	svcSet(t, s, policy.Policy{Name: "weekend", Scope: "admin", Action: "setpin", Time: "Sat-Sun: 0-23:59"})
	svcSet(t, s, policy.Policy{Name: "agent", Scope: "admin", Action: "getserial", UserAgents: []string{"PAM"}})
	svcSet(t, s, policy.Policy{Name: "node", Scope: "admin", Action: "losttoken", PINode: []string{"node1"}})
	svcSet(t, s, policy.Policy{Name: "star", Scope: "admin", Action: "*, !tokenrealms", AdminUser: []string{"boss"}})
	svcSet(t, s, policy.Policy{Name: "reso", Scope: "admin", Action: "settokeninfo", Resolver: []string{"reso2"}, CheckAllResolvers: true})

	ip := netip.MustParseAddr
	cases := []struct {
		name  string
		q     policy.Query
		match string
	}{
		{"plain", policy.Query{Action: "enable"}, "all"},
		{"realm match", policy.Query{Action: "delete", Realm: policy.Str("realm1")}, "realm1only"},
		{"realm miss", policy.Query{Action: "delete", Realm: policy.Str("realm2")}, ""},
		{"realm unfiltered", policy.Query{Action: "delete"}, "realm1only"},
		{"excluded user", policy.Query{Action: "reset", User: policy.Str("admin")}, ""},
		{"other user", policy.Query{Action: "reset", User: policy.Str("bob")}, "notadmin"},
		{"only negation", policy.Query{Action: "revoke", User: policy.Str("bob")}, ""},
		{"regex user", policy.Query{Action: "assign", User: policy.Str("customer_42")}, "regex"},
		{"regex must be full", policy.Query{Action: "assign", User: policy.Str("xcustomer_42")}, ""},
		{"client in", policy.Query{Action: "unassign", Client: ip("10.1.2.3")}, "net"},
		{"client excluded", policy.Query{Action: "unassign", Client: ip("10.0.0.1")}, ""},
		{"client mapped", policy.Query{Action: "unassign", Client: ip("::ffff:10.9.9.9").Unmap()}, "net"},
		{"client outside", policy.Query{Action: "unassign", Client: ip("192.168.1.1")}, ""},
		{"client unknown", policy.Query{Action: "unassign"}, ""},
		{"time in", policy.Query{Action: "resync"}, "office"},
		{"time out", policy.Query{Action: "setpin"}, ""},
		{"agent", policy.Query{Action: "getserial", UserAgent: "PAM/1.1.0"}, "agent"},
		{"agent case", policy.Query{Action: "getserial", UserAgent: "pam/2"}, "agent"},
		{"agent other", policy.Query{Action: "getserial", UserAgent: "privacyidea-cp/2.0 Windows/Laptop"}, ""},
		{"agent none", policy.Query{Action: "getserial"}, ""},
		{"node", policy.Query{Action: "losttoken"}, "node"},
		{"star grants", policy.Query{Action: "enroll", AdminUser: policy.Str("boss")}, "star"},
		{"star exclusion", policy.Query{Action: "tokenrealms", AdminUser: policy.Str("boss")}, ""},
		{"star other admin", policy.Query{Action: "enroll", AdminUser: policy.Str("clerk")}, ""},
		{"check all resolvers", policy.Query{Action: "settokeninfo", User: policy.Str("alice"), Realm: policy.Str("realm1"), Resolver: policy.Str("reso1")}, "reso"},
		{"check all resolvers miss", policy.Query{Action: "settokeninfo", User: policy.Str("bob"), Realm: policy.Str("realm1"), Resolver: policy.Str("reso1")}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.Scope = "admin"
			if tc.q.AdminUser == nil {
				tc.q.AdminUser = policy.Str("clerk")
			}
			ps, err := s.Match(t.Context(), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.Name)
			}
			if strings.Join(got, ",") != tc.match {
				t.Errorf("matched %v, want %q", got, tc.match)
			}
		})
	}
	// The gate: allowed by a match, or by an empty scope.
	if ok, _, _ := s.Allowed(t.Context(), policy.Query{Scope: "admin", Action: "policywrite", AdminUser: policy.Str("admin")}); ok {
		t.Error("an action no active admin policy grants was allowed")
	}
	if ok, _, _ := s.Allowed(t.Context(), policy.Query{Scope: "user", Action: "enable"}); !ok {
		t.Error("a scope without policies must allow everything")
	}
}

func TestSvcValuesAndPriority(t *testing.T) {
	s := svcNew(t)
	svcSet(t, s, policy.Policy{Name: "a", Scope: "authentication", Action: "otppin=userstore, challenge_response=hotp totp", Priority: 2})
	svcSet(t, s, policy.Policy{Name: "b", Scope: "authentication", Action: "otppin=none", Priority: 1, Realm: []string{"realm1"}})
	svcSet(t, s, policy.Policy{Name: "c", Scope: "authentication", Action: `challenge_text='Enter\, please', otppin=none`, Priority: 1})
	q := policy.Query{Scope: "authentication", Action: "otppin", Realm: policy.Str("realm1")}
	v, err := s.Values(t.Context(), q, true, false)
	if err != nil || fmt.Sprint(v) != "map[none:[b c]]" {
		t.Errorf("unique otppin = %v, %v (the lowest priority number wins)", v, err)
	}
	q.Action = "challenge_response"
	if v, _ := s.Values(t.Context(), q, false, false); fmt.Sprint(v) != "map[hotp:[a] totp:[a]]" {
		t.Errorf("challenge_response = %v", v)
	}
	q.Action = "challenge_text"
	if v, _ := s.Values(t.Context(), q, true, true); fmt.Sprint(v) != `map[Enter\, please:[c]]` {
		t.Errorf("quoted text = %v", v)
	}
	svcSet(t, s, policy.Policy{Name: "d", Scope: "authentication", Action: "otppin=tokenpin", Priority: 1})
	q.Action = "otppin"
	if _, err := s.Values(t.Context(), q, true, false); err == nil || err.Error() != "There are policies with conflicting actions: ['b', 'c', 'd']" || !apierr.Is(err, apierr.Policy) {
		t.Errorf("conflict: %v", err)
	}
}

func TestSvcLifecycle(t *testing.T) {
	ctx := t.Context()
	s := svcNew(t)
	id, err := s.Set(ctx, policy.Policy{Name: "p", Scope: "admin", Action: "enable", Priority: 1, Active: true})
	if err != nil || id <= 0 {
		t.Fatal(id, err)
	}
	if id2, _ := s.Set(ctx, policy.Policy{Name: "p", Scope: "admin", Action: "disable", Priority: 1, Active: true}); id2 != id {
		t.Errorf("update changed the id: %d", id2)
	}
	if got, _ := s.Disable(ctx, "p"); got != id {
		t.Errorf("Disable = %d", got)
	}
	if ok, _ := s.ActiveInScope(ctx, "admin"); ok {
		t.Error("a disabled policy counts as active")
	}
	if _, err := s.Enable(ctx, "nope"); err == nil || err.Error() != "The policy with name 'nope' does not exist" {
		t.Errorf("Enable unknown: %v", err)
	}
	if got, _ := s.Rename(ctx, "p", "q"); got != id {
		t.Errorf("Rename = %d", got)
	}
	if _, err := s.Rename(ctx, "p", "r"); err == nil || err.Error() != "Policy does not exist: p" {
		t.Errorf("rename missing: %v", err)
	}
	active := false
	if l, _ := s.List(ctx, policy.Filter{Active: &active}); len(l) != 1 || l[0].Name != "q" {
		t.Errorf("List inactive = %v", l)
	}
	if got, _ := s.Delete(ctx, "q"); got != id {
		t.Errorf("Delete = %d", got)
	}
	if _, err := s.Delete(ctx, "q"); !errors.Is(err, policy.ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
	// An import with one bad policy imports nothing.
	n, err := s.Import(ctx, []policy.Policy{
		{Name: "ok1", Scope: "admin", Action: "enable", Active: true},
		{Name: "bad", Scope: "admin", Action: "nonsense", Active: true},
	})
	if err == nil || n != 0 {
		t.Fatalf("Import = %d, %v", n, err)
	}
	if l, _ := s.List(ctx, policy.Filter{}); len(l) != 0 {
		t.Errorf("a failed import stored %v", l)
	}
}

// BenchmarkMatch1000 matches against 1,000 policies with conditions.
func BenchmarkMatch1000(b *testing.B) {
	s := svcNew(b)
	var ps []policy.Policy
	for i := range 1000 {
		ps = append(ps, policy.Policy{
			Name: fmt.Sprintf("p%04d", i), Scope: "admin", Priority: 1 + i%10, Active: true,
			Action: "enable, disable, " + []string{"delete", "reset", "resync", "assign"}[i%4],
			Realm:  []string{"realm1"}, User: []string{"*", fmt.Sprintf("!u%d", i)},
			Client: []string{"10.0.0.0/8", "!10.0.0.1"}, Time: "Mon-Sun: 0-23:59",
			Conditions: []policy.Condition{
				{Section: "userinfo", Key: "department", Comparator: "equals", Value: "sales", Active: true},
				{Section: "HTTP Request header", Key: "X-Forwarded-Proto", Comparator: "equals", Value: "https", Active: true},
			},
		})
	}
	if _, err := s.Import(context.Background(), ps); err != nil {
		b.Fatal(err)
	}
	data := policy.ConditionData{UserInfo: map[string]any{"department": "sales"}, Headers: map[string][]string{"X-Forwarded-Proto": {"https"}}}
	q := policy.Query{Scope: "admin", Action: "delete", Realm: policy.Str("realm1"), User: policy.Str("alice"),
		Client: netip.MustParseAddr("10.1.2.3"), Data: func() policy.ConditionData { return data }}
	b.ReportAllocs()
	for b.Loop() {
		ps, err := s.Match(context.Background(), q)
		if err != nil || len(ps) != 250 {
			b.Fatalf("%d %v", len(ps), err)
		}
	}
}

// TestAgentName: the user agent's name is its leading run of letters,
// digits, '_' and '-', lower case, as the pattern ^[a-zA-Z0-9_-]+ finds it.
func TestAgentName(t *testing.T) {
	re := regexp.MustCompile(`^[a-zA-Z0-9_-]+`)
	for _, ua := range []string{"", "privacyIDEA-LDAP-Proxy/1.0", "PAM", "Go-http-client/1.1", "simpleSAMLphp", "/x", " pam",
		"Keycloak_Agent 2", "ünï", "a-b_c9Z!rest", "Mozilla/5.0 (X11)"} {
		if got, want := policy.AgentName(ua), strings.ToLower(re.FindString(ua)); got != want {
			t.Errorf("agentName(%q) = %q, want %q", ua, got, want)
		}
	}
}
