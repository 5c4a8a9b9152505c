package token

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

func statsService(t *testing.T) *Service {
	t.Helper()
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	h, err := secret.NewHasher(secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}})
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Store: storetest.Open(t), Sealer: sealer, Hasher: h})
}

// TestTokenStats: the SimpleStats numbers follow enrollment, kinds,
// assignment, deactivation and deletion, and the record heads Stats
// reads agree with the decoded records.
func TestTokenStats(t *testing.T) {
	s := statsService(t)
	ctx := t.Context()
	alice := user.User{Login: "alice", Realm: "Realm1", Resolver: "res", UID: "1"}
	alice2 := user.User{Login: "alice", Realm: "realm2", Resolver: "res", UID: "1"} // the same user in another realm
	bob := user.User{Login: "bob", Realm: "realm1", Resolver: "res", UID: "2"}
	carol := user.User{Login: "carol", Realm: "realm1", Resolver: "other", UID: "2"} // same uid, another resolver
	key := Params{"otpkey": "3132333435363738393031323334353637383930"}
	for _, r := range []InitRequest{
		{Serial: "S1", Params: key},
		{Serial: "UB1", Params: key}, // "UB" serials are hardware (YubiKeys)
		{Serial: "H2", Params: key, Kind: KindHardware, Owner: &alice},
		{Serial: "S3", Params: key, Owner: &alice},
		{Serial: "S4", Params: key, Owner: &bob},
		{Serial: "V1", Params: key},
		{Serial: "S5", Params: key, Owner: &carol, Realms: []string{"realm1", "realm3"}},
		{Serial: "S6", Params: key, Owner: &alice2},
	} {
		if _, _, err := s.Init(ctx, r); err != nil {
			t.Fatalf("init %s: %v", r.Serial, err)
		}
	}
	if err := s.SetInfo(ctx, "V1", InfoTokenKind, "virtual"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetActive(ctx, "S4", false); err != nil {
		t.Fatal(err)
	}
	check := func(step string, want TokenStats) {
		t.Helper()
		got, err := s.Stats(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got != want {
			t.Errorf("%s: %+v, want %+v", step, got, want)
		}
	}
	check("enrolled", TokenStats{Total: 8, Hardware: 2, Software: 5, UnassignedHardware: 1, Assigned: 5, UsersWithToken: 2})

	if err := s.Assign(ctx, "UB1", bob, nil, false, false); err != nil {
		t.Fatal(err)
	}
	check("UB1 assigned to bob", TokenStats{Total: 8, Hardware: 2, Software: 5, UnassignedHardware: 0, Assigned: 6, UsersWithToken: 3})
	if err := s.Unassign(ctx, "H2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "S1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetActive(ctx, "S5", false); err != nil {
		t.Fatal(err)
	}
	check("H2 unassigned, S1 deleted, S5 disabled", TokenStats{Total: 7, Hardware: 2, Software: 4, UnassignedHardware: 1, Assigned: 5, UsersWithToken: 2})

	// The heads read agree with the decoded records, for every record.
	n := 0
	if err := s.cfg.Store.View(ctx, func(tx store.Tx) error {
		return tx.Bucket(bucketTokens).ForEach(nil, func(k, v []byte) error {
			n++
			tok, err := decodeRecord(string(k), v)
			if err != nil {
				return err
			}
			h, ok := peekHead(k, v)
			if !ok || h.active != tok.Active || h.assigned != tok.Assigned() || string(h.kind) != tok.Info[InfoTokenKind] {
				t.Errorf("%s: head %+v (%v), record active %v assigned %v kind %q", k, h, ok, tok.Active, tok.Assigned(), tok.Info[InfoTokenKind])
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if n != 7 {
		t.Errorf("%d records checked", n)
	}
}

// TestPeekHeadForms: the JSON records of older releases are read, and a
// damaged record is not counted.
func TestPeekHeadForms(t *testing.T) {
	tok := &Token{Serial: "J1", Type: "hotp", Active: true, Info: map[string]string{InfoTokenKind: KindHardware},
		Owner: &user.User{Login: "a", Realm: "r", Resolver: "res", UID: "7"}}
	raw, err := json.Marshal(record{Versioned: store.Versioned{Schema: schema}, Token: *tok})
	if err != nil {
		t.Fatal(err)
	}
	h, ok := peekHead([]byte("J1"), raw)
	if !ok || !h.active || !h.assigned || string(h.kind) != KindHardware {
		t.Errorf("JSON record: %+v %v", h, ok)
	}
	bin := encodeRecord(tok)
	if h, ok := peekHead([]byte("J1"), bin); !ok || !h.assigned || string(h.kind) != KindHardware {
		t.Errorf("binary record: %+v %v", h, ok)
	}
	for cut := 1; cut < len(bin)-1; cut += 3 {
		// A truncated record never panics; cut inside the head it is not counted.
		peekHead([]byte("J1"), bin[:cut])
	}
	if _, ok := peekHead([]byte("J1"), bin[:10]); ok {
		t.Error("a truncated head was read")
	}
	if _, ok := peekHead([]byte("J1"), []byte("{broken")); ok {
		t.Error("a broken JSON record was read")
	}
}

// BenchmarkTokenStats: one Stats call over 20000 imported tokens.
func BenchmarkTokenStats(b *testing.B) {
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		b.Fatal(err)
	}
	h, err := secret.NewHasher(secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}})
	if err != nil {
		b.Fatal(err)
	}
	s := New(Config{Store: storetest.Open(b), Sealer: sealer, Hasher: h})
	recs := make([]ImportRecord, 20000)
	for i := range recs {
		recs[i] = ImportRecord{Serial: fmt.Sprintf("IMP%06d", i), Key: bytes.Repeat([]byte{byte(i)}, 20)}
	}
	if n, failed := s.Import(b.Context(), recs, nil); n != len(recs) {
		b.Fatalf("imported %d: %v", n, failed[:min(len(failed), 3)])
	}
	b.ReportAllocs()
	for b.Loop() {
		st, err := s.Stats(b.Context())
		if err != nil || st.Total != len(recs) || st.Hardware != len(recs) {
			b.Fatalf("%+v %v", st, err)
		}
	}
}
