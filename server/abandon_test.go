package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/server"
)

// abandonN is how many requests each abandon case sends.
const abandonN = 100

// resetAfter writes raw to addr over a new TCP connection and resets the
// connection (SO_LINGER 0: Close sends an RST, not a FIN) once the first n
// bytes are written, as a client that gives up does: at once, or after
// waiting up to wait for the first byte of the answer. The server may have
// read all of the request, part of it or none. Every abandon case (policy,
// realm, token init and token import writes) sends through it.
func resetAfter(t *testing.T, addr string, raw []byte, n int, wait time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	tc := c.(*net.TCPConn)
	if err := tc.SetLinger(0); err != nil {
		t.Error(err)
	}
	if _, err := tc.Write(raw[:n]); err != nil {
		t.Error(err)
	}
	if wait > 0 {
		_ = tc.SetReadDeadline(time.Now().Add(wait))
		_, _ = tc.Read(make([]byte, 1))
	}
	if err := tc.Close(); err != nil {
		t.Error(err)
	}
}

// rawRequest is an HTTP/1.1 request as bytes.
func rawRequest(method, path, auth, ctype string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		method, path, auth, ctype, len(body))
	b.Write(body)
	return b.Bytes()
}

// busyServer is the real handler on a loopback listener that knows
// whether a connection is still being read or served.
type busyServer struct {
	*httptest.Server
	mu    sync.Mutex
	conns map[net.Conn]http.ConnState
}

func newBusyServer(t *testing.T, s *authsrv.Server) *busyServer {
	t.Helper()
	b := &busyServer{conns: map[net.Conn]http.ConnState{}}
	b.Server = httptest.NewUnstartedServer(server.New(s))
	b.Config.ConnState = func(c net.Conn, st http.ConnState) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if st == http.StateClosed || st == http.StateHijacked {
			delete(b.conns, c)
			return
		}
		b.conns[c] = st
	}
	b.Start()
	t.Cleanup(b.Close)
	return b
}

// busy reports whether a connection is being read or a request served.
func (b *busyServer) busy() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, st := range b.conns {
		if st == http.StateNew || st == http.StateActive {
			return true
		}
	}
	return false
}

// waitIdle waits until the server has no request in flight and count
// has not changed for a while.
func (b *busyServer) waitIdle(t *testing.T, count func() int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last, stable := -1, 0
	for stable < 5 {
		if time.Now().After(deadline) {
			t.Fatal("the server did not become idle")
		}
		time.Sleep(50 * time.Millisecond)
		n := count()
		if b.busy() || n != last {
			last, stable = n, 0
			continue
		}
		stable++
	}
}

// successes lists the actions of the successful audit entries.
func successes(t *testing.T, s *authsrv.Server) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if err := s.Audit().Each(context.Background(), audit.Query{}, func(r audit.Row) error {
		if fmt.Sprint(r["success"]) == "1" {
			out[fmt.Sprint(r["action"])] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAbandonedWritesAudited: policy and realm writes whose client resets
// the connection right after sending: every object that exists afterwards
// has its successful audit entry, every successful entry its object, and
// the audit chain verifies.
func TestAbandonedWritesAudited(t *testing.T) {
	cases := []struct {
		name   string
		path   func(i int) string
		ctype  string
		body   string
		exists func(t *testing.T, s *authsrv.Server) map[string]bool // path of each object that exists
	}{
		{"policy", func(i int) string { return fmt.Sprintf("/policy/ab%d", i) }, "application/json", `{"scope":"user","action":"enable"}`,
			func(t *testing.T, s *authsrv.Server) map[string]bool {
				ps, err := s.Policies().List(context.Background(), policy.Filter{})
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]bool{}
				for _, p := range ps {
					if strings.HasPrefix(p.Name, "ab") {
						out["/policy/"+p.Name] = true
					}
				}
				return out
			}},
		{"realm", func(i int) string { return fmt.Sprintf("/realm/ab%d", i) }, formType, "resolvers=mem1",
			func(t *testing.T, s *authsrv.Server) map[string]bool {
				rs, _, err := s.Realms().List(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]bool{}
				for _, r := range rs {
					if strings.HasPrefix(r.Name, "ab") {
						out["/realm/"+r.Name] = true
					}
				}
				return out
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes())})
			tok := e.login(t)
			wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", "type=memresolver"))
			b := newBusyServer(t, e.s)
			addr := b.Listener.Addr().String()

			var wg sync.WaitGroup
			for i := range abandonN {
				raw := rawRequest("POST", tc.path(i), tok, tc.ctype, []byte(tc.body))
				wg.Go(func() { resetAfter(t, addr, raw, len(raw), 0) })
			}
			wg.Wait()
			b.waitIdle(t, func() int { return len(tc.exists(t, e.s)) })

			objects, audited := tc.exists(t, e.s), successes(t, e.s)
			if len(objects) == 0 {
				t.Fatal("no request was served: the case tests nothing")
			}
			for p := range objects {
				if !audited["POST "+p] {
					t.Errorf("%s exists without its audit entry", p)
				}
			}
			for a := range audited {
				if p, ok := strings.CutPrefix(a, "POST "); ok && strings.Contains(p, "/ab") && !objects[p] {
					t.Errorf("audit entry %q without its object", a)
				}
			}
			rep, err := e.s.Audit().Verify(context.Background())
			if err != nil || !rep.OK() {
				t.Errorf("audit verify: %v %v", err, rep.Problems)
			}
			t.Logf("%d of %d requests made their change", len(objects), abandonN)
		})
	}
}
