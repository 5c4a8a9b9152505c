package machine_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver"
	ldapresolver "github.com/authsrv/authsrv/resolver/ldap"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

const computersDN = "ou=computers,dc=example,dc=org"

// machineDirectory starts slapd with four machines under ou=computers
// (two of them named twin) and an entry of another class.
func machineDirectory(t *testing.T) *testsvc.SlapdServer {
	t.Helper()
	s := testsvc.Slapd(t)
	var b strings.Builder
	fmt.Fprintf(&b, "dn: %s\nobjectClass: organizationalUnit\nou: computers\n\n", computersDN)
	add := func(rdn, ip, serial string, names ...string) {
		fmt.Fprintf(&b, "dn: cn=%s,%s\nobjectClass: device\nobjectClass: ipHost\nipHostNumber: %s\nserialNumber: %s\n", rdn, computersDN, ip, serial)
		for _, n := range names {
			fmt.Fprintf(&b, "cn: %s\n", n)
		}
		b.WriteString("\n")
	}
	add("gandalf", "192.168.0.1", "SN-1", "gandalf", "g.example.com")
	add("frodo", "192.168.0.2", "SN-2", "frodo")
	add("twin-a", "10.0.0.1", "SN-3", "twin-a", "twin")
	add("twin-b", "10.0.0.2", "SN-4", "twin-b", "twin")
	fmt.Fprintf(&b, "dn: cn=notamachine,%s\nobjectClass: organizationalRole\ncn: notamachine\n\n", computersDN)
	s.AddLDIF(t, b.String())
	return s
}

func ldapParams(s *testsvc.SlapdServer, extra ...string) map[string]string {
	p := map[string]string{
		"type": "ldap", "LDAPURI": s.URL, "LDAPBASE": computersDN, "BINDDN": s.BindDN, "BINDPW": s.BindPW,
		"HOSTNAMEATTRIBUTE": "cn", "IPATTRIBUTE": "ipHostNumber", "SEARCHFILTER": "(objectClass=device)", "TIMEOUT": "5",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		p[extra[i]] = extra[i+1]
	}
	return p
}

