package policy_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
)

func TestClientListMatches(t *testing.T) {
	tests := []struct {
		name    string
		entries []string
		ip      string // "" is the invalid (zero) address
		want    bool
	}{
		{"nil list", nil, "10.0.0.1", true},
		{"only empty entries", []string{"", "  "}, "10.0.0.1", true},
		{"empty list invalid ip", nil, "", true},
		{"single ipv4 hit", []string{"10.0.0.1"}, "10.0.0.1", true},
		{"single ipv4 miss", []string{"10.0.0.1"}, "10.0.0.2", false},
		{"cidr hit", []string{"10.0.0.0/8"}, "10.255.1.2", true},
		{"cidr miss", []string{"10.0.0.0/8"}, "11.0.0.1", false},
		{"prefix is masked", []string{"10.1.2.3/8"}, "10.200.0.1", true},
		{"spaces trimmed", []string{"  192.168.0.0/16 "}, "192.168.7.7", true},
		{"ipv6 hit", []string{"2001:db8::/32"}, "2001:db8::1", true},
		{"ipv6 miss", []string{"2001:db8::/32"}, "2001:db9::1", false},
		{"ipv6 single", []string{"::1"}, "::1", true},
		{"ipv4 not in ::/0", []string{"::/0"}, "10.0.0.1", false},
		{"ipv6 not in 0.0.0.0/0", []string{"0.0.0.0/0"}, "::1", false},
		{"exclusion hit", []string{"10.0.0.0/8", "!10.0.0.1"}, "10.0.0.1", false},
		{"exclusion dash", []string{"10.0.0.0/8", "-10.0.0.0/24"}, "10.0.0.9", false},
		{"exclusion spaced", []string{"10.0.0.0/8", "! 10.0.0.1"}, "10.0.0.1", false},
		{"exclusion other", []string{"10.0.0.0/8", "!10.0.0.1"}, "10.0.0.2", true},
		{"exclusion order irrelevant", []string{"!10.0.0.1", "10.0.0.0/8"}, "10.0.0.1", false},
		{"several positives", []string{"10.0.0.0/8", "172.16.0.0/12"}, "172.16.1.2", true},
		{"only negation excluded", []string{"!10.0.0.1"}, "10.0.0.1", false},
		{"only negation other", []string{"!10.0.0.1"}, "10.0.0.2", false},
		{"mapped client in ipv4 cidr", []string{"10.0.0.0/8"}, "::ffff:10.0.0.1", true},
		{"mapped client excluded", []string{"0.0.0.0/0", "!10.0.0.1"}, "::ffff:10.0.0.1", false},
		{"mapped entry", []string{"::ffff:10.0.0.1"}, "10.0.0.1", true},
		{"mapped prefix /104 hit", []string{"::ffff:1.2.3.4/104"}, "1.9.9.9", true},
		{"mapped prefix /104 mapped hit", []string{"::ffff:1.2.3.4/104"}, "::ffff:1.0.0.1", true},
		{"mapped prefix /104 miss", []string{"::ffff:1.2.3.4/104"}, "2.0.0.1", false},
		{"mapped prefix /96 all ipv4", []string{"::ffff:0:0/96"}, "203.0.113.9", true},
		{"zoned client", []string{"fe80::/10"}, "fe80::1%eth0", true},
		{"invalid client ip", []string{"0.0.0.0/0", "::/0"}, "", false},
		{"match nothing list", []string{"!0.0.0.0/0", "!::/0"}, "10.0.0.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, err := policy.ParseClientList(tt.entries)
			if err != nil {
				t.Fatalf("ParseClientList(%q): %v", tt.entries, err)
			}
			var ip netip.Addr
			if tt.ip != "" {
				ip = netip.MustParseAddr(tt.ip)
			}
			if got := cl.Matches(ip); got != tt.want {
				t.Errorf("Matches(%s) = %v, want %v", tt.ip, got, tt.want)
			}
			var nonEmpty bool
			for _, e := range tt.entries {
				nonEmpty = nonEmpty || strings.TrimSpace(e) != ""
			}
			if cl.Empty() == nonEmpty {
				t.Errorf("Empty() = %v", cl.Empty())
			}
		})
	}
}

