package token_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

func TestUnassignedInRealm(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	alice := user.User{Login: "alice", Realm: "realm1", Resolver: "r1", UID: "1"}
	for _, tc := range []struct {
		serial string
		realms []string
		owner  *user.User
	}{
		{"U1", []string{"realm1"}, nil},
		{"U2", []string{"Realm1", "realm2"}, nil},
		{"U3", []string{"realm2"}, nil},
		{"U4", nil, nil},
		{"OWNED", []string{"realm1"}, &alice},
	} {
		if _, _, err := e.svc.Init(ctx, token.InitRequest{Serial: tc.serial, Params: token.Params{"otpkey": rfcKey}, Realms: tc.realms, Owner: tc.owner}); err != nil {
			t.Fatal(err)
		}
	}
	got := func(realm string) []string {
		toks, err := e.svc.Unassigned(ctx, realm)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tk := range toks {
			out = append(out, tk.Serial)
		}
		return out
	}
	if g := got("realm1"); !slices.Equal(g, []string{"U1", "U2"}) {
		t.Errorf("realm1: %v", g)
	}
	if g := got("REALM2"); !slices.Equal(g, []string{"U2", "U3"}) {
		t.Errorf("realm2: %v", g)
	}
	if g := got(""); g != nil {
		t.Errorf("no realm: %v", g)
	}
	// An unassigned token keeps its realms and can be claimed again.
	if err := e.svc.Unassign(ctx, "OWNED"); err != nil {
		t.Fatal(err)
	}
	if g := got("realm1"); !slices.Equal(g, []string{"OWNED", "U1", "U2"}) {
		t.Errorf("realm1 after unassign: %v", g)
	}
}

func TestCommitAssign(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	bob := user.User{Login: "bob", Realm: "realm1", Resolver: "r1", UID: "2"}
	for _, s := range []string{"C1", "C2"} {
		if _, _, err := e.svc.Init(ctx, token.InitRequest{Serial: s, Params: token.Params{"otpkey": rfcKey}, Realms: []string{"realm2"}}); err != nil {
			t.Fatal(err)
		}
	}
	match := func(serial, otp string) token.Match {
		t.Helper()
		tk, err := e.svc.Get(ctx, serial)
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.svc.Verify(ctx, tk, otp, nil, nil)
		if err != nil || !m.OK {
			t.Fatalf("verify %s: %v %v", serial, m, err)
		}
		return m
	}
	pin := "4321"
	m0 := match("C1", "755224")
	tk, err := e.svc.CommitAssign(ctx, "C1", m0, token.Claim{Owner: bob, PIN: &pin, Owned: 0})
	if err != nil {
		t.Fatal(err)
	}
	if !tk.Assigned() || tk.Owner.UID != "2" || tk.Count != 1 || !slices.Equal(tk.Realms, []string{"realm1", "realm2"}) {
		t.Fatalf("committed %+v", tk)
	}
	if ok, err := e.svc.CheckPIN(ctx, tk, pin); err != nil || !ok {
		t.Fatalf("PIN: %v %v", ok, err)
	}
	if owned, err := e.svc.ByOwner(ctx, bob); err != nil || len(owned) != 1 {
		t.Fatalf("owner index: %d %v", len(owned), err)
	}

	// The same match again: the value is used up.
	if _, err := e.svc.CommitAssign(ctx, "C1", m0, token.Claim{Owner: bob, Owned: 1}); !errors.Is(err, token.ErrTaken) && !errors.Is(err, token.ErrReplay) {
		t.Fatalf("replayed match: %v", err)
	}
	// A later value of an owned token: taken.
	if _, err := e.svc.CommitAssign(ctx, "C1", match("C1", "287082"), token.Claim{Owner: bob, Owned: 1}); !errors.Is(err, token.ErrTaken) {
		t.Fatalf("owned token: %v", err)
	}
	// bob got C1 since the caller counted 0 tokens: C2 is not assigned and
	// its value is not used up.
	m := match("C2", "755224")
	if _, err := e.svc.CommitAssign(ctx, "C2", m, token.Claim{Owner: bob, Owned: 0}); !errors.Is(err, token.ErrOwnerChanged) {
		t.Fatalf("owner changed: %v", err)
	}
	c2, err := e.svc.Get(ctx, "C2")
	if err != nil || c2.Assigned() || c2.Count != 0 {
		t.Fatalf("C2 after a refused claim: %+v %v", c2, err)
	}
	// With the right count it goes ahead, and a nil PIN keeps the PIN.
	if tk, err = e.svc.CommitAssign(ctx, "C2", m, token.Claim{Owner: bob, Owned: 1}); err != nil || tk.Count != 1 || tk.PIN != "" {
		t.Fatalf("second claim: %+v %v", tk, err)
	}
	// No user, no claim.
	if _, err := e.svc.CommitAssign(ctx, "C2", m, token.Claim{}); err == nil {
		t.Fatal("claim without owner")
	}
}
