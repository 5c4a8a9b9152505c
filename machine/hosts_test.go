package machine_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver"
	ldapresolver "github.com/authsrv/authsrv/resolver/ldap"
	"github.com/authsrv/authsrv/store/storetest"
)

// newResolvers returns machine resolvers on a fresh store, with files
// confined to roots when given.
func newResolvers(t *testing.T, roots ...string) *machine.Resolvers {
	t.Helper()
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	r := machine.NewResolvers(machine.ResolversConfig{
		Store: storetest.Open(t), Sealer: sealer,
		Files:     fileroot.Confinement{Roots: roots},
		Dial:      netguard.MustParse("127.0.0.0/8", "::1/128"),
		UserTypes: resolver.Registry{ldapresolver.TypeName: ldapresolver.TypeConfined(fileroot.Confinement{Roots: roots})},
	})
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// writeFile writes text to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const hostsText = `# a comment line
127.0.0.1	localhost
192.168.0.1 gandalf g.example.com   # the wizard
192.168.0.2 frodo
   # indented comment 10.0.0.1 commented
10.0.0.9
::1 ip6-localhost ip6-loopback
2001:db8::17 elrond
#10.1.1.1 hidden
192.168.0.3 Samwise sam
`

func TestParseHostsFile(t *testing.T) {
	r := newResolvers(t)
	p := writeFile(t, t.TempDir(), "hosts", hostsText)
	if _, err := r.Set(t.Context(), "hosts1", map[string]string{"type": "hosts", "filename": p}); err != nil {
		t.Fatal(err)
	}
	ms, err := r.Machines(t.Context(), machine.MachineFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []machine.Machine{
		{ID: "127.0.0.1", Hostname: []string{"localhost"}, IP: "127.0.0.1", Resolver: "hosts1"},
		{ID: "192.168.0.1", Hostname: []string{"gandalf", "g.example.com"}, IP: "192.168.0.1", Resolver: "hosts1"},
		{ID: "192.168.0.2", Hostname: []string{"frodo"}, IP: "192.168.0.2", Resolver: "hosts1"},
		{ID: "::1", Hostname: []string{"ip6-localhost", "ip6-loopback"}, IP: "::1", Resolver: "hosts1"},
		{ID: "2001:db8::17", Hostname: []string{"elrond"}, IP: "2001:db8::17", Resolver: "hosts1"},
		{ID: "192.168.0.3", Hostname: []string{"Samwise", "sam"}, IP: "192.168.0.3", Resolver: "hosts1"},
	}
	if len(ms) != len(want) {
		t.Fatalf("got %d machines %+v; want %d", len(ms), ms, len(want))
	}
	for i := range want {
		if ms[i].ID != want[i].ID || ms[i].IP != want[i].IP || ms[i].Resolver != want[i].Resolver || !slices.Equal(ms[i].Hostname, want[i].Hostname) {
			t.Errorf("machine %d = %+v; want %+v", i, ms[i], want[i])
		}
	}
}

func TestHostsFileErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, filename, want string
	}{
		{"missing", filepath.Join(dir, "nope"), "does not exist"},
		{"not absolute", "hosts", "absolute path"},
		{"broken line", writeFile(t, dir, "broken", "192.168.0.1 ok\nnot-an-ip host\n"), `line 2: "not-an-ip" is not an IP address`},
		{"directory", dir, "not a regular file"},
		{"no filename", "", "Missing parameter: filename"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newResolvers(t)
			_, err := r.Set(t.Context(), "h", map[string]string{"type": "hosts", "filename": c.filename})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Set = %v; want an error with %q", err, c.want)
			}
			if n, _, _, _, _ := apierr.Wire(err); n != 905 {
				t.Errorf("error number %d; want 905", n)
			}
			if defs, _ := r.List(t.Context(), ""); len(defs) != 0 {
				t.Errorf("a refused definition was stored: %+v", defs)
			}
		})
	}
}

func TestHostsFileOutsideRoots(t *testing.T) {
	root, other := t.TempDir(), t.TempDir()
	r := newResolvers(t, root)
	p := writeFile(t, other, "hosts", "192.168.0.1 gandalf\n")
	_, err := r.Set(t.Context(), "h", map[string]string{"type": "hosts", "filename": p})
	if err == nil || !strings.Contains(err.Error(), "outside the allowed directories") {
		t.Fatalf("Set outside the roots = %v", err)
	}
	in := writeFile(t, root, "hosts", "192.168.0.1 gandalf\n")
	if _, err := r.Set(t.Context(), "h", map[string]string{"type": "hosts", "filename": in}); err != nil {
		t.Fatalf("Set inside the roots: %v", err)
	}
	// The file becomes a link to one outside the roots: refused at lookup.
	if err := os.Remove(in); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p, in); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ByHostname(t.Context(), "gandalf"); err == nil || !strings.Contains(err.Error(), "outside the allowed directories") {
		t.Errorf("lookup through a link outside the roots = %v", err)
	}
}

func TestHostsReloadOnChange(t *testing.T) {
	r := newResolvers(t)
	dir := t.TempDir()
	p := writeFile(t, dir, "hosts", "192.168.0.1 gandalf\n")
	if _, err := r.Set(t.Context(), "h", map[string]string{"type": "hosts", "filename": p}); err != nil {
		t.Fatal(err)
	}
	m, err := r.ByHostname(t.Context(), "gandalf")
	if err != nil || m.ID != "192.168.0.1" {
		t.Fatalf("ByHostname = %+v, %v", m, err)
	}
	// Same size, new content and a new modification time.
	if err := os.WriteFile(p, []byte("192.168.0.7 gandalf\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, future, future); err != nil {
		t.Fatal(err)
	}
	if m, err = r.ByHostname(t.Context(), "gandalf"); err != nil || m.ID != "192.168.0.7" {
		t.Errorf("after a change: %+v, %v; want 192.168.0.7", m, err)
	}
	// A file replaced by another (rename over it) with a new host.
	tmp := writeFile(t, dir, "hosts.new", "192.168.0.7 gandalf\n192.168.0.8 frodo\n")
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	if m, err = r.ByHostname(t.Context(), "frodo"); err != nil || m.ID != "192.168.0.8" {
		t.Errorf("after a rename: %+v, %v", m, err)
	}
	// Removed: a clear error, not the cached machines.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	_, err = r.ByHostname(t.Context(), "frodo")
	if err == nil || !strings.Contains(err.Error(), "does not exist") || errors.Is(err, machine.ErrNoMachine) {
		t.Errorf("after removal: %v", err)
	}
	if _, err := r.Machines(t.Context(), machine.MachineFilter{}); err == nil {
		t.Error("Machines answered without the file")
	}
	// A broken line added later is an error at lookup.
	writeFile(t, dir, "hosts", "192.168.0.1 gandalf\n300.1.1.1 bad\n")
	if _, err := r.ByHostname(t.Context(), "gandalf"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("broken file at lookup: %v", err)
	}
}

func TestByHostname(t *testing.T) {
	r := newResolvers(t)
	dir := t.TempDir()
	p1 := writeFile(t, dir, "hosts1", "192.168.0.1 gandalf g.example.com\n192.168.0.2 frodo\n192.168.0.3 twin\n")
	p2 := writeFile(t, dir, "hosts2", "10.0.0.1 Frodo-2\n10.0.0.3 TWIN\n")
	for name, p := range map[string]string{"h1": p1, "h2": p2} {
		if _, err := r.Set(t.Context(), name, map[string]string{"type": "hosts", "filename": p}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("unique by alias", func(t *testing.T) {
		m, err := r.ByHostname(t.Context(), "g.example.com")
		if err != nil || m.ID != "192.168.0.1" || m.Resolver != "h1" || !slices.Equal(m.Hostname, []string{"gandalf", "g.example.com"}) {
			t.Errorf("ByHostname = %+v, %v", m, err)
		}
	})
	t.Run("exact, not a substring", func(t *testing.T) {
		m, err := r.ByHostname(t.Context(), "frodo")
		if err != nil || m.ID != "192.168.0.2" {
			t.Errorf("ByHostname(frodo) = %+v, %v", m, err)
		}
	})
	t.Run("ambiguous across resolvers", func(t *testing.T) {
		_, err := r.ByHostname(t.Context(), "twin")
		if !errors.Is(err, machine.ErrAmbiguousMachine) || !strings.Contains(err.Error(), "twin") {
			t.Errorf("ByHostname(twin) = %v; want ErrAmbiguousMachine", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, err := r.ByHostname(t.Context(), "sauron")
		if !errors.Is(err, machine.ErrNoMachine) || !strings.Contains(err.Error(), "sauron") {
			t.Errorf("ByHostname(sauron) = %v; want ErrNoMachine", err)
		}
	})
	t.Run("get", func(t *testing.T) {
		m, err := r.Get(t.Context(), "h2", "10.0.0.1")
		if err != nil || m.Hostname[0] != "Frodo-2" {
			t.Errorf("Get = %+v, %v", m, err)
		}
		for _, c := range [][2]string{{"h2", "10.0.0.9"}, {"nope", "10.0.0.1"}, {"", ""}} {
			if _, err := r.Get(t.Context(), c[0], c[1]); !errors.Is(err, machine.ErrNoMachine) {
				t.Errorf("Get(%q, %q) = %v; want ErrNoMachine", c[0], c[1], err)
			}
		}
	})
}

func TestMachineFilters(t *testing.T) {
	r := newResolvers(t)
	dir := t.TempDir()
	p1 := writeFile(t, dir, "a", "192.168.0.1 gandalf g.example.com\n192.168.0.2 frodo\n2001:db8::1 elrond\n")
	p2 := writeFile(t, dir, "b", "10.0.0.1 saruman\n")
	for name, p := range map[string]string{"hosts1": p1, "other": p2} {
		if _, err := r.Set(t.Context(), name, map[string]string{"type": "hosts", "filename": p}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		f    machine.MachineFilter
		want []string // ids
	}{
		{"all", machine.MachineFilter{}, []string{"192.168.0.1", "192.168.0.2", "2001:db8::1", "10.0.0.1"}},
		{"hostname substring", machine.MachineFilter{Hostname: "example"}, []string{"192.168.0.1"}},
		{"hostname ignores case", machine.MachineFilter{Hostname: "FRO"}, []string{"192.168.0.2"}},
		{"ip exact", machine.MachineFilter{IP: "192.168.0.2"}, []string{"192.168.0.2"}},
		{"ip is not a substring", machine.MachineFilter{IP: "192.168.0"}, []string{"192.168.0.1", "192.168.0.2", "2001:db8::1", "10.0.0.1"}},
		{"ipv6 normalized", machine.MachineFilter{IP: "2001:0db8:0::1"}, []string{"2001:db8::1"}},
		{"invalid ip ignored", machine.MachineFilter{IP: "not-an-ip", Hostname: "saru"}, []string{"10.0.0.1"}},
		{"id substring", machine.MachineFilter{ID: "168.0"}, []string{"192.168.0.1", "192.168.0.2"}},
		{"resolver substring", machine.MachineFilter{Resolver: "oth"}, []string{"10.0.0.1"}},
		{"any in hostname", machine.MachineFilter{Any: "elr"}, []string{"2001:db8::1"}},
		{"any in ip", machine.MachineFilter{Any: "10.0"}, []string{"10.0.0.1"}},
		{"combined", machine.MachineFilter{Hostname: "r", Resolver: "hosts"}, []string{"192.168.0.2", "2001:db8::1"}},
		{"nothing", machine.MachineFilter{Hostname: "sauron"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms, err := r.Machines(t.Context(), c.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range ms {
				ids = append(ids, m.ID)
			}
			if !slices.Equal(ids, c.want) {
				t.Errorf("Machines(%+v) = %v; want %v", c.f, ids, c.want)
			}
		})
	}
}
