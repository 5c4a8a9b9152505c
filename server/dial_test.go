package server_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/netguard"
)

// tcpCounter is a TCP listener on 127.0.0.1 that counts the connections it
// accepts and closes them.
type tcpCounter struct {
	ln       net.Listener
	accepted atomic.Int32
}

func newTCPCounter(t *testing.T) *tcpCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &tcpCounter{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return c
}

func (c *tcpCounter) port() int { return c.ln.Addr().(*net.TCPAddr).Port }

// udpCounter is a UDP socket on 127.0.0.1 that counts the datagrams it
// gets.
type udpCounter struct {
	conn *net.UDPConn
	got  atomic.Int32
}

func newUDPCounter(t *testing.T) *udpCounter {
	t.Helper()
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	c := &udpCounter{conn: conn}
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, _, err := conn.ReadFromUDP(buf); err != nil {
				return
			}
			c.got.Add(1)
		}
	}()
	t.Cleanup(func() { _ = conn.Close() })
	return c
}

const (
	loopbackRule  = "(loopback); allow it with -allow-dial"
	linkLocalRule = "(link-local); allow it with -allow-dial"
	smsModule     = "privacyidea.lib.smsprovider.HttpSMSProvider.HttpSMSProvider"
)

// TestSSRFGuard is reliability S8. Under the library's default dial policy
// (nothing allowed), every outbound target an administrator configures on
// a loopback or link-local address is refused at dial time: SMTP
// (send_test_email), SMS HTTP gateways at 169.254.169.254, 127.0.0.1,
// [::1], 0x7f000001 and a name resolving to 127.0.0.1, a RADIUS server
// (test_request), and LDAP and SCIM user stores (resolver test). Each
// answer is short and names the rule; the listeners see no connection.
func TestSSRFGuard(t *testing.T) {
	tcp := newTCPCounter(t)
	udp := newUDPCounter(t)
	port := fmt.Sprint(tcp.port())
	e := newEnvWith(t, []authsrv.Option{authsrv.WithDialPolicy(netguard.New())})
	tok := e.login(t)

	t.Run("SMTP", func(t *testing.T) {
		for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
			r := e.admin(t, tok, "POST", "/smtpserver/send_test_email",
				form("identifier", "m", "server", host, "port", port, "sender", "authsrv@example.org", "recipient", "a@example.org", "timeout", "5"))
			msg, _ := at(r.json, "detail.message").(string)
			if wantOK(t, r) != false || !strings.Contains(msg, "refused: the address is in a range the server does not dial "+loopbackRule) {
				t.Errorf("%s: %s", host, r.body)
			}
		}
	})

	t.Run("SMS", func(t *testing.T) {
		cases := []struct{ url, rule string }{
			{"http://169.254.169.254/latest/meta-data/", linkLocalRule},
			{"http://127.0.0.1:" + port + "/send", loopbackRule},
			{"http://[::1]:" + port + "/send", loopbackRule},
			{"http://localhost:" + port + "/send", loopbackRule},
			// A resolver that reads the hex form as an address gives
			// 127.0.0.1, refused; Go's own resolver finds no such host.
			{"http://0x7f000001:" + port + "/send", ""},
		}
		for i, tc := range cases {
			name := fmt.Sprintf("gw%d", i)
			wantOK(t, e.admin(t, tok, "POST", "/smsgateway", form("name", name, "module", smsModule,
				"option.URL", tc.url, "option.HTTP_METHOD", "POST", "option.text", "{otp}", "option.TIMEOUT", "5")))
			err := e.s.Notify().SendSMS(t.Context(), name, "+49 170 1", "123456")
			switch {
			case err == nil:
				t.Errorf("%s: sent", tc.url)
			case tc.rule != "" && !strings.Contains(err.Error(), "refused: the address is in a range the server does not dial "+tc.rule):
				t.Errorf("%s: %v", tc.url, err)
			case tc.rule == "" && !strings.Contains(err.Error(), loopbackRule) && !strings.Contains(err.Error(), "could not be resolved"):
				t.Errorf("%s: %v", tc.url, err)
			}
		}
	})

	t.Run("RADIUS", func(t *testing.T) {
		wantOK(t, e.admin(t, tok, "POST", "/radiusserver/rad1",
			form("server", "127.0.0.1", "port", fmt.Sprint(udp.conn.LocalAddr().(*net.UDPAddr).Port), "secret", "rad-Secret-9", "timeout", "1", "retries", "1")))
		r := e.admin(t, tok, "POST", "/radiusserver/test_request", form("identifier", "rad1", "username", "u", "password", "p"))
		msg, _ := at(r.json, "result.error.message").(string)
		if r.status == 200 || !strings.Contains(msg, loopbackRule) || strings.Contains(string(r.body), "rad-Secret-9") {
			t.Errorf("test_request: %d %s", r.status, r.body)
		}
	})

	t.Run("Resolvers", func(t *testing.T) {
		for _, params := range []string{
			form("type", "ldapresolver", "LDAPURI", "ldap://127.0.0.1:"+port, "LDAPBASE", "dc=example,dc=org",
				"LOGINNAMEATTRIBUTE", "uid", "UIDTYPE", "entryUUID", "USERINFO", `{"username": "uid"}`, "TIMEOUT", "5"),
			form("type", "scimresolver", "Authserver", "http://localhost:"+port+"/token", "Resourceserver", "http://127.0.0.1:"+port+"/scim/",
				"Client", "authsrv", "Secret", "scim-Secret-4"),
		} {
			r := e.admin(t, tok, "POST", "/resolver/test", params)
			desc, _ := at(r.json, "detail.description").(string)
			if wantOK(t, r) != false || !strings.Contains(desc, loopbackRule) || len(desc) > 200 {
				t.Errorf("resolver test: %s", r.body)
			}
		}
	})

	if n := tcp.accepted.Load(); n != 0 {
		t.Errorf("the TCP listener saw %d connections", n)
	}
	if n := udp.got.Load(); n != 0 {
		t.Errorf("the RADIUS socket got %d datagrams", n)
	}
}

