package realm_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

const localNode = "node-a"

type env struct {
	realms *realm.Service
	res    *resolver.Service
	attrs  *user.Attributes
	st     store.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st := storetest.Open(t)
	sealer, _ := secret.NewSealer(nil, bytes.Repeat([]byte{5}, 32))
	res := resolver.New(st, sealer, resolver.Registry{resolvertest.MemTypeName: resolvertest.MemType()}, zerolog.Nop(), time.Now)
	t.Cleanup(func() { _ = res.Close() })
	attrs := user.NewAttributes(st)
	r := realm.New(realm.Config{
		Store: st, Resolvers: res, Attrs: attrs, LocalNode: localNode,
		NodeExists: func(_ context.Context, id string) (bool, error) { return id == localNode || id == "node-b", nil },
		Superusers: []string{"admins"},
	})
	return &env{realms: r, res: res, attrs: attrs, st: st}
}

// mem saves a memresolver holding the given logins (password "pw-<login>").
func (e *env) mem(t *testing.T, name string, logins ...string) {
	t.Helper()
	var users []string
	for _, l := range logins {
		users = append(users, `{"username":"`+l+`","password":"pw-`+l+`","givenname":"`+name+`"}`)
	}
	if _, err := e.res.Save(t.Context(), name, map[string]string{"type": "memresolver", "Users": "[" + strings.Join(users, ",") + "]"}); err != nil {
		t.Fatal(err)
	}
}

func prio(n int) *int { return &n }

func TestRealmLifecycle(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	e.mem(t, "r1", "alice")
	e.mem(t, "r2", "bob")

	added, failed, err := e.realms.Set(ctx, "Realm One", []realm.Entry{{Name: "R1", Priority: prio(2)}, {Name: "r2"}, {Name: "ghost"}})
	if err != nil || strings.Join(added, ",") != "r1,r2" || strings.Join(failed, ",") != "ghost" {
		t.Fatalf("Set = %v %v %v", added, failed, err)
	}
	r, isDef, err := e.realms.Get(ctx, "REALM ONE")
	if err != nil || r.Name != "realm-one" || !isDef || r.ID <= 0 {
		t.Fatalf("Get = %+v %v %v (the first realm is the default)", r, isDef, err)
	}
	if _, _, err := e.realms.Set(ctx, "second", []realm.Entry{{Name: "r2"}}); err != nil {
		t.Fatal(err)
	}
	if def, _ := e.realms.Default(ctx); def != "realm-one" {
		t.Errorf("default %q", def)
	}
	if id, err := e.realms.SetDefault(ctx, "Second"); err != nil || id <= 0 {
		t.Errorf("SetDefault = %d %v", id, err)
	}
	if _, err := e.realms.SetDefault(ctx, "nowhere"); !errors.Is(err, realm.ErrNotFound) {
		t.Errorf("SetDefault unknown: %v", err)
	}
	if _, _, err := e.realms.Set(ctx, "bad/name", nil); !errors.Is(err, realm.ErrBadName) {
		t.Errorf("bad name: %v", err)
	}
	if _, _, err := e.realms.Set(ctx, "..", nil); !errors.Is(err, realm.ErrBadName) {
		t.Errorf("dots: %v", err)
	}

	// A resolver in a realm cannot be deleted.
	if _, err := e.res.Delete(ctx, "r2"); err == nil || !strings.Contains(err.Error(), "still contained in realm") {
		t.Errorf("delete used resolver: %v", err)
	}

	// Deleting the default realm with one left makes that one default.
	id, err := e.realms.Delete(ctx, "second", false)
	if err != nil || id <= 0 {
		t.Fatalf("Delete = %d %v", id, err)
	}
	if def, _ := e.realms.Default(ctx); def != "realm-one" {
		t.Errorf("default after delete %q", def)
	}
	if id, _ := e.realms.ClearDefault(ctx); id != r.ID {
		t.Errorf("ClearDefault = %d", id)
	}
	if id, _ := e.realms.ClearDefault(ctx); id != 0 {
		t.Errorf("second ClearDefault = %d", id)
	}
	if _, err := e.realms.Delete(ctx, "second", false); !errors.Is(err, realm.ErrNotFound) {
		t.Errorf("delete missing: %v", err)
	}
}

