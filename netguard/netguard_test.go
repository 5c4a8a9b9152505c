package netguard_test

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/netguard"
)

// The default policy refuses every special range, in IPv4, IPv6 and
// IPv4-mapped form, names the range, and lets public addresses through;
// an allowed prefix lets its addresses (mapped ones too) through and no
// others.
func TestRule(t *testing.T) {
	allow := netguard.MustParse("127.0.0.0/8", "fd12::/16", "192.0.2.7")
	cases := []struct {
		addr        string
		rule        string // under the default policy
		allowedRule string // under allow
	}{
		{"127.0.0.1", "loopback", ""},
		{"127.255.0.9", "loopback", ""},
		{"::1", "loopback", "loopback"},
		{"::ffff:127.0.0.1", "loopback", ""},
		{"169.254.169.254", "link-local", "link-local"},
		{"::ffff:169.254.169.254", "link-local", "link-local"},
		{"fe80::1", "link-local", "link-local"},
		{"fe80::1%eth0", "link-local", "link-local"},
		{"10.1.2.3", "private", "private"},
		{"172.16.0.1", "private", "private"},
		{"172.31.255.255", "private", "private"},
		{"192.168.1.1", "private", "private"},
		{"::ffff:192.168.1.1", "private", "private"},
		{"fc00::1", "private", "private"},
		{"fd12::1", "private", ""},
		{"fd00:ec2::254", "private", "private"},
		{"100.100.100.200", "shared", "shared"},
		{"0.0.0.0", "unspecified", "unspecified"},
		{"::", "unspecified", "unspecified"},
		{"224.0.0.1", "multicast", "multicast"},
		{"ff02::1", "multicast", "multicast"},
		{"255.255.255.255", "broadcast", "broadcast"},
		{"192.0.2.7", "", ""},
		{"8.8.8.8", "", ""},
		{"172.32.0.1", "", ""},
		{"2001:4860:4860::8888", "", ""},
		{"::ffff:8.8.8.8", "", ""},
	}
	for _, tc := range cases {
		a := netip.MustParseAddr(tc.addr)
		if got := (*netguard.Policy)(nil).Rule(a); got != tc.rule {
			t.Errorf("nil policy: Rule(%s) = %q, want %q", tc.addr, got, tc.rule)
		}
		if got := netguard.New().Rule(a); got != tc.rule {
			t.Errorf("empty policy: Rule(%s) = %q, want %q", tc.addr, got, tc.rule)
		}
		if got := allow.Rule(a); got != tc.allowedRule {
			t.Errorf("allowing %v: Rule(%s) = %q, want %q", allow.Allowed(), tc.addr, got, tc.allowedRule)
		}
	}
}

// A refusal names the address and the rule, says how to allow it, and is
// ErrRefused; non-IP networks are refused.
func TestCheckAddress(t *testing.T) {
	var p *netguard.Policy
	err := p.CheckAddress("tcp4", "127.0.0.1:2525")
	want := "connection to 127.0.0.1:2525 refused: the address is in a range the server does not dial (loopback); allow it with -allow-dial"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if !errors.Is(err, netguard.ErrRefused) {
		t.Error("not ErrRefused")
	}
	if r, ok := netguard.Refusal(err); !ok || r.Rule != "loopback" {
		t.Errorf("Refusal = %+v, %v", r, ok)
	}
	if err := p.CheckAddress("tcp6", "[::ffff:a9fe:a9fe]:80"); err == nil || !strings.Contains(err.Error(), "(link-local)") {
		t.Errorf("mapped metadata address: %v", err)
	}
	if err := p.CheckAddress("udp4", "192.0.2.1:1812"); err != nil {
		t.Errorf("public address: %v", err)
	}
	err = p.CheckAddress("unix", "/run/docker.sock")
	if want := "connection to /run/docker.sock refused: the server does not dial Unix sockets (unix socket); allow it with -allow-dial unix"; err == nil || err.Error() != want {
		t.Errorf("unix socket: %v", err)
	}
	if err := netguard.MustParse("unix").CheckAddress("unix", "/run/postgresql/.s.PGSQL.5432"); err != nil {
		t.Errorf("allowed unix socket: %v", err)
	}
	if err := netguard.MustParse("unix").CheckAddress("tcp4", "127.0.0.1:5432"); err == nil {
		t.Error("allowing unix allowed loopback")
	}
	if err := netguard.MustParse("0.0.0.0/0", "::/0").CheckAddress("ip4:icmp", "192.0.2.1"); !errors.Is(err, netguard.ErrRefused) {
		t.Errorf("raw IP network: %v", err)
	}
}

