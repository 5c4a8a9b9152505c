package authsrv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// recStore records the buckets every committed write transaction wrote.
type recStore struct {
	store.Store
	mu      sync.Mutex
	commits [][]string
}

func (r *recStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	var wrote map[string]bool
	err := r.Store.Update(ctx, func(tx store.Tx) error {
		wrote = map[string]bool{}
		return fn(recTx{tx, wrote})
	})
	if err == nil {
		r.mu.Lock()
		r.commits = append(r.commits, slices.Sorted(func(yield func(string) bool) {
			for b := range wrote {
				if !yield(b) {
					return
				}
			}
		}))
		r.mu.Unlock()
	}
	return err
}

// since returns the commits after the first n.
func (r *recStore) since(n int) [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.commits[n:])
}

func (r *recStore) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.commits)
}

type recTx struct {
	store.Tx
	wrote map[string]bool
}

func (t recTx) Bucket(name string) store.Bucket { return recBucket{t.Tx.Bucket(name), name, t.wrote} }

type recBucket struct {
	store.Bucket
	name  string
	wrote map[string]bool
}

func (b recBucket) Put(k, v []byte) error { b.wrote[b.name] = true; return b.Bucket.Put(k, v) }
func (b recBucket) Delete(k []byte) error { b.wrote[b.name] = true; return b.Bucket.Delete(k) }
func (b recBucket) NextSequence() (uint64, error) {
	b.wrote[b.name] = true
	return b.Bucket.NextSequence()
}

const rfcKeyHex = "3132333435363738393031323334353637383930"

// tokenServer is a server on a recording store with the passwd users
// alice and bob in realm1.
func tokenServer(t *testing.T) (*authsrv.Server, *recStore) {
	t.Helper()
	rs := &recStore{Store: storetest.Open(t)}
	key := bytes.Repeat([]byte{7}, 32)
	s, err := authsrv.New(authsrv.WithStore(rs), authsrv.WithEncKey(key), authsrv.WithJWTKey(key), cheapKDF)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte("alice:x:1000:1000:Alice:/home/alice:/bin/sh\nbob:x:1001:1001:Bob:/home/bob:/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolvers().Save(ctx, "files", map[string]string{"type": "passwdresolver", "fileName": path}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Realms().Set(ctx, "realm1", []realm.Entry{{Name: "files"}}); err != nil {
		t.Fatal(err)
	}
	return s, rs
}

var admin = caller.Caller{Role: caller.Admin, Name: "admin", RequestID: "test"}

func userCaller(name string) caller.Caller {
	return caller.Caller{Role: caller.User, Name: name, Realm: "realm1"}
}

