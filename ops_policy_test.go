package authsrv_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
)

// TestUpdatePolicyMerges: POST /policy/<name> as a library call keeps what
// it does not send, resets what privacyIDEA resets, and two concurrent
// partial updates both land.
func TestUpdatePolicyMerges(t *testing.T) {
	s := configServer(t)
	local := caller.Caller{}
	action, realms, prio := "enable", []string{"realm1"}, 7
	if _, err := s.Ops().UpdatePolicy(t.Context(), local, "p1", authsrv.PolicyUpdate{Scope: policy.ScopeUser,
		Action: &action, Realm: &realms, Priority: &prio, Description: "first", CheckAllResolvers: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().UpdatePolicy(t.Context(), local, "p1", authsrv.PolicyUpdate{Scope: policy.ScopeUser}); err != nil {
		t.Fatal(err)
	}
	p, ok, err := s.Policies().Get(t.Context(), "p1")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if p.Action != "enable" || !slices.Equal(p.Realm, realms) || p.Priority != 7 || !p.Active || p.Description != "" || p.CheckAllResolvers {
		t.Errorf("after a partial update: %+v", p)
	}
	if _, err := s.Ops().UpdatePolicy(t.Context(), local, "p2", authsrv.PolicyUpdate{Scope: policy.ScopeAdmin}); err == nil || !strings.Contains(err.Error(), "Missing parameter: action") {
		t.Errorf("a new admin policy without action: %v", err)
	}

	for i := range 20 {
		name := fmt.Sprintf("race%d", i)
		if _, err := s.Ops().UpdatePolicy(t.Context(), local, name, authsrv.PolicyUpdate{Scope: policy.ScopeUser, Action: &action}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		wg.Go(func() {
			_, err := s.Ops().UpdatePolicy(t.Context(), local, name, authsrv.PolicyUpdate{Scope: policy.ScopeUser, Realm: &realms})
			errs <- err
		})
		wg.Go(func() {
			_, err := s.Ops().UpdatePolicy(t.Context(), local, name, authsrv.PolicyUpdate{Scope: policy.ScopeUser, Priority: &prio})
			errs <- err
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		p, _, err := s.Policies().Get(t.Context(), name)
		if err != nil || !slices.Equal(p.Realm, realms) || p.Priority != 7 {
			t.Fatalf("%s after two concurrent updates: realm %v priority %d (%v)", name, p.Realm, p.Priority, err)
		}
	}
}

// TestPolicySetIf: a write over a version that is no longer stored is
// refused with ErrChanged and changes nothing.
func TestPolicySetIf(t *testing.T) {
	s := configServer(t)
	ctx := t.Context()
	p := policy.Policy{Name: "c1", Scope: policy.ScopeUser, Action: "enable", Active: true, Priority: 1}
	if _, err := s.Policies().SetIf(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Policies().SetIf(ctx, p, nil); !errors.Is(err, policy.ErrChanged) {
		t.Fatalf("create over an existing policy: %v", err)
	}
	stored, _, _ := s.Policies().Get(ctx, "c1")
	changed := p
	changed.Priority = 3
	if _, err := s.Policies().SetIf(ctx, changed, &stored); err != nil {
		t.Fatal(err)
	}
	again := p
	again.Priority = 9
	if _, err := s.Policies().SetIf(ctx, again, &stored); !errors.Is(err, policy.ErrChanged) {
		t.Fatalf("write over a stale version: %v", err)
	}
	if got, _, _ := s.Policies().Get(ctx, "c1"); got.Priority != 3 {
		t.Errorf("priority %d, want 3", got.Priority)
	}
}