// Bad allow values get a clear error naming them; all are reported.
func TestParse(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "abc", "", "1.2.3/8", "fe80::1%eth0", "::/129"} {
		_, err := netguard.Parse("127.0.0.0/8", bad)
		if err == nil {
			t.Errorf("Parse(%q) accepted", bad)
			continue
		}
		if !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("Parse(%q): %v does not name the value", bad, err)
		}
	}
	_, err := netguard.Parse("10.0.0.0/33", "abc")
	if err == nil || !strings.Contains(err.Error(), "10.0.0.0/33") || !strings.Contains(err.Error(), "abc") {
		t.Errorf("both bad values not reported: %v", err)
	}
	p, err := netguard.Parse(" 10.1.2.3/8 ", "::1")
	if err != nil {
		t.Fatal(err)
	}
	got := p.Allowed()
	if len(got) != 2 || got[0].String() != "10.0.0.0/8" || got[1].String() != "::1/128" {
		t.Errorf("Allowed = %v", got)
	}
}

// listener counts the connections it accepts.
type listener struct {
	ln    net.Listener
	count atomic.Int32
}

func listen(t *testing.T, addr string) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.count.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return l
}

func (l *listener) port() string {
	_, port, _ := net.SplitHostPort(l.ln.Addr().String())
	return port
}

// The dialer judges the resolved address: a literal loopback address and
// a name that resolves to it are refused before connecting; allowing the
// range lets the same dial through.
func TestDialer(t *testing.T) {
	l := listen(t, "127.0.0.1:0")
	for _, host := range []string{"127.0.0.1", "localhost"} {
		addr := net.JoinHostPort(host, l.port())
		_, err := netguard.New().Dialer(5*time.Second).DialContext(t.Context(), "tcp", addr)
		if !errors.Is(err, netguard.ErrRefused) || !strings.Contains(err.Error(), "(loopback)") {
			t.Errorf("dial %s: %v", addr, err)
		}
	}
	c, err := netguard.MustParse("127.0.0.0/8").DialContext(t.Context(), "tcp4", net.JoinHostPort("localhost", l.port()))
	if err != nil {
		t.Fatalf("allowed dial: %v", err)
	}
	_ = c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for l.count.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := l.count.Load(); n != 1 {
		t.Errorf("the listener saw %d connections, want only the allowed one", n)
	}
}

// An allowed host that redirects to a refused address: the redirect hop
// is refused at dial time, and the target never sees a connection. The
// allowed host is 127.0.0.2 (allowed as a single address); the target is
// 127.0.0.1.
func TestHTTPClientRedirect(t *testing.T) {
	target := listen(t, "127.0.0.1:0")
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2 (Linux routes 127.0.0.0/8 to lo): %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			_, _ = w.Write([]byte("fine"))
			return
		}
		http.Redirect(w, r, "http://127.0.0.1:"+target.port()+"/", http.StatusFound)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	hc := netguard.MustParse("127.0.0.2/32").HTTPClient(10*time.Second, 3)
	base := "http://" + ln.Addr().String()
	resp, err := hc.Get(base + "/ok")
	if err != nil {
		t.Fatalf("allowed host: %v", err)
	}
	_ = resp.Body.Close()
	_, err = hc.Get(base + "/redirect")
	r, ok := netguard.Refusal(err)
	if !ok || r.Rule != "loopback" || !strings.HasPrefix(r.Address, "127.0.0.1:") {
		t.Errorf("redirect to loopback: %v", err)
	}
	if n := target.count.Load(); n != 0 {
		t.Errorf("the redirect target saw %d connections", n)
	}
}

