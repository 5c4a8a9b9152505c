// Package netguard is the dial policy of the connections an administrator
// configures (SMTP servers, SMS gateways, RADIUS servers, LDAP, SQL and
// SCIM user stores, and later event handlers' webhooks): a server-side
// request forgery guard.
//
// A [Policy] refuses the address ranges a server must not reach on an
// administrator's word unless the operator allows them: loopback,
// link-local (the cloud metadata address 169.254.169.254 among them),
// private (RFC 1918, fc00::/7), shared (100.64.0.0/10, RFC 6598),
// unspecified, multicast and broadcast, in IPv4, IPv6 and IPv4-mapped IPv6
// form. The check runs in the dialer's Control hook, on the address the
// socket is about to connect to, after name resolution: a host name that
// resolves to 127.0.0.1, a DNS answer that changes between a check and the
// connection, an odd spelling of an address and each hop of an HTTP
// redirect are all judged by the address actually dialed. Unix sockets (a
// PostgreSQL or MySQL socket path) are refused too unless allowed; other
// networks always are.
//
// The nil *Policy is the safe default: no range is allowed beyond public
// addresses. An operator widens it with CIDR prefixes, and the word
// "unix" for Unix sockets (the binary's -allow-dial flag), parsed by
// [Parse].
//
// With an HTTP proxy the dialer sees the proxy's address, not the final
// target's. [Policy.Proxy] then checks the target before the request goes
// to the proxy: an address in any spelling (127.1, 0x7f000001) is judged
// as is, a name by what it resolves to here. That check cannot close the
// rebinding gap (the proxy resolves the name again), and a name that does
// not resolve here is left to the proxy.
//
// The package sits on floor 1 and imports only the standard library.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is in the chain of every refusal (test it with errors.Is).
var ErrRefused = errors.New("address refused by the dial policy")

// AllowHint ends a refusal's message: how the operator allows the range.
const AllowHint = "allow it with -allow-dial"

// RefusedError is the refusal of one connection: the address and the rule
// (the name of the range) that refused it.
type RefusedError struct {
	// Network is the dialer's network ("tcp4", "udp6", "unix", ...).
	Network string
	// Address is the address the socket was about to connect to.
	Address string
	// Rule names the refused range ("loopback", "link-local", "private",
	// "shared", "unspecified", "multicast", "broadcast"), "unix socket",
	// or "not an IP network".
	Rule string
}