func newResolversOn(t *testing.T, st store.Store) *machine.Resolvers {
	t.Helper()
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	r := machine.NewResolvers(machine.ResolversConfig{Store: st, Sealer: sealer, Dial: netguard.MustParse("127.0.0.0/8", "::1/128"),
		UserTypes: resolver.Registry{ldapresolver.TypeName: ldapresolver.Type()}})
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestLDAPMachineResolver(t *testing.T) {
	s := machineDirectory(t)
	st := storetest.Open(t)
	r := newResolversOn(t, st)
	ctx := t.Context()
	if _, err := r.Set(ctx, "ldap1", ldapParams(s)); err != nil {
		t.Fatal(err)
	}

	t.Run("password sealed and censored", func(t *testing.T) {
		d, ok, err := r.Definition(ctx, "ldap1")
		if err != nil || !ok || d.Data["BINDPW"] != machine.Censored || d.Data["HOSTNAMEATTRIBUTE"] != "cn" {
			t.Fatalf("Definition = %+v", d)
		}
		err = st.View(ctx, func(tx store.Tx) error {
			return tx.Bucket("machineresolvers").ForEach(nil, func(_, v []byte) error {
				if bytes.Contains(v, []byte(s.BindPW)) {
					t.Error("the bind password is stored in the clear")
				}
				return nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		// Censored keeps the stored password: lookups still bind.
		if _, err := r.Set(ctx, "ldap1", ldapParams(s, "BINDPW", machine.Censored)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ByHostname(ctx, "frodo"); err != nil {
			t.Errorf("after a censored update: %v", err)
		}
	})

	t.Run("list and filters", func(t *testing.T) {
		cases := []struct {
			f    machine.MachineFilter
			want []string
		}{
			{machine.MachineFilter{}, []string{"frodo", "gandalf", "twin-a", "twin-b"}},
			{machine.MachineFilter{Hostname: "AND"}, []string{"gandalf"}},
			{machine.MachineFilter{IP: "192.168.0.2"}, []string{"frodo"}},
			{machine.MachineFilter{IP: "bogus", Hostname: "twin-"}, []string{"twin-a", "twin-b"}},
			{machine.MachineFilter{Any: "10.0.0.2"}, []string{"twin-b"}},
			{machine.MachineFilter{ID: "cn=frodo"}, []string{"frodo"}},
			{machine.MachineFilter{Hostname: "sauron"}, nil},
			{machine.MachineFilter{Resolver: "nope"}, nil},
		}
		for _, c := range cases {
			ms, err := r.Machines(ctx, c.f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range ms {
				got = append(got, m.Hostname[0])
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("Machines(%+v) = %v; want %v", c.f, got, c.want)
			}
		}
	})

	t.Run("by hostname", func(t *testing.T) {
		m, err := r.ByHostname(ctx, "G.example.com")
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != "cn=gandalf,"+computersDN || m.IP != "192.168.0.1" || m.Resolver != "ldap1" ||
			!slices.Contains(m.Hostname, "gandalf") || !slices.Contains(m.Hostname, "g.example.com") {
			t.Errorf("ByHostname = %+v", m)
		}
		if _, err := r.ByHostname(ctx, "twin"); !errors.Is(err, machine.ErrAmbiguousMachine) {
			t.Errorf("twin = %v", err)
		}
		for _, h := range []string{"sauron", "fro", "*"} {
			if _, err := r.ByHostname(ctx, h); !errors.Is(err, machine.ErrNoMachine) {
				t.Errorf("ByHostname(%q) = %v; want ErrNoMachine", h, err)
			}
		}
		got, err := r.Get(ctx, "ldap1", "cn=frodo,"+computersDN)
		if err != nil || got.IP != "192.168.0.2" {
			t.Errorf("Get = %+v, %v", got, err)
		}
		if _, err := r.Get(ctx, "ldap1", "cn=nobody,"+computersDN); !errors.Is(err, machine.ErrNoMachine) {
			t.Errorf("Get(nobody) = %v", err)
		}
	})

	t.Run("id attribute", func(t *testing.T) {
		if _, err := r.Set(ctx, "ldap2", ldapParams(s, "IDATTRIBUTE", "serialNumber")); err != nil {
			t.Fatal(err)
		}
		ms, err := r.Machines(ctx, machine.MachineFilter{Resolver: "ldap2", ID: "sn-2"})
		if err != nil || len(ms) != 1 || ms[0].ID != "SN-2" || ms[0].Hostname[0] != "frodo" {
			t.Errorf("Machines by id = %+v, %v", ms, err)
		}
		m, err := r.Get(ctx, "ldap2", "SN-1")
		if err != nil || m.Hostname[0] != "gandalf" {
			t.Errorf("Get(SN-1) = %+v, %v", m, err)
		}
		if _, err := r.Delete(ctx, "ldap2"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("test", func(t *testing.T) {
		ok, desc, err := r.Test(ctx, ldapParams(s), "")
		if err != nil || !ok || desc != "Your LDAP config seems to be OK, 4 machine objects found." {
			t.Errorf("Test = %v %q %v", ok, desc, err)
		}
		// The stored password fills in a censored one.
		ok, _, err = r.Test(ctx, ldapParams(s, "BINDPW", machine.Censored), "ldap1")
		if err != nil || !ok {
			t.Errorf("Test with the stored password = %v %v", ok, err)
		}
		ok, desc, err = r.Test(ctx, ldapParams(s, "BINDPW", "wrong-Secret-99"), "")
		if err != nil || ok || desc == "" || strings.Contains(desc, "wrong-Secret-99") || strings.Contains(desc, s.BindPW) {
			t.Errorf("Test with a wrong password = %v %q %v", ok, desc, err)
		}
	})

	t.Run("bad configurations", func(t *testing.T) {
		for _, c := range []struct {
			extra []string
			want  string
		}{
			{[]string{"HOSTNAMEATTRIBUTE", ""}, "Missing parameter: HOSTNAMEATTRIBUTE"},
			{[]string{"HOSTNAMEATTRIBUTE", "c n"}, "HOSTNAMEATTRIBUTE"},
			{[]string{"SEARCHFILTER", "(objectClass=device"}, "SEARCHFILTER"},
			{[]string{"LDAPURI", ""}, "LDAPURI"},
		} {
			_, err := r.Set(ctx, "bad", ldapParams(s, c.extra...))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Set(%v) = %v; want an error naming %s", c.extra, err, c.want)
			}
		}
	})

	t.Run("directory down", func(t *testing.T) {
		s.Stop(t)
		_, err := r.ByHostname(ctx, "frodo")
		if err == nil || !strings.Contains(err.Error(), "machine resolver ldap1 is not available") {
			t.Errorf("ByHostname with slapd stopped = %v", err)
		}
	})
}

// Without the LDAP user store type (a program that links no LDAP code)
// there is no ldap machine resolver type.
func TestLDAPTypeNeedsUserStoreType(t *testing.T) {
	r := machine.NewResolvers(machine.ResolversConfig{Store: storetest.Open(t)})
	if got := r.Types(); !slices.Equal(got, []string{"hosts"}) {
		t.Errorf("Types = %v", got)
	}
	_, err := r.Set(t.Context(), "l", map[string]string{"type": "ldap", "LDAPURI": "ldap://127.0.0.1", "LDAPBASE": "dc=x", "HOSTNAMEATTRIBUTE": "cn"})
	if err == nil || !strings.Contains(err.Error(), "machine resolver type : ldap not in [hosts]") {
		t.Errorf("Set(ldap) = %v", err)
	}
}
