package policy

import (
	"errors"
	"net/netip"
	"strings"

	"github.com/authsrv/authsrv/apierr"
)

// ClientList is a parsed policy client attribute: networks a request's
// client IP must lie in (positive entries) and must not lie in (entries
// written with a leading "!" or "-").
type ClientList struct {
	pos, neg []netip.Prefix
}

// errClientDefinition is privacyIDEA's answer to a bad client entry (302).
var errClientDefinition = apierr.New(apierr.ConfigAdmin, "Invalid client definition!")

// ParseClientList parses a policy's client entries, so that a bad entry is
// refused when the policy is written rather than silently never matching.
//
// An entry is an IPv4 or IPv6 address or CIDR prefix, optionally preceded
// by "!" or "-" (exclusion); spaces around the entry and after the
// exclusion mark are trimmed, and empty entries are ignored. The caller
// splits CSV strings: a comma inside an entry is invalid. Addresses with a
// zone are invalid. A prefix is masked (10.1.2.3/8 is 10.0.0.0/8). An
// IPv4-mapped IPv6 address is unmapped: ::ffff:10.0.0.1 is 10.0.0.1 and
// ::ffff:1.2.3.4/104 is 1.0.0.0/8; a mapped address with fewer than 96
// prefix bits (::ffff:1.2.3.4/80) would span IPv6 space beyond the mapped
// IPv4 range and is invalid. Errors are apierr.ConfigAdmin "Invalid client
// definition!".
func ParseClientList(entries []string) (ClientList, error) {
	var c ClientList
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		neg := false
		if e[0] == '!' || e[0] == '-' {
			neg = true
			e = strings.TrimSpace(e[1:])
		}
		p, err := clParsePrefix(e)
		if err != nil {
			return ClientList{}, errClientDefinition.Wrap(err)
		}
		if neg {
			c.neg = append(c.neg, p)
		} else {
			c.pos = append(c.pos, p)
		}
	}
	return c, nil
}

// clParsePrefix parses one address or prefix and normalizes it.
func clParsePrefix(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, err
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("address with zone")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, errors.New("IPv4-mapped prefix shorter than 96 bits")
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// Empty reports whether the list has no entries (no restriction).
func (c ClientList) Empty() bool { return len(c.pos) == 0 && len(c.neg) == 0 }

// Matches reports whether ip passes the list: an empty list passes every
// address; otherwise ip (unmapped, zone dropped) must lie in at least one
// positive entry and in no exclusion, so a list of only exclusions passes
// nobody (write "0.0.0.0/0, !10.0.0.1" instead). An IPv4 address never lies
// in an IPv6 prefix such as ::/0.
func (c ClientList) Matches(ip netip.Addr) bool {
	if c.Empty() {
		return true
	}
	ip = ip.WithZone("").Unmap()
	found := false
	for _, p := range c.pos {
		if p.Contains(ip) {
			found = true
			break
		}
	}
	if !found {
		return false
	}
	for _, p := range c.neg {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}