// auditCount is the number of audit entries.
func auditCount(t *testing.T, s *authsrv.Server) int {
	t.Helper()
	res, err := s.Audit().Search(t.Context(), audit.Query{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return res.Count
}

// rows are the audit rows matching filters.
func rows(t *testing.T, s *authsrv.Server, filters map[string]string) []audit.Row {
	t.Helper()
	res, err := s.Audit().Search(t.Context(), audit.Query{Filters: filters, PageSize: audit.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	return res.Rows
}

// oneAuditedCommit checks that the commits since n hold exactly one audit
// entry, and that every commit that changed a token wrote it.
func oneAuditedCommit(t *testing.T, rs *recStore, n int, name string) {
	t.Helper()
	audits := 0
	for _, buckets := range rs.since(n) {
		hasAudit := slices.Contains(buckets, "audit")
		if hasAudit {
			audits++
		}
		for _, b := range buckets {
			if (b == "tokens" || b == "challenges") && !hasAudit {
				t.Errorf("%s: a commit wrote %v without the audit entry", name, buckets)
			}
		}
	}
	if audits != 1 {
		t.Errorf("%s: %d commits wrote audit entries, want 1 (commits %v)", name, audits, rs.since(n))
	}
}

func TestTokenOpsAuditInTheChangesTransaction(t *testing.T) {
	s, rs := tokenServer(t)
	ctx := t.Context()
	o := s.Ops()
	one := func(serial string) authsrv.TokenSelect { return authsrv.TokenSelect{Serials: []string{serial}} }
	alice := authsrv.Target{User: "alice", Realm: "realm1"}
	pin := "4711"
	hotp := func(c uint64) string { return otp.HOTP([]byte("12345678901234567890"), c, 6, otp.SHA1) }
	csv := &bytes.Buffer{}
	for i := range 5 {
		fmt.Fprintf(csv, "IMP%02d,%s,hotp,6\n", i, rfcKeyHex)
	}
	steps := []struct {
		name string
		run  func() error
		// changes: the step writes a token (else only its entry).
		check func(t *testing.T)
	}{
		{"init", func() error {
			_, err := o.InitToken(ctx, admin, authsrv.TokenInit{Serial: "T1", Params: token.Params{"otpkey": rfcKeyHex, "pin": "1234"}, User: alice})
			return err
		}, func(t *testing.T) {
			if tk, err := s.Tokens().Get(ctx, "T1"); err != nil || tk.Owner == nil || tk.Owner.Login != "alice" {
				t.Errorf("T1 = %+v, %v", tk, err)
			}
		}},
		{"init generated serial", func() error {
			_, err := o.InitToken(ctx, admin, authsrv.TokenInit{Type: "spass", Realm: "realm1"})
			return err
		}, nil},
		{"init unassigned", func() error {
			_, err := o.InitToken(ctx, admin, authsrv.TokenInit{Serial: "T2", Params: token.Params{"genkey": "1"}})
			return err
		}, nil},
		{"import", func() error {
			res, err := o.ImportTokens(ctx, admin, authsrv.TokenImport{Format: "oathcsv", File: csv.Bytes(), Realms: []string{"realm1"}})
			if err == nil && res.Imported != 5 {
				err = fmt.Errorf("imported %d", res.Imported)
			}
			return err
		}, nil},
		{"assign", func() error {
			return o.AssignToken(ctx, admin, authsrv.TokenAssign{Serial: "T2", User: authsrv.Target{User: "bob", Realm: "realm1"}, PIN: &pin})
		}, nil},
		{"disable", func() error { _, err := o.DisableTokens(ctx, admin, one("T1")); return err }, func(t *testing.T) {
			if tk, _ := s.Tokens().Get(ctx, "T1"); tk.Active {
				t.Error("T1 still active")
			}
		}},
		{"enable several", func() error {
			b, err := o.EnableTokens(ctx, admin, authsrv.TokenSelect{Serials: []string{"T1", "T2"}, List: true})
			if err == nil && (b.Success != 2 || b.Count != 1) {
				err = fmt.Errorf("batch %+v", b)
			}
			return err
		}, nil},
		{"reset", func() error { _, err := o.ResetTokens(ctx, admin, one("T1")); return err }, nil},
		{"resync", func() error {
			ok, err := o.ResyncToken(ctx, admin, one("T1"), hotp(20), hotp(21))
			if err == nil && !ok {
				err = errors.New("resync refused")
			}
			return err
		}, nil},
		{"setpin", func() error {
			_, err := o.SetTokenPIN(ctx, admin, one("T1"), authsrv.TokenPINs{OTPPIN: &pin})
			return err
		}, nil},
		{"setrandompin", func() error { _, _, err := o.SetRandomTokenPIN(ctx, admin, one("T1")); return err }, nil},
		{"description", func() error { return o.SetTokenDescription(ctx, admin, one("T1"), "laptop") }, nil},
		{"set", func() error {
			mf := 3
			_, err := o.SetTokenFields(ctx, admin, one("T1"), token.Fields{MaxFail: &mf})
			return err
		}, nil},
		{"tokenrealm", func() error { return o.SetTokenRealms(ctx, admin, one("IMP00"), []string{"realm1"}) }, nil},
		{"tokeninfo set", func() error { return o.SetTokenInfo(ctx, admin, one("T1"), "k", "v") }, nil},
		{"tokeninfo delete", func() error { return o.DeleteTokenInfo(ctx, admin, one("T1"), "k") }, nil},
		{"copypin", func() error { return o.CopyTokenPIN(ctx, admin, authsrv.TokenCopy{From: "T1", To: "IMP01"}) }, nil},
		{"copyuser", func() error { return o.CopyTokenUser(ctx, admin, authsrv.TokenCopy{From: "T1", To: "IMP01"}) }, nil},
		{"lost", func() error { _, err := o.LostToken(ctx, admin, one("T2")); return err }, func(t *testing.T) {
			if _, err := s.Tokens().Get(ctx, "lostT2"); err != nil {
				t.Error(err)
			}
			if tk, _ := s.Tokens().Get(ctx, "T2"); tk.Active {
				t.Error("lost token still active")
			}
		}},
		{"challenge cancel", func() error { _, err := o.CancelChallenges(ctx, admin, "12345678901234567890"); return err }, nil},
		{"unassign", func() error { _, err := o.UnassignTokens(ctx, admin, one("IMP01")); return err }, nil},
		{"revoke", func() error { _, err := o.RevokeTokens(ctx, admin, one("IMP02")); return err }, nil},
		{"delete", func() error { _, err := o.DeleteTokens(ctx, admin, one("IMP02")); return err }, func(t *testing.T) {
			if ok, _ := s.Tokens().Exists(ctx, "IMP02"); ok {
				t.Error("IMP02 still exists")
			}
		}},
		{"refused init", func() error {
			_, err := o.InitToken(ctx, admin, authsrv.TokenInit{Type: "nosuchtype"})
			if err == nil {
				return errors.New("unknown type accepted")
			}
			return nil
		}, nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before, n := auditCount(t, s), rs.count()
			if err := st.run(); err != nil {
				t.Fatal(err)
			}
			if got := auditCount(t, s); got != before+1 {
				t.Errorf("%d audit entries written, want 1", got-before)
			}
			oneAuditedCommit(t, rs, n, st.name)
			if st.check != nil {
				st.check(t)
			}
		})
	}
	rep, err := s.Audit().Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("audit verify: %+v", rep)
	}
	// The entries name their tokens and their administrator.
	found := false
	for _, e := range rows(t, s, map[string]string{"action": "POST /token/init"}) {
		if e["serial"] == "T1" && e["administrator"] == "admin" && e["user"] == "alice" && e["success"] == 1 {
			found = true
		}
	}
	if !found {
		t.Errorf("no init entry for T1")
	}
}

func TestTokenOpsUserOnlyTouchesOwnTokens(t *testing.T) {
	s, _ := tokenServer(t)
	ctx := t.Context()
	o := s.Ops()
	for _, u := range []string{"alice", "bob"} {
		if _, err := o.InitToken(ctx, userCaller(u), authsrv.TokenInit{Serial: "U-" + u, Params: token.Params{"genkey": "1"}}); err != nil {
			t.Fatalf("%s enrolls: %v", u, err)
		}
	}
	if tk, err := s.Tokens().Get(ctx, "U-bob"); err != nil || tk.Owner == nil || tk.Owner.Login != "bob" {
		t.Fatalf("a user's token belongs to the user: %+v %v", tk, err)
	}
	alice := userCaller("alice")
	one := authsrv.TokenSelect{Serials: []string{"U-bob"}}
	cases := []struct {
		name string
		run  func() error
		want string
	}{
		{"disable", func() error { _, err := o.DisableTokens(ctx, alice, one); return err }, "No token found for serials: U-bob"},
		{"delete", func() error { _, err := o.DeleteTokens(ctx, alice, one); return err }, "No token found for serials: U-bob"},
		{"setpin", func() error {
			p := "1"
			_, err := o.SetTokenPIN(ctx, alice, one, authsrv.TokenPINs{OTPPIN: &p})
			return err
		}, "No token found for serials: U-bob"},
		{"re-init", func() error {
			_, err := o.InitToken(ctx, alice, authsrv.TokenInit{Serial: "U-bob", Params: token.Params{"genkey": "1"}})
			return err
		}, "Token already assigned to another user."},
		{"assign", func() error {
			return o.AssignToken(ctx, alice, authsrv.TokenAssign{Serial: "U-bob"})
		}, "Token already assigned to another user."},
		{"set (administrators only)", func() error {
			d := "x"
			_, err := o.SetTokenFields(ctx, alice, one, token.Fields{Description: &d})
			return err
		}, "Authentication failure. You do not have the necessary role (['admin']) to access this resource!"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			e, ok := errors.AsType[*apierr.Error](err)
			if !ok || e.Error() != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	tk, err := s.Tokens().Get(ctx, "U-bob")
	if err != nil || !tk.Active || tk.Owner.Login != "bob" || tk.Description != "" {
		t.Errorf("bob's token changed: %+v %v", tk, err)
	}
	// A list request with a foreign serial acts on the caller's own only.
	b, err := o.DisableTokens(ctx, alice, authsrv.TokenSelect{Serials: []string{"U-bob", "U-alice"}, List: true})
	if err != nil || b.Success != 1 || b.Count != 1 {
		t.Errorf("list disable = %+v, %v", b, err)
	}
	if tk, _ := s.Tokens().Get(ctx, "U-bob"); !tk.Active {
		t.Error("bob's token disabled by alice")
	}
	if tk, _ := s.Tokens().Get(ctx, "U-alice"); tk.Active {
		t.Error("alice's own token not disabled")
	}
	// Without serial, a user acts on all of its own tokens.
	if b, err := o.EnableTokens(ctx, alice, authsrv.TokenSelect{}); err != nil || b.Count != 1 || !b.List {
		t.Errorf("enable own = %+v, %v", b, err)
	}
}

func TestTokenOpsUserRights(t *testing.T) {
	s, _ := tokenServer(t)
	ctx := t.Context()
	o := s.Ops()
	if _, err := s.Policies().Set(ctx, policy.Policy{Name: "users", Scope: policy.ScopeUser, Action: "enrollHOTP, disable",
		Realm: []string{"realm1"}, Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	alice := userCaller("alice")
	if _, err := o.InitToken(ctx, alice, authsrv.TokenInit{Serial: "A1", Params: token.Params{"genkey": "1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.InitToken(ctx, alice, authsrv.TokenInit{Type: "spass", Serial: "A2"}); err == nil ||
		err.Error() != "User actions are defined, but the action enrollSPASS is not allowed!" {
		t.Errorf("spass enrollment: %v", err)
	}
	if _, err := o.DisableTokens(ctx, alice, authsrv.TokenSelect{Serials: []string{"A1"}}); err != nil {
		t.Errorf("disable: %v", err)
	}
	if _, err := o.DeleteTokens(ctx, alice, authsrv.TokenSelect{Serials: []string{"A1"}}); err == nil ||
		err.Error() != "User actions are defined, but the action delete is not allowed!" {
		t.Errorf("delete: %v", err)
	}
	rs := rows(t, s, map[string]string{"action": "POST /token/delete"})
	if len(rs) != 1 || rs[0]["success"] != 0 || rs[0]["user"] != "alice" || rs[0]["serial"] != "A1" ||
		rs[0]["info"] != "ERR303: User actions are defined, but the action delete is not allowed!" {
		t.Errorf("refusal audit: %v", rs)
	}
}

func TestTokenOpsMaxTokenPerUser(t *testing.T) {
	s, _ := tokenServer(t)
	ctx := t.Context()
	o := s.Ops()
	if _, err := s.Policies().Set(ctx, policy.Policy{Name: "max2", Scope: policy.ScopeEnrollment, Action: "max_token_per_user=2",
		Realm: []string{"realm1"}, Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	alice := authsrv.Target{User: "alice", Realm: "realm1"}
	for i := range 2 {
		if _, err := o.InitToken(ctx, admin, authsrv.TokenInit{Params: token.Params{"genkey": "1"}, User: alice}); err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
	}
	_, err := o.InitToken(ctx, admin, authsrv.TokenInit{Params: token.Params{"genkey": "1"}, User: alice})
	if !errors.Is(err, token.ErrMaxPerUser) || err.Error() != "The number of tokens for this user is limited!" {
		t.Fatalf("third token: %v", err)
	}
	// The user itself is held to the same limit.
	if _, err := o.InitToken(ctx, userCaller("alice"), authsrv.TokenInit{Params: token.Params{"genkey": "1"}}); !errors.Is(err, token.ErrMaxPerUser) {
		t.Fatalf("user's third token: %v", err)
	}
	// Re-initialising an existing token is no new token.
	toks, _ := s.Tokens().ByOwner(ctx, mustUser(t, s, "alice"))
	if _, err := o.InitToken(ctx, admin, authsrv.TokenInit{Serial: toks[0].Serial, Params: token.Params{"genkey": "1"}, User: alice}); err != nil {
		t.Fatalf("re-init: %v", err)
	}
	// Parallel enrollments cannot pass the limit together.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, _ = o.InitToken(ctx, admin, authsrv.TokenInit{Params: token.Params{"genkey": "1"}, User: authsrv.Target{User: "bob", Realm: "realm1"}})
		})
	}
	wg.Wait()
	if toks, err := s.Tokens().ByOwner(ctx, mustUser(t, s, "bob")); err != nil || len(toks) != 2 {
		t.Errorf("bob has %d tokens (%v), want 2", len(toks), err)
	}
	ok, refused := 0, 0
	for _, e := range rows(t, s, map[string]string{"action": "POST /token/init", "user": "bob"}) {
		switch {
		case e["success"] == 1:
			ok++
		case strings.Contains(e["info"].(string), "limited"):
			refused++
		}
	}
	if ok != 2 || refused != 6 {
		t.Errorf("bob's init entries: %d successes, %d refusals; want 2 and 6", ok, refused)
	}
}

func mustUser(t *testing.T, s *authsrv.Server, login string) user.User {
	t.Helper()
	u, _, err := s.Realms().Resolve(t.Context(), login, "realm1")
	if err != nil {
		t.Fatal(err)
	}
	return u
}