func (e *RefusedError) Error() string {
	switch e.Rule {
	case ruleNotIP:
		return fmt.Sprintf("connection to %s refused: the server dials only TCP and UDP over IP and Unix sockets (%s network)", e.Address, e.Network)
	case ruleUnix:
		return fmt.Sprintf("connection to %s refused: the server does not dial Unix sockets (%s); %s unix", e.Address, e.Rule, AllowHint)
	}
	return fmt.Sprintf("connection to %s refused: the address is in a range the server does not dial (%s); %s", e.Address, e.Rule, AllowHint)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

const (
	ruleNotIP = "not an IP network"
	ruleUnix  = "unix socket"
)

// Unix is the allow value that lets Unix sockets be dialed.
const Unix = "unix"

// rangeRule is one refused range and its name.
type rangeRule struct {
	prefix netip.Prefix
	rule   string
}

// refused are the ranges refused by default. IPv4-mapped IPv6 addresses
// are unmapped before the check, so the IPv4 rows cover them too.
var refused = func() []rangeRule {
	rows := []struct{ cidr, rule string }{
		{"0.0.0.0/8", "unspecified"},
		{"::/128", "unspecified"},
		{"127.0.0.0/8", "loopback"},
		{"::1/128", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"fe80::/10", "link-local"},
		{"10.0.0.0/8", "private"},
		{"172.16.0.0/12", "private"},
		{"192.168.0.0/16", "private"},
		{"fc00::/7", "private"},
		{"100.64.0.0/10", "shared"},
		{"224.0.0.0/4", "multicast"},
		{"ff00::/8", "multicast"},
		{"255.255.255.255/32", "broadcast"},
	}
	out := make([]rangeRule, len(rows))
	for i, r := range rows {
		out[i] = rangeRule{netip.MustParsePrefix(r.cidr), r.rule}
	}
	return out
}()

// Policy is a dial policy: the refused ranges, minus the prefixes the
// operator allows. A Policy is immutable and safe for concurrent use; the
// nil *Policy allows no refused range.
type Policy struct {
	allow []netip.Prefix
	unix  bool
}

// New returns a policy that allows the given prefixes on top of the
// public addresses. Invalid prefixes are ignored; use Parse for text.
func New(allow ...netip.Prefix) *Policy {
	p := &Policy{}
	for _, a := range allow {
		if a.IsValid() {
			p.allow = append(p.allow, a.Masked())
		}
	}
	return p
}

// ParsePrefix reads one allowed range: a CIDR prefix ("10.0.0.0/8",
// "fd00::/8") or a single address ("192.0.2.7", a /32 or /128).
func ParsePrefix(s string) (netip.Prefix, error) {
	t := strings.TrimSpace(s)
	if strings.Contains(t, "/") {
		p, err := netip.ParsePrefix(t)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix (such as 10.0.0.0/8 or fd00::/8): %s", s, shortReason(err))
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(t)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR prefix (such as 10.0.0.0/8 or fd00::/8) nor an IP address", s)
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q: an address with a zone cannot be allowed", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// shortReason keeps the part of netip's message after the quoted input.
func shortReason(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "): "); i >= 0 {
		return msg[i+3:]
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// Parse returns a policy allowing the given ranges (see ParsePrefix), and
// Unix sockets for the value "unix". Every bad value is reported,
// together.
func Parse(cidrs ...string) (*Policy, error) {
	var (
		p    Policy
		errs []error
	)
	for _, c := range cidrs {
		if strings.EqualFold(strings.TrimSpace(c), Unix) {
			p.unix = true
			continue
		}
		pr, err := ParsePrefix(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		p.allow = append(p.allow, pr)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &p, nil
}

// MustParse is Parse for constant text (tests, examples); it panics on a
// bad value.
func MustParse(cidrs ...string) *Policy {
	p, err := Parse(cidrs...)
	if err != nil {
		panic(err)
	}
	return p
}

// AllowsUnix reports whether Unix sockets may be dialed.
func (p *Policy) AllowsUnix() bool { return p != nil && p.unix }

// Allowed returns the allowed prefixes.
func (p *Policy) Allowed() []netip.Prefix {
	if p == nil {
		return nil
	}
	return slices.Clone(p.allow)
}

// String lists the allowed prefixes.
func (p *Policy) String() string {
	if p == nil || (len(p.allow) == 0 && !p.unix) {
		return "netguard.Policy{allow: none}"
	}
	var parts []string
	for _, a := range p.allow {
		parts = append(parts, a.String())
	}
	if p.unix {
		parts = append(parts, Unix)
	}
	return "netguard.Policy{allow: " + strings.Join(parts, ", ") + "}"
}

// allowed reports whether a is in an allowed prefix (in its own or its
// unmapped form).
func (p *Policy) allowed(a netip.Addr) bool {
	if p == nil {
		return false
	}
	u := a.Unmap()
	for _, pr := range p.allow {
		if pr.Contains(a) || pr.Contains(u) {
			return true
		}
	}
	return false
}

// Rule returns the name of the refused range a belongs to, or "" when the
// policy lets a be dialed.
func (p *Policy) Rule(a netip.Addr) string {
	a = a.WithZone("")
	if p.allowed(a) {
		return ""
	}
	u := a.Unmap()
	for _, r := range refused {
		if r.prefix.Contains(u) {
			return r.rule
		}
	}
	return ""
}

// CheckAddress judges a dialer's network and "host:port" address (the
// host an IP address, as a Control hook receives it).
func (p *Policy) CheckAddress(network, address string) error {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	case "unix", "unixgram", "unixpacket":
		if p.AllowsUnix() {
			return nil
		}
		return &RefusedError{Network: network, Address: address, Rule: ruleUnix}
	default:
		return &RefusedError{Network: network, Address: address, Rule: ruleNotIP}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		host, _, serr := net.SplitHostPort(address)
		if serr != nil {
			host = address
		}
		a, perr := netip.ParseAddr(host)
		if perr != nil {
			return &RefusedError{Network: network, Address: address, Rule: ruleNotIP}
		}
		ap = netip.AddrPortFrom(a, 0)
	}
	if rule := p.Rule(ap.Addr()); rule != "" {
		return &RefusedError{Network: network, Address: address, Rule: rule}
	}
	return nil
}

// Control is a net.Dialer Control hook: it refuses the connection before
// the socket connects.
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	return p.CheckAddress(network, address)
}

// ControlContext is a net.Dialer ControlContext hook (see Control).
func (p *Policy) ControlContext(_ context.Context, network, address string, _ syscall.RawConn) error {
	return p.CheckAddress(network, address)
}

// Dialer returns a dialer with the policy's hook and the given timeout
// (0 for none).
func (p *Policy) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, ControlContext: p.ControlContext}
}

// DialContext dials through the policy (net.Dialer.DialContext with the
// hook), for the client libraries that take a dial function.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return p.Dialer(0).DialContext(ctx, network, address)
}

// Transport returns a fresh HTTP transport (http.DefaultTransport's
// settings, the proxy taken from the environment and checked by Proxy)
// whose every connection, redirects' included, goes through the policy.
func (p *Policy) Transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = p.Proxy(http.ProxyFromEnvironment)
	d := p.Dialer(30 * time.Second)
	d.KeepAlive = 30 * time.Second
	tr.DialContext = d.DialContext
	return tr
}