// HTTPClient with no redirects returns the redirect answer itself.
func TestHTTPClientNoRedirect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.RedirectHandler("http://192.0.2.1/", http.StatusFound), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	resp, err := netguard.MustParse("127.0.0.1").HTTPClient(10*time.Second, 0).Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Errorf("status %d, want the 302 itself", resp.StatusCode)
	}
}

// CheckHost judges a proxy's target: every inet_aton spelling of a
// refused address, a name resolving to loopback; public addresses and
// names that do not resolve pass.
func TestCheckHost(t *testing.T) {
	var p *netguard.Policy
	for host, rule := range map[string]string{
		"127.0.0.1": "loopback", "[::1]": "loopback", "127.1": "loopback", "2130706433": "loopback",
		"0x7f000001": "loopback", "0177.0.0.1": "loopback", "0x7f.1": "loopback", "localhost": "loopback",
		"169.254.169.254": "link-local", "0xa9fea9fe": "link-local", "10.1": "private", "[::ffff:10.0.0.1]": "private",
		"192.0.2.1": "", "3221225985": "", "name.invalid": "",
	} {
		err := p.CheckHost(t.Context(), strings.Trim(host, "[]"), "80")
		r, refused := netguard.Refusal(err)
		switch {
		case rule == "" && err != nil:
			t.Errorf("%s: %v", host, err)
		case rule != "" && (!refused || r.Rule != rule):
			t.Errorf("%s: %v, want rule %s", host, err, rule)
		}
	}
	if err := p.CheckHost(t.Context(), "0x7f000001", "8080"); err == nil || !strings.HasPrefix(err.Error(), "connection to 127.0.0.1:8080 refused") {
		t.Errorf("label: %v", err)
	}
	for _, host := range []string{"256.1", "1.2.3.4.5", "0x1ffffffff", "1.0x100.1", "09", "0x"} {
		if err := p.CheckHost(t.Context(), host, ""); err != nil {
			t.Errorf("%s is not an address and should be left to the resolver: %v", host, err)
		}
	}
}

// Through a proxy, the dialer sees only the proxy: Proxy refuses a
// refused target before the request reaches the proxy, and lets a public
// one through to it.
func TestProxy(t *testing.T) {
	var seen atomic.Int32
	var lastHost atomic.Value
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen on 127.0.0.2: %v", err)
	}
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		lastHost.Store(r.Host)
		_, _ = w.Write([]byte("via proxy"))
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = proxy.Serve(ln) }()
	t.Cleanup(func() { _ = proxy.Close() })
	proxyURL, _ := url.Parse("http://" + ln.Addr().String())

	p := netguard.MustParse("127.0.0.2/32")
	tr := p.Transport()
	tr.Proxy = p.Proxy(http.ProxyURL(proxyURL))
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, target := range []string{"http://127.0.0.1:9/", "http://0x7f000001/", "http://localhost/", "http://[::1]/", "http://169.254.169.254/"} {
		_, err := hc.Get(target)
		if !errors.Is(err, netguard.ErrRefused) {
			t.Errorf("%s through the proxy: %v", target, err)
		}
	}
	if n := seen.Load(); n != 0 {
		t.Errorf("the proxy got %d refused requests", n)
	}
	resp, err := hc.Get("http://192.0.2.1/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if seen.Load() != 1 || lastHost.Load() != "192.0.2.1" {
		t.Errorf("the proxy got %d requests, last for %v", seen.Load(), lastHost.Load())
	}
}