func TestLookupByPriorityAndNode(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	e.mem(t, "low", "alice", "carol")
	e.mem(t, "high", "alice", "bob")
	e.mem(t, "nodeonly", "dave")
	e.mem(t, "othernode", "erin")
	if _, _, err := e.realms.Set(ctx, "r", []realm.Entry{{Name: "low", Priority: prio(5)}, {Name: "high", Priority: prio(1)}}); err != nil {
		t.Fatal(err)
	}
	u, in, err := e.realms.Resolve(ctx, "alice", "r")
	if err != nil || u.Resolver != "high" || in.Name() != "high" || u.Realm != "r" || u.UID == "" {
		t.Fatalf("alice: %+v %v (the higher priority resolver must win)", u, err)
	}
	if u, _, err := e.realms.Resolve(ctx, "carol", ""); err != nil || u.Resolver != "low" {
		t.Errorf("carol via the default realm: %+v %v", u, err)
	}
	if _, _, err := e.realms.Resolve(ctx, "zed", "r"); !errors.Is(err, realm.ErrNoUser) || !apierr.Is(err, apierr.User) {
		t.Errorf("unknown user: %v", err)
	}
	if _, _, err := e.realms.Resolve(ctx, "alice", "nowhere"); !errors.Is(err, realm.ErrNotFound) {
		t.Errorf("unknown realm: %v", err)
	}

	// Node-bound entries apply only on their node; node-less ones stay
	// when the node list changes, and the other way round.
	if _, _, err := e.realms.SetNode(ctx, "r", localNode, []realm.Entry{{Name: "nodeonly"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.realms.SetNode(ctx, "r", "node-b", []realm.Entry{{Name: "othernode"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.realms.SetNode(ctx, "r", "node-x", nil); !errors.Is(err, realm.ErrUnknownNode) {
		t.Errorf("unknown node: %v", err)
	}
	if u, _, err := e.realms.Resolve(ctx, "dave", "r"); err != nil || u.Resolver != "nodeonly" {
		t.Errorf("dave on the local node: %+v %v", u, err)
	}
	if _, _, err := e.realms.Resolve(ctx, "erin", "r"); !errors.Is(err, realm.ErrNoUser) {
		t.Errorf("erin lives on another node: %v", err)
	}
	if _, _, err := e.realms.Set(ctx, "r", []realm.Entry{{Name: "low"}}); err != nil {
		t.Fatal(err)
	}
	r, _, _ := e.realms.Get(ctx, "r")
	var names []string
	for _, en := range r.Resolvers {
		names = append(names, en.Name+"@"+en.Node)
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "low@,nodeonly@node-a,othernode@node-b" {
		t.Errorf("entries after a node-less update: %v", names)
	}
}

func TestUnavailableResolver(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	if _, err := e.res.Save(ctx, "down", map[string]string{"type": "memresolver", "Down": "True"}); err != nil {
		t.Fatal(err)
	}
	e.mem(t, "up", "bob")
	if _, _, err := e.realms.Set(ctx, "r", []realm.Entry{{Name: "down", Priority: prio(1)}, {Name: "up", Priority: prio(2)}}); err != nil {
		t.Fatal(err)
	}
	// A later resolver that knows the user still answers.
	if u, _, err := e.realms.Resolve(ctx, "bob", "r"); err != nil || u.Resolver != "up" {
		t.Errorf("bob: %+v %v", u, err)
	}
	// Nobody knows zed and one resolver failed: the failure, not "no user".
	if _, _, err := e.realms.Resolve(ctx, "zed", "r"); !errors.Is(err, resolver.ErrUnavailable) {
		t.Errorf("zed: %v", err)
	}
	list, err := e.realms.Users(ctx, []string{"r"}, "", nil)
	if err != nil || len(list) != 1 || list[0].Info.String("username") != "bob" {
		t.Errorf("Users skips the failing resolver: %+v %v", list, err)
	}
}

func TestUsersListing(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	e.mem(t, "a", "alice", "amy")
	e.mem(t, "b", "alice", "bob")
	if _, _, err := e.realms.Set(ctx, "r1", []realm.Entry{{Name: "a", Priority: prio(1)}, {Name: "b", Priority: prio(2)}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.realms.Set(ctx, "r2", []realm.Entry{{Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	key := func(l []realm.Listed) string {
		var s []string
		for _, x := range l {
			s = append(s, x.Info.String("username")+"."+x.Resolver+"@"+x.Realm)
		}
		slices.Sort(s)
		return strings.Join(s, ",")
	}
	cases := []struct {
		realms   []string
		resolver string
		filter   map[string]string
		want     string
	}{
		{nil, "", nil, "alice.a@r1,alice.b@r2,amy.a@r1,bob.b@r1,bob.b@r2"},
		{[]string{"r1"}, "", nil, "alice.a@r1,amy.a@r1,bob.b@r1"},
		{[]string{"R2"}, "a", nil, "alice.b@r2,bob.b@r2"}, // with a realm the resolver is ignored
		{nil, "a", nil, "alice.a@r1,amy.a@r1"},
		{[]string{"r1"}, "", map[string]string{"username": "a*"}, "alice.a@r1,amy.a@r1"},
		{[]string{"r1"}, "", map[string]string{"unknownkey": "x"}, ""},
		{[]string{"nowhere"}, "", nil, ""},
	}
	for _, tc := range cases {
		list, err := e.realms.Users(ctx, tc.realms, tc.resolver, tc.filter)
		if err != nil || key(list) != tc.want {
			t.Errorf("Users(%v, %q, %v) = %s, %v; want %s", tc.realms, tc.resolver, tc.filter, key(list), err, tc.want)
		}
	}
}

func TestDeleteWithAttributesAndTokens(t *testing.T) {
	ctx := t.Context()
	e := newEnv(t)
	e.mem(t, "a", "alice")
	if _, _, err := e.realms.Set(ctx, "r1", []realm.Entry{{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	u, _, err := e.realms.Resolve(ctx, "alice", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.attrs.Set(ctx, u, "department", "sales", ""); err != nil {
		t.Fatal(err)
	}
	_, err = e.realms.Delete(ctx, "r1", false)
	if !apierr.Is(err, apierr.RealmAttributes) || err.Error() != "Realm 'r1' contains custom user attributes (department). Deleting the realm will also delete these custom user attributes." {
		t.Fatalf("delete with attributes: %v", err)
	}
	e.realms.SetTokenCheck(func(tx store.Tx, realmName string) (bool, error) { return realmName == "r1", nil })
	if _, err := e.realms.Delete(ctx, "r1", true); !errors.Is(err, realm.ErrTokens) {
		t.Fatalf("delete with tokens: %v", err)
	}
	e.realms.SetTokenCheck(nil)
	if _, err := e.realms.Delete(ctx, "r1", true); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.attrs.Get(ctx, u); len(got) != 0 {
		t.Errorf("attributes survived: %v", got)
	}
	if !e.realms.IsSuperuser("ADMINS") || e.realms.IsSuperuser("r1") {
		t.Error("superuser realms")
	}
}

// TestPinnedRevision: a context pinned to the configuration revision a
// request read (store.WithRevision) is answered from the realm cache of
// that revision without a store read; once a lookup has read a newer
// revision, the old cache is gone and a lookup pinned to any revision
// reads the current realm.
func TestPinnedRevision(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.mem(t, "r1", "alice")
	e.mem(t, "r2", "bob")
	if _, _, err := e.realms.Set(ctx, "corp", []realm.Entry{{Name: "r1"}}); err != nil {
		t.Fatal(err)
	}
	rev := func() uint64 {
		var n uint64
		if err := e.st.View(ctx, func(tx store.Tx) error { n = store.ConfigRevision(tx); return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	old := rev()
	pinned := store.WithRevision(ctx, old)
	if got, ok := store.RevisionFrom(pinned); !ok || got != old {
		t.Fatalf("RevisionFrom = %d, %v", got, ok)
	}
	u, _, err := e.realms.Resolve(pinned, "alice", "corp")
	if err != nil || u.Resolver != "r1" {
		t.Fatalf("Resolve = %+v, %v", u, err)
	}
	if _, _, err := e.realms.Resolve(pinned, "alice", "nosuch"); !errors.Is(err, realm.ErrNotFound) {
		t.Fatalf("unknown realm: %v", err)
	}

	if _, _, err := e.realms.Set(ctx, "corp", []realm.Entry{{Name: "r2"}}); err != nil {
		t.Fatal(err)
	}
	// Until the cache moves on, a request pinned to the old revision sees
	// the realm as its policies did.
	if u, _, err := e.realms.Resolve(pinned, "alice", "corp"); err != nil || u.Resolver != "r1" {
		t.Fatalf("pinned to the old revision: Resolve = %+v, %v", u, err)
	}
	for _, c := range []context.Context{store.WithRevision(ctx, rev()), ctx, pinned} {
		if u, _, err := e.realms.Resolve(c, "bob", "corp"); err != nil || u.Resolver != "r2" {
			t.Fatalf("after the change: Resolve = %+v, %v", u, err)
		}
		if _, _, err := e.realms.Resolve(c, "alice", "corp"); !errors.Is(err, realm.ErrNoUser) {
			t.Fatalf("after the change alice: %v", err)
		}
	}

	// Cached at the current revision: the pinned lookup reads nothing
	// (the closed store would fail it), the unpinned one reads the store.
	cur := store.WithRevision(ctx, rev())
	if _, _, err := e.realms.Get(cur, "corp"); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	r, _, err := e.realms.Get(cur, "corp")
	if err != nil || len(r.Resolvers) != 1 || r.Resolvers[0].Name != "r2" {
		t.Fatalf("pinned Get on a closed store = %+v, %v", r, err)
	}
	if _, _, err := e.realms.Get(ctx, "corp"); err == nil {
		t.Fatal("unpinned Get read no store")
	}
}
