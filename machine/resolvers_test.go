package machine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/store"
)

func TestResolverDefinitions(t *testing.T) {
	r := newResolvers(t)
	ctx := t.Context()
	p := writeFile(t, t.TempDir(), "hosts", "192.168.0.1 gandalf\n")
	id, err := r.Set(ctx, "hosts1", map[string]string{"type": "hosts", "filename": p, "unknown": "x", "name": "hosts1"})
	if err != nil || id <= 0 {
		t.Fatalf("Set = %d, %v", id, err)
	}
	d, ok, err := r.Definition(ctx, "HOSTS1")
	if err != nil || !ok || d.Name != "hosts1" || d.Type != "hosts" || len(d.Data) != 1 || d.Data["filename"] != p {
		t.Fatalf("Definition = %+v %v %v", d, ok, err)
	}
	// An update keeps the id; the type cannot change.
	if id2, err := r.Set(ctx, "hosts1", map[string]string{"type": "hosts", "filename": p}); err != nil || id2 != id {
		t.Errorf("update = %d, %v; want id %d", id2, err, id)
	}
	_, err = r.Set(ctx, "hosts1", map[string]string{"type": "ldap", "LDAPURI": "ldap://127.0.0.1", "LDAPBASE": "dc=x", "HOSTNAMEATTRIBUTE": "cn"})
	if n, _, msg, _, _ := apierr.Wire(err); n != 905 || msg != "ERR905: machine resolver with similar name and other type already exists: hosts1" {
		t.Errorf("type change = %d %q", n, msg)
	}
	for _, c := range []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"filename": p}, "ERR905: Missing parameter: type"},
		{map[string]string{"type": "nis"}, "ERR905: machine resolver type : nis not in [hosts ldap]"},
	} {
		_, err := r.Set(ctx, "x", c.params)
		if _, _, msg, _, _ := apierr.Wire(err); msg != c.want {
			t.Errorf("Set(%v) = %q; want %q", c.params, msg, c.want)
		}
	}
	if _, err := r.Set(ctx, "bad name!", map[string]string{"type": "hosts", "filename": p}); err == nil {
		t.Error("a bad name was accepted")
	}
	p2 := writeFile(t, t.TempDir(), "hosts", "10.0.0.1 frodo\n")
	if _, err := r.Set(ctx, "a-hosts", map[string]string{"type": "hosts", "filename": p2}); err != nil {
		t.Fatal(err)
	}
	list, err := r.List(ctx, "")
	if err != nil || len(list) != 2 || list[0].Name != "a-hosts" || list[1].Name != "hosts1" {
		t.Errorf("List = %+v, %v", list, err)
	}
	if list, _ := r.List(ctx, "ldap"); len(list) != 0 {
		t.Errorf("List(ldap) = %+v", list)
	}
	// Delete: the id, then not found.
	if got, err := r.Delete(ctx, "hosts1"); err != nil || got != id {
		t.Errorf("Delete = %d, %v", got, err)
	}
	if _, err := r.Delete(ctx, "hosts1"); !errors.Is(err, machine.ErrResolverNotFound) {
		t.Errorf("second Delete = %v", err)
	} else if n, status, msg, _, _ := apierr.Wire(err); n != 601 || status != 404 || msg != "ERR601: The requested MachineResolver could not be found." {
		t.Errorf("not found = %d %d %q", n, status, msg)
	}
	if _, ok, _ := r.Definition(ctx, "hosts1"); ok {
		t.Error("deleted resolver still defined")
	}
	// Its machines are gone from the lookups.
	if _, err := r.ByHostname(ctx, "gandalf"); !errors.Is(err, machine.ErrNoMachine) {
		t.Errorf("ByHostname after delete = %v", err)
	}
}

func TestSetRunsAlsoInTransaction(t *testing.T) {
	r := newResolvers(t)
	p := writeFile(t, t.TempDir(), "hosts", "192.168.0.1 gandalf\n")
	boom := errors.New("boom")
	_, err := r.Set(t.Context(), "h", map[string]string{"type": "hosts", "filename": p}, func(store.Tx) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Set = %v", err)
	}
	if _, ok, _ := r.Definition(t.Context(), "h"); ok {
		t.Error("the definition was stored although its hook failed")
	}
	if _, err := r.Set(t.Context(), "h", map[string]string{"type": "hosts", "filename": p}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Delete(t.Context(), "h", func(store.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Delete = %v", err)
	}
	if _, ok, _ := r.Definition(t.Context(), "h"); !ok {
		t.Error("the definition was deleted although its hook failed")
	}
}

func TestTestHosts(t *testing.T) {
	r := newResolvers(t)
	ok, desc, err := r.Test(t.Context(), map[string]string{"type": "hosts", "filename": "/etc/hosts"}, "")
	if err != nil || ok || desc != "Not Implemented" {
		t.Errorf("Test(hosts) = %v %q %v", ok, desc, err)
	}
	if _, _, err := r.Test(t.Context(), map[string]string{"filename": "/etc/hosts"}, ""); err == nil || !strings.Contains(err.Error(), "type") {
		t.Errorf("Test without type = %v", err)
	}
}
