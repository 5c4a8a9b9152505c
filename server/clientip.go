package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// settingOverrideClient is the system setting that names the proxies
// allowed to give the client address of a request (privacyIDEA's
// OverrideAuthorizationClient).
const settingOverrideClient = "OverrideAuthorizationClient"

// clientKey is the request context key of the effective client address.
type clientKey struct{}

// peerIP is the TCP peer with IPv4-mapped addresses unmapped.
func peerIP(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap()
}

// withClient returns r carrying its effective client address, as
// privacyIDEA's get_client_ip determines it: without the system setting
// OverrideAuthorizationClient the TCP peer, whatever X-Forwarded-For
// says; with it, the deepest hop of the path to the client (the peer,
// then the X-Forwarded-For chain from the nearest proxy outwards, then,
// when param is set, the request's "client" parameter) that a proxy path
// of the setting vouches for. r is returned unchanged when no setting is
// made.
func (a *api) withClient(r *http.Request, param string) *http.Request {
	set := a.s.Tokens().Settings()
	raw := set.Value(settingOverrideClient)
	if strings.TrimSpace(raw) == "" {
		return r
	}
	ip := mappedClient(zerolog.Ctx(r.Context()), r, raw, param)
	return r.WithContext(context.WithValue(r.Context(), clientKey{}, ip))
}

// clientParamPath reports whether the "client" parameter may name the
// client on path: only /validate/*, /ttype/* and /auth, as privacyIDEA
// reads it only there.
func clientParamPath(path string) bool {
	return strings.HasPrefix(path, "/validate/") || strings.HasPrefix(path, "/ttype/") ||
		path == "/auth" || strings.HasPrefix(path, "/auth/")
}

// mappedClient applies the setting raw to r's path to the client.
func mappedClient(log *zerolog.Logger, r *http.Request, raw, param string) netip.Addr {
	peer := peerIP(r)
	paths, err := proxyPathsOf(raw)
	if err != nil {
		if logOnce(raw) {
			log.Error().Err(err).Str("component", "http").
				Msg("the system setting " + settingOverrideClient + " does not parse: client addresses are not mapped")
		}
		return peer
	}
	var chain []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		chain = append(chain, strings.Split(v, ",")...)
	}
	return checkProxy(clientPath(peer, chain, param), paths)
}

// clientPath is the path to the client: peer, the X-Forwarded-For chain
// from its last entry (written by the nearest proxy) to its first, and
// param. It ends before the first hop that is not an address: nothing
// beyond it can be vouched for.
func clientPath(peer netip.Addr, chain []string, param string) []netip.Addr {
	path := []netip.Addr{peer}
	add := func(s string) bool {
		ip, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return false
		}
		path = append(path, ip.Unmap())
		return true
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if !add(chain[i]) {
			return path
		}
	}
	if param != "" {
		add(param)
	}
	return path
}

// proxyNet is one network of a proxy path; any matches every address
// (the implicit last network of a proxy named alone).
type proxyNet struct {
	prefix netip.Prefix
	any    bool
}

func (n proxyNet) contains(ip netip.Addr) bool { return n.any || n.prefix.Contains(ip) }

// parseProxyPaths reads the setting: proxy paths separated by commas,
// each networks or addresses separated by ">" ("10.0.0.0/24 >
// 192.168.0.0/24": proxies in 10.0.0.x may name clients in 192.168.0.x;
// "10.0.0.1 > 192.168.0.0/24 > 192.168.1.0/24": the proxy 10.0.0.1 may
// pass on what proxies in 192.168.0.x say of clients in 192.168.1.x). A
// proxy named alone ("172.16.0.0/16") may name any client, IPv4 or IPv6
// (privacyIDEA's implicit 0.0.0.0/0 leaves IPv6 clients unmapped). Empty
// entries are passed over.
func parseProxyPaths(raw string) ([][]proxyNet, error) {
	var out [][]proxyNet
	for entry := range strings.SplitSeq(raw, ",") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		var path []proxyNet
		for part := range strings.SplitSeq(entry, ">") {
			n, err := parseProxyNet(strings.TrimSpace(part))
			if err != nil {
				return nil, err
			}
			path = append(path, n)
		}
		if len(path) == 1 {
			path = append(path, proxyNet{any: true})
		}
		out = append(out, path)
	}
	return out, nil
}

func parseProxyNet(s string) (proxyNet, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return proxyNet{}, fmt.Errorf("%q is no network", s)
		}
		return proxyNet{prefix: p.Masked()}, nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return proxyNet{}, fmt.Errorf("%q is no address", s)
	}
	ip = ip.Unmap()
	return proxyNet{prefix: netip.PrefixFrom(ip, ip.BitLen())}, nil
}

// checkProxy returns the hop of path the proxy paths vouch for: for each
// proxy path no longer than path whose every network holds the hop at
// its position, the hop at its last position; the deepest of those, and
// the peer (path[0]) when none matches. Hops beyond a proxy path's length
// are ignored, so a client cannot lengthen the path to pick its address.
func checkProxy(path []netip.Addr, paths [][]proxyNet) netip.Addr {
	best := 0
	for _, pp := range paths {
		if len(pp) > len(path) {
			continue
		}
		ok := true
		for i, n := range pp {
			if !n.contains(path[i]) {
				ok = false
				break
			}
		}
		if ok {
			best = max(best, len(pp)-1)
		}
	}
	return path[best]
}

// parsedProxies caches the parse of the last setting value seen.
type parsedProxies struct {
	raw    string
	paths  [][]proxyNet
	err    error
	logged atomic.Bool
}

var lastProxies atomic.Pointer[parsedProxies]

// proxyPathsOf is parseProxyPaths of raw, parsed once per value.
func proxyPathsOf(raw string) ([][]proxyNet, error) {
	if p := lastProxies.Load(); p != nil && p.raw == raw {
		return p.paths, p.err
	}
	paths, err := parseProxyPaths(raw)
	lastProxies.Store(&parsedProxies{raw: raw, paths: paths, err: err})
	return paths, err
}

// logOnce reports whether the parse error of raw is still to be logged.
func logOnce(raw string) bool {
	p := lastProxies.Load()
	return p == nil || p.raw != raw || p.logged.CompareAndSwap(false, true)
}
