package authsrv_test

import (
	"fmt"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
)

// TestMachineTokenRightsByRealm: manage_machine_tokens is judged against
// the token's owner, so an administrator of realm1 attaches realm1's
// tokens and not realm2's.
func TestMachineTokenRightsByRealm(t *testing.T) {
	ctx := t.Context()
	s := hotpServer(t)
	if _, err := s.Ops().InitToken(ctx, local, authsrv.TokenInit{Type: "hotp", Serial: "H2", User: authsrv.Target{User: "alice", Realm: "realm2"},
		Params: token.Params{"otpkey": fmt.Sprintf("%x", hotpKey)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().SetServiceID(ctx, local, "web", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().SetPolicy(ctx, local, policy.Policy{Name: "ra", Scope: policy.ScopeAdmin, Active: true, Priority: 1,
		Action: "manage_machine_tokens", Realm: []string{"realm1"}, AdminUser: []string{"ra"}}); err != nil {
		t.Fatal(err)
	}
	ra := caller.Caller{Role: caller.Admin, Name: "ra"}
	attach := func(serial string) error {
		_, err := s.Ops().AttachMachineToken(ctx, ra, machine.AttachRequest{Serial: serial, Application: "offline",
			Options: map[string]string{"count": "5"}})
		return err
	}
	if err := attach("H1"); err != nil {
		t.Fatalf("realm1's token: %v", err)
	}
	if err := attach("H2"); err == nil {
		t.Fatal("a realm1 administrator attached a token of realm2")
	}
	ms, err := s.Ops().MachinesOfToken(ctx, local, "H2")
	if err != nil || len(ms) != 0 {
		t.Fatalf("H2 machine tokens %v %v", ms, err)
	}
}

// TestAuthItemsOfflineAudited: fetching offline values moves the token's
// counter, and the request's audit entry commits with that change.
func TestAuthItemsOfflineAudited(t *testing.T) {
	ctx := t.Context()
	s := hotpServer(t)
	if _, err := s.Ops().SetServiceID(ctx, local, "web", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().AttachMachineToken(ctx, local, machine.AttachRequest{Serial: "H1", Application: "offline",
		Options: map[string]string{"service_id": "web", "count": "5", "rounds": "10"}}); err != nil {
		t.Fatal(err)
	}
	before := len(auditRows(t, s))
	items, err := s.Ops().MachineAuthItems(ctx, local, machine.AuthItemRequest{Hostname: "h", Application: "offline",
		Filter: map[string]string{"service_id": "web"}})
	if err != nil || len(items["offline"]) != 1 {
		t.Fatalf("items %v %v", items, err)
	}
	tk, err := s.Tokens().Get(ctx, "H1")
	if err != nil || tk.Count != 5 {
		t.Fatalf("counter %d %v", tk.Count, err)
	}
	rows := auditRows(t, s)[before:]
	if len(rows) != 1 || fmt.Sprint(rows[0]["action"]) != "GET /machine/authitem/offline" {
		t.Fatalf("entries %v", rows)
	}
}