func TestParseClientListInvalid(t *testing.T) {
	tests := []struct {
		name  string
		entry string
	}{
		{"prefix too long", "10.0.0.0/33"},
		{"ipv6 prefix too long", "::1/129"},
		{"not an address", "a.b.c.d"},
		{"mapped prefix below 96 bits", "::ffff:1.2.3.4/80"},
		{"bare bang", "!"},
		{"bare dash", "-"},
		{"double negation", "!!10.0.0.1"},
		{"csv inside entry", "10.0.0.1, 10.0.0.2"},
		{"zone", "fe80::1%eth0"},
		{"leading zero octet", "010.0.0.1"},
		{"double prefix", "10.0.0.0/8/8"},
		{"negative bits", "1.2.3.4/-1"},
		{"space before slash", "10.0.0.0 /8"},
		{"wildcard", "*"},
		{"hostname", "localhost"},
		{"short ipv4", "10.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl, err := policy.ParseClientList([]string{"10.0.0.0/8", tt.entry})
			e, ok := errors.AsType[*apierr.Error](err)
			if !ok {
				t.Fatalf("ParseClientList(%q) = %v, want *apierr.Error", tt.entry, err)
			}
			if e.Code != apierr.ConfigAdmin || e.Number() != 302 || e.Error() != "Invalid client definition!" {
				t.Errorf("error = %d %q", e.Number(), e.Error())
			}
			if !cl.Empty() {
				t.Error("list not empty after an error")
			}
		})
	}
}

// clAddr builds an address from fuzz bytes: 16 bytes give IPv6 (maybe
// mapped), 4 give IPv4.
func clAddr(b []byte) (netip.Addr, bool) {
	switch {
	case len(b) >= 16:
		return netip.AddrFrom16([16]byte(b[:16])), true
	case len(b) >= 4:
		return netip.AddrFrom4([4]byte(b[:4])), true
	}
	return netip.Addr{}, false
}

func FuzzClientCIDR(f *testing.F) {
	for _, s := range []string{
		"10.0.0.0/8", "10.0.0.0/33", "::ffff:1.2.3.4/104", "!10.0.0.1", "a.b.c.d",
		"-10.0.0.0/24", "2001:db8::/32", "::/0", "0.0.0.0/0", "::ffff:10.0.0.1",
		"fe80::1%eth0", " 192.168.1.1 ", "::ffff:0:0/96", "1.2.3.4/0",
	} {
		f.Add(s, []byte{10, 0, 0, 1})
		f.Add(s, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4})
	}
	f.Fuzz(func(t *testing.T, entry string, ipb []byte) {
		cl, err := policy.ParseClientList([]string{entry})
		if err != nil {
			e, ok := errors.AsType[*apierr.Error](err)
			if !ok || e.Code != apierr.ConfigAdmin || e.Error() != "Invalid client definition!" {
				t.Fatalf("bad error %#v", err)
			}
			return
		}
		ip, ok := clAddr(ipb)
		if !ok {
			cl.Matches(netip.Addr{})
			return
		}
		got := cl.Matches(ip)
		s := strings.TrimSpace(entry)
		if s == "" {
			if !got || !cl.Empty() {
				t.Fatal("empty entry must not restrict")
			}
			return
		}
		if s[0] == '!' || s[0] == '-' {
			if got {
				t.Fatalf("only-negation list %q matched %v", entry, ip)
			}
			return
		}
		// Oracle from netip: the entry as written, against the client
		// unmapped, or against the client's mapped form for a mapped entry.
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, err := netip.ParseAddr(s)
			if err != nil {
				t.Fatalf("accepted %q that netip rejects", s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		u := ip.Unmap()
		want := p.Contains(u)
		if p.Addr().Is4In6() {
			want = u.Is4() && p.Contains(netip.AddrFrom16(u.As16()))
		}
		if got != want {
			t.Fatalf("%q.Matches(%v) = %v, netip says %v", entry, ip, got, want)
		}
	})
}

func BenchmarkClientMatch(b *testing.B) {
	cl, err := policy.ParseClientList([]string{
		"10.0.0.0/8", "!10.1.0.0/16", "172.16.0.0/12", "192.168.0.0/16",
		"2001:db8::/32", "-2001:db8:1::/48",
	})
	if err != nil {
		b.Fatal(err)
	}
	ips := []netip.Addr{
		netip.MustParseAddr("192.168.3.4"),
		netip.MustParseAddr("::ffff:10.2.3.4"),
		netip.MustParseAddr("2001:db8:2::1"),
		netip.MustParseAddr("8.8.8.8"),
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		cl.Matches(ips[i&3])
		i++
	}
}
