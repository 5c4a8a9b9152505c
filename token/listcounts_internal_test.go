package token

import (
	"bytes"
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

// The counts of lists and of the enrollment limits follow enrollment,
// assignment, unassignment, realm changes and deletion.
func TestCountsFollowChanges(t *testing.T) {
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	h, err := secret.NewHasher(secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Store: storetest.Open(t), Sealer: sealer, Hasher: h})
	ctx := t.Context()
	alice := user.User{Login: "alice", Realm: "Realm1", Resolver: "res", UID: "1"}
	check := func(step string, f Filter, want int, inRealm map[string]int, ofAlice int) {
		t.Helper()
		p, err := s.List(ctx, f, "", false, 1, 2)
		if err != nil || p.Count != want {
			t.Fatalf("%s: count %d, %v; want %d", step, p.Count, err, want)
		}
		if err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
			for realm, w := range inRealm {
				if n, err := countInRealm(tx, realm); err != nil || n != w {
					t.Errorf("%s: %d tokens in realm %s, %v; want %d", step, n, realm, err, w)
				}
			}
			if n, err := countOfOwner(tx, &alice); err != nil || n != ofAlice {
				t.Errorf("%s: alice has %d tokens, %v; want %d", step, n, err, ofAlice)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, serial := range []string{"S1", "S2", "S3"} {
		if _, _, err := s.Init(ctx, InitRequest{Serial: serial, Params: Params{"otpkey": "3132333435363738393031323334353637383930"}, Realms: []string{"realm2"}}); err != nil {
			t.Fatal(err)
		}
	}
	yes, no := true, false
	check("enrolled", Filter{TokenRealm: "realm2"}, 3, map[string]int{"realm1": 0, "REALM2": 3}, 0)
	check("enrolled, assigned", Filter{Assigned: &yes}, 0, nil, 0)
	if err := s.Assign(ctx, "S1", alice, nil, false, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Assign(ctx, "S2", alice, nil, false, false); err != nil {
		t.Fatal(err)
	}
	check("assigned", Filter{UserRealm: "realm1"}, 2, map[string]int{"realm1": 2, "realm2": 3}, 2)
	check("assigned flag", Filter{Assigned: &yes}, 2, nil, 2)
	check("owner", Filter{UserRealm: "realm1", Resolver: "res", UserID: "1"}, 2, nil, 2)
	if err := s.Unassign(ctx, "S1"); err != nil {
		t.Fatal(err)
	}
	// An unassigned token keeps its realms.
	check("unassigned", Filter{Assigned: &no}, 2, map[string]int{"realm1": 2, "realm2": 3}, 1)
	if err := s.SetRealms(ctx, "S3", []string{"realm3"}); err != nil {
		t.Fatal(err)
	}
	check("realm change", Filter{TokenRealm: "realm3"}, 1, map[string]int{"realm2": 2, "realm3": 1}, 1)
	if _, err := s.SetActive(ctx, "S3", false); err != nil {
		t.Fatal(err)
	}
	check("disabled", Filter{Active: &no}, 1, nil, 1)
	if err := s.Delete(ctx, "S2"); err != nil {
		t.Fatal(err)
	}
	check("deleted", Filter{}, 2, map[string]int{"realm1": 1, "realm2": 1, "realm3": 1}, 0)
	check("deleted, type", Filter{Type: "hotp"}, 2, nil, 0)
}
