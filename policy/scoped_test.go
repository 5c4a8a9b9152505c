package policy_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
)

// TestScopedMatchesService checks that reading actions from one Scoped
// set gives what Service.Match and Service.Values give per action.
func TestScopedMatchesService(t *testing.T) {
	s := svcNew(t)
	for _, p := range []policy.Policy{
		{Name: "a1", Scope: "authentication", Action: "otppin=userstore, passOnNoToken", Realm: []string{"realm1"}},
		{Name: "a2", Scope: "authentication", Action: "otppin=none, challenge_response=hotp totp", Priority: 2},
		{Name: "a3", Scope: "authentication", Action: "mangle=user/@x//", User: []string{"alice"}, Priority: 3},
		{Name: "a4", Scope: "authentication", Action: "mangle=pass/^p//", Resolver: []string{"reso2"}, Priority: 3},
		{Name: "a5", Scope: "authentication", Action: "passOnNoUser", Client: []string{"10.0.0.0/8"}},
		{Name: "a6", Scope: "authentication", Action: "*, !passOnNoToken", Realm: []string{"realm2"}},
		{Name: "z1", Scope: "authorization", Action: "tokentype=hotp, serial=^OATH", Priority: 2},
		{Name: "z2", Scope: "authorization", Action: "tokentype=totp", Priority: 2},
		{Name: "c1", Scope: "authentication", Action: "auth_cache=4h", Conditions: []policy.Condition{
			{Section: policy.SectionUserinfo, Key: "email", Comparator: "equals", Value: "a@b", Active: true, MissingData: policy.MissingFalse}}},
	} {
		svcSet(t, s, p)
	}
	snap, err := s.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	actions := []string{"otppin", "passOnNoToken", "passOnNoUser", "challenge_response", "mangle", "tokentype", "serial", "auth_cache", "nothing"}
	for _, u := range []struct{ user, realm, resolver, client string }{
		{"alice", "realm1", "reso1", ""}, {"bob", "realm1", "reso2", "10.1.2.3"}, {"carol", "realm2", "reso1", ""}, {"", "", "", ""},
	} {
		for _, scope := range []string{"authentication", "authorization", "admin"} {
			q := policy.Query{Scope: scope}
			if u.user != "" {
				q.User, q.Realm, q.Resolver = policy.Str(u.user), policy.Str(u.realm), policy.Str(u.resolver)
			}
			if u.client != "" {
				q.Client = netip.MustParseAddr(u.client)
			}
			sc, err := snap.Scoped(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range actions {
				name := fmt.Sprintf("%s/%s/%s", u.user, scope, a)
				q.Action = a
				want, werr := s.Match(t.Context(), q)
				got, gerr := sc.Match(a)
				if (werr != nil) != (gerr != nil) || len(want) != len(got) {
					t.Errorf("%s: Match %v %v, Scoped %v %v", name, want, werr, got, gerr)
					continue
				}
				for i := range want {
					if want[i].Name != got[i].Name {
						t.Errorf("%s: Match %s, Scoped %s", name, want[i].Name, got[i].Name)
					}
				}
				for _, unique := range []bool{false, true} {
					wv, werr := s.Values(t.Context(), q, unique, true)
					gv, gerr := sc.Values(a, unique, true)
					if apierr.Is(werr, apierr.Policy) != apierr.Is(gerr, apierr.Policy) || (werr == nil && !reflect.DeepEqual(wv, gv)) {
						t.Errorf("%s unique=%v: Values %v %v, Scoped %v %v", name, unique, wv, werr, gv, gerr)
					}
				}
			}
		}
	}
	// Settings keep the priority order and the raw values.
	sc, err := snap.Scoped(t.Context(), policy.Query{Scope: "authentication", User: policy.Str("alice"), Realm: policy.Str("realm1"), Resolver: policy.Str("reso2")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := sc.Settings("mangle")
	if err != nil || len(got) != 2 || got[0].Value != "user/@x//" || got[1].Value != "pass/^p//" {
		t.Errorf("mangle settings %+v %v", got, err)
	}
	if b, err := sc.Settings("passOnNoToken"); err != nil || len(b) != 1 || b[0].Value != true || b[0].Name != "a1" {
		t.Errorf("passOnNoToken settings %+v %v", b, err)
	}
	if !snap.Active("authorization") || snap.Active("enrollment") {
		t.Error("Active")
	}
}

// TestSnapshotReadsOnce: a snapshot is not changed by later writes.
func TestSnapshotReadsOnce(t *testing.T) {
	s := svcNew(t)
	svcSet(t, s, policy.Policy{Name: "p", Scope: "authentication", Action: "passOnNoUser"})
	snap, err := s.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(t.Context(), "p"); err != nil {
		t.Fatal(err)
	}
	sc, err := snap.Scoped(t.Context(), policy.Query{Scope: "authentication"})
	if err != nil {
		t.Fatal(err)
	}
	if ps, _ := sc.Match("passOnNoUser"); len(ps) != 1 {
		t.Errorf("snapshot lost its policy: %v", ps)
	}
	snap, _ = s.Snapshot(t.Context())
	if sc, _ := snap.Scoped(t.Context(), policy.Query{Scope: "authentication"}); !sc.Empty() {
		t.Error("a new snapshot still has the deleted policy")
	}
}