// HTTPClient returns a client on a fresh Transport of the policy, with
// the given overall timeout (0 for none) and at most maxRedirects
// redirects followed (0 follows none and returns the redirect answer).
// Every redirect target is dialed through the policy, so a redirect to a
// refused address fails with a RefusedError in its chain.
func (p *Policy) HTTPClient(timeout time.Duration, maxRedirects int) *http.Client {
	return &http.Client{
		Transport: p.Transport(),
		Timeout:   timeout,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				if maxRedirects == 0 {
					return http.ErrUseLastResponse
				}
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return nil
		},
	}
}

// Proxy wraps an http.Transport Proxy function: a request that goes
// through a proxy is refused when its target host is refused (see
// CheckHost). Requests without a proxy are judged by the dialer.
func (p *Policy) Proxy(next func(*http.Request) (*url.URL, error)) func(*http.Request) (*url.URL, error) {
	return func(r *http.Request) (*url.URL, error) {
		u, err := next(r)
		if err != nil || u == nil {
			return u, err
		}
		if err := p.CheckHost(r.Context(), r.URL.Hostname(), r.URL.Port()); err != nil {
			return nil, err
		}
		return u, nil
	}
}

// CheckHost judges a host that a proxy will resolve and connect to: an
// IP address in any spelling inet_aton accepts, or a name by every
// address it resolves to here (a name that does not resolve is not
// refused: the proxy may know it). port only labels the refusal.
func (p *Policy) CheckHost(ctx context.Context, host, port string) error {
	label := func(a netip.Addr) string {
		if port == "" {
			return a.String()
		}
		return net.JoinHostPort(a.String(), port)
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	a, err := netip.ParseAddr(host)
	if err != nil {
		a, err = parseLegacyIPv4(host)
	}
	if err == nil {
		if rule := p.Rule(a); rule != "" {
			return &RefusedError{Network: "tcp", Address: label(a), Rule: rule}
		}
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if rule := p.Rule(a); rule != "" {
			return &RefusedError{Network: "tcp", Address: label(a), Rule: rule}
		}
	}
	return nil
}

// parseLegacyIPv4 reads the IPv4 spellings of inet_aton that netip does
// not: one to four parts, each decimal, octal (leading 0) or hexadecimal
// (0x), the last filling the remaining bytes (127.1, 2130706433,
// 0x7f000001, 0177.0.0.1).
func parseLegacyIPv4(s string) (netip.Addr, error) {
	bad := fmt.Errorf("%q is not an IPv4 address", s)
	parts := strings.Split(s, ".")
	if len(parts) > 4 || s == "" {
		return netip.Addr{}, bad
	}
	vals := make([]uint64, len(parts))
	for i, part := range parts {
		base, digits := 10, part
		switch {
		case len(part) > 2 && (part[:2] == "0x" || part[:2] == "0X"):
			base, digits = 16, part[2:]
		case len(part) > 1 && part[0] == '0':
			base, digits = 8, part[1:]
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil || digits == "" {
			return netip.Addr{}, bad
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, bad
		}
		n |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, bad
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), nil
}

// Refusal returns the refusal in err's chain, if any.
func Refusal(err error) (*RefusedError, bool) {
	return errors.AsType[*RefusedError](err)
}