// TestSSRFGuardAllowed is S8's other half: allowing 127.0.0.0/8 lets the
// same SMTP test mail and SMS through; a gateway on an allowed address
// (127.0.0.2) that redirects to a refused one (127.0.0.1) is refused at
// the redirect, and its target sees no connection; a gateway's error
// answer is not echoed.
func TestSSRFGuardAllowed(t *testing.T) {
	sink := testsvc.NewSMTPSink(t)
	var hits atomic.Int32
	gw := serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "remote-internal-detail")
			return
		}
		_, _ = io.WriteString(w, "OK")
	}))

	e := newEnvWith(t, []authsrv.Option{authsrv.WithDialPolicy(netguard.MustParse("127.0.0.0/8"))})
	tok := e.login(t)
	v := wantOK(t, e.admin(t, tok, "POST", "/smtpserver/send_test_email",
		form("identifier", "m", "server", "127.0.0.1", "port", fmt.Sprint(sink.Port), "sender", "authsrv@example.org", "recipient", "a@example.org", "timeout", "5")))
	if v != true || len(sink.Messages()) != 1 {
		t.Errorf("allowed SMTP: %v, %d messages", v, len(sink.Messages()))
	}
	for name, path := range map[string]string{"ok": "/send", "fail": "/fail"} {
		wantOK(t, e.admin(t, tok, "POST", "/smsgateway", form("name", name, "module", smsModule,
			"option.URL", "http://"+gw+path, "option.HTTP_METHOD", "POST", "option.text", "{otp}", "option.TIMEOUT", "5")))
	}
	if err := e.s.Notify().SendSMS(t.Context(), "ok", "+49 170 1", "123456"); err != nil {
		t.Errorf("allowed SMS: %v", err)
	}
	if err := e.s.Notify().SendSMS(t.Context(), "fail", "+49 170 1", "123456"); err == nil || strings.Contains(err.Error(), "remote-internal-detail") {
		t.Errorf("gateway error: %v", err)
	}
	if n := hits.Load(); n != 2 {
		t.Errorf("the gateway got %d requests, want 2", n)
	}

	// Redirect: 127.0.0.2 allowed, 127.0.0.1 not.
	target := newTCPCounter(t)
	redirector := serveOn(t, "127.0.0.2:0", http.RedirectHandler(fmt.Sprintf("http://127.0.0.1:%d/send", target.port()), http.StatusFound))
	e2 := newEnvWith(t, []authsrv.Option{authsrv.WithDialPolicy(netguard.MustParse("127.0.0.2/32"))})
	tok2 := e2.login(t)
	wantOK(t, e2.admin(t, tok2, "POST", "/smsgateway", form("name", "redir", "module", smsModule,
		"option.URL", "http://"+redirector+"/send", "option.HTTP_METHOD", "GET", "option.text", "{otp}", "option.TIMEOUT", "5")))
	err := e2.s.Notify().SendSMS(t.Context(), "redir", "+49 170 1", "123456")
	if err == nil || !strings.Contains(err.Error(), "connection to 127.0.0.1:") || !strings.Contains(err.Error(), loopbackRule) {
		t.Errorf("redirect to loopback: %v", err)
	}
	if n := target.accepted.Load(); n != 0 {
		t.Errorf("the redirect target saw %d connections", n)
	}
}

// serveOn serves h on addr and returns the listening host:port.
func serveOn(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}
