package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
)

// serveWith serves h on a loopback listener through server.HTTPServer with
// its timeouts changed by tune, and returns the address.
func serveWith(t *testing.T, h http.Handler, tune func(*http.Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := server.HTTPServer(ln.Addr().String(), h)
	tune(hs)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// post sends one request and decodes the envelope; a connection cut
// before the answer fails the test.
func post(t *testing.T, addr, path, tok, ctype string, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Authorization", tok)
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: no answer: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: answer cut: %v", path, err)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("POST %s: %d %q: %v", path, resp.StatusCode, raw, err)
	}
	return resp.StatusCode, env
}

// slowTokenStore makes every write transaction that touches the tokens
// bucket take at least pause.
type slowTokenStore struct {
	store.Store
	pause time.Duration
}

func (s slowTokenStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error {
		return fn(slowTx{Tx: tx, pause: s.pause, once: &sync.Once{}})
	})
}

type slowTx struct {
	store.Tx
	pause time.Duration
	once  *sync.Once
}

func (t slowTx) Bucket(name string) store.Bucket {
	if name == "tokens" {
		t.once.Do(func() { time.Sleep(t.pause) })
	}
	return t.Tx.Bucket(name)
}

// TestImportAnswersBeforeWriteTimeout: a token import that cannot finish
// before the server's write timeout (12 batches of at least 400 ms, a
// 5 s write timeout) stops between batches and the client gets the
// normal answer, with how many tokens were imported and how many were not
// attempted; every imported token is in the audit.
func TestImportAnswersBeforeWriteTimeout(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithStore(slowTokenStore{Store: storetest.Open(t), pause: 400 * time.Millisecond})})
	tok := e.login(t)
	addr := serveWith(t, server.New(e.s), func(hs *http.Server) { hs.WriteTimeout = 5 * time.Second })
	const total = 6000
	body, ctype := importFile(t, "BIG", total)
	status, env := post(t, addr, "/token/load/big.csv", tok, ctype, body)
	if status != 200 || at(env, "result.status") != true {
		t.Fatalf("status %d: %v", status, env)
	}
	imported, _ := at(env, "result.value.n_imported").(float64)
	notImported, _ := at(env, "result.value.n_not_imported").(float64)
	notAttempted, _ := at(env, "result.value.n_not_attempted").(float64)
	t.Logf("imported %v, not imported %v, not attempted %v", imported, notImported, notAttempted)
	if notAttempted == 0 || imported+notImported+notAttempted != total {
		t.Errorf("value %v: want a part not attempted, and %d in all", at(env, "result.value"), total)
	}
	if s, _ := at(env, "detail.stopped").(string); !strings.Contains(s, "deadline") {
		t.Errorf("detail.stopped %q", s)
	}
	n := 0
	for i := range total {
		if ok, _ := e.s.Tokens().Exists(t.Context(), fmt.Sprintf("BIG%04d", i)); ok {
			n++
		}
	}
	if float64(n) != imported {
		t.Errorf("%d tokens exist, the answer says %v", n, imported)
	}
	rows, err := e.s.Audit().Search(t.Context(), audit.Query{Filters: map[string]string{"action": "POST /token/load/big.csv"}, PageSize: audit.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	summary := fmt.Sprintf("imported %d tokens, then stopped: the deadline of the request came; %d records not attempted", n, int(notAttempted))
	found := false
	for _, r := range rows.Rows {
		found = found || r["info"] == summary
	}
	if !found {
		t.Errorf("no audit entry %q in %v", summary, rows.Rows)
	}
}

// TestTrickledBodyIsRefused: a request body that arrives more slowly than
// the server's read timeout gets a privacyIDEA error (400, ERR905) that
// says so, not a server error, and the refusal is audited.
func TestTrickledBodyIsRefused(t *testing.T) {
	e, tok := tokenEnv(t)
	addr := serveWith(t, server.New(e.s), func(hs *http.Server) { hs.ReadTimeout = 300 * time.Millisecond })
	cases := []struct{ name, ctype, body string }{
		{"form", formType, "serial=TRICKLE1&genkey=1&type=hotp&description=slowly"},
		{"json", "application/json", `{"serial":"TRICKLE2","genkey":"1","type":"hotp","description":"slowly"}`},
		{"multipart", "multipart/form-data; boundary=xx", "--xx\r\nContent-Disposition: form-data; name=\"serial\"\r\n\r\nTRICKLE3\r\n--xx--\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Close() }()
			raw := rawRequest("POST", "/token/init", tok, tc.ctype, []byte(tc.body))
			head := len(raw) - len(tc.body)
			if _, err := c.Write(raw[:head+2]); err != nil {
				t.Fatal(err)
			}
			// One byte every 100 ms: the whole body would take seconds,
			// the read timeout is 300 ms.
			stop := make(chan struct{})
			defer close(stop)
			go func() {
				for _, b := range raw[head+2:] {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Millisecond):
					}
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
				}
			}()
			_ = c.SetReadDeadline(time.Now().Add(time.Minute))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			var env map[string]any
			if err := json.Unmarshal(b, &env); err != nil {
				t.Fatalf("%d %q: %v", resp.StatusCode, b, err)
			}
			if resp.StatusCode != 400 || at(env, "result.error.code") != float64(905) ||
				at(env, "result.error.message") != "ERR905: the request body did not arrive in time" {
				t.Errorf("answer %d %s", resp.StatusCode, b)
			}
		})
	}
	rows, err := e.s.Audit().Search(t.Context(), audit.Query{Filters: map[string]string{"action": "POST /token/init"}, PageSize: audit.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, r := range rows.Rows {
		if r["success"] == 0 && r["info"] == "ERR905: the request body did not arrive in time" {
			refused++
		}
	}
	if refused != len(cases) {
		t.Errorf("%d audited refusals, want %d: %v", refused, len(cases), rows.Rows)
	}
}

// TestResolverTestAgainstBlackHole: POST /resolver/test against an LDAP
// and a SCIM server that accept connections and never answer, with the
// resolver's own TIMEOUT far beyond the server's write timeout, answers
// before the write deadline with the failure in the description.
func TestResolverTestAgainstBlackHole(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	addr := serveWith(t, server.New(e.s), func(hs *http.Server) { hs.WriteTimeout = 3 * time.Second })
	hole := testsvc.BlackHole(t)
	cases := []struct {
		name   string
		params string
		desc   string
	}{
		{"ldap", form("type", "ldapresolver", "LDAPURI", "ldap://"+hole, "LDAPBASE", "ou=people,dc=example,dc=org",
			"BINDDN", "cn=admin,dc=example,dc=org", "BINDPW", "secret", "LOGINNAMEATTRIBUTE", "uid",
			"LDAPSEARCHFILTER", "(uid=*)", "USERINFO", `{"username":"uid"}`, "TIMEOUT", "600"),
			"LDAP connection or search failed"},
		{"scim", form("type", "scimresolver", "Authserver", "http://"+hole, "Resourceserver", "http://"+hole,
			"Client", "authsrv", "Secret", "secret", "TIMEOUT", "300"),
			"did not answer in time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, env := post(t, addr, "/resolver/test", tok, formType, []byte(tc.params))
			if status != 200 || at(env, "result.value") != false {
				t.Fatalf("answer %d %v", status, env)
			}
			if d, _ := at(env, "detail.description").(string); !strings.Contains(d, tc.desc) {
				t.Errorf("description %q, want %q", d, tc.desc)
			}
		})
	}
}

// udpBlackHole is a UDP socket that reads and never answers.
func udpBlackHole(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		b := make([]byte, 4096)
		for {
			if _, _, err := pc.ReadFrom(b); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { _ = pc.Close() })
	return pc.LocalAddr().String()
}

// TestNotifyTestAgainstBlackHole: the SMTP test mail and the RADIUS test
// request against servers that never answer, with timeouts the write
// timeout cannot wait for, answer before the write deadline with a clear
// error.
func TestNotifyTestAgainstBlackHole(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	addr := serveWith(t, server.New(e.s), func(hs *http.Server) { hs.WriteTimeout = 3 * time.Second })
	smtpHost, smtpPort, _ := net.SplitHostPort(testsvc.BlackHole(t))
	radHost, radPort, _ := net.SplitHostPort(udpBlackHole(t))
	wantOK(t, e.admin(t, tok, "POST", "/radiusserver/hole", form("server", radHost, "port", radPort, "secret", "s3cret", "timeout", "60", "retries", "3")))

	status, env := post(t, addr, "/smtpserver/send_test_email", tok, formType, []byte(form("identifier", "hole", "server", smtpHost, "port", smtpPort,
		"sender", "pi@example.org", "recipient", "admin@example.org", "timeout", "60")))
	if msg, _ := at(env, "detail.message").(string); status != 200 || at(env, "result.value") != false || !strings.Contains(msg, "did not answer in time") {
		t.Errorf("smtp test: %d %v", status, env)
	}
	// The RADIUS exchange ends with the request's deadline: a refusal that
	// says so, not a generic server error.
	status, env = post(t, addr, "/radiusserver/test_request", tok, formType, []byte(form("identifier", "hole", "username", "alice", "password", "x")))
	if status != 503 || at(env, "result.error.message") != "ERR903: The request did not finish in the time the server gives it." {
		t.Errorf("radius test: %d %v", status, env)
	}
}

// policyFile is an exported policy file of n admin policies.
func policyFile(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "[pol%05d]\nscope = 'authentication'\naction = 'passthru'\npriority = %d\ndescription = 'imported in bulk'\n", i, 1+i%5)
	}
	return []byte(b.String())
}

// TestLargePolicyImport: 5000 policies import in one answer, audited with
// their number; a file over the body limit is refused and imports
// nothing.
func TestLargePolicyImport(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	addr := serveWith(t, server.New(e.s), func(hs *http.Server) { hs.WriteTimeout = 10 * time.Second })

	big := policyFile(14000)
	if len(big) <= 1<<20 {
		t.Fatalf("the big file has %d bytes, not over the 1 MiB body limit", len(big))
	}
	ctype, mp := multipartFile(t, "file", "big.cfg", big)
	status, env := post(t, addr, "/policy/import/big.cfg", tok, ctype, []byte(mp))
	if status != 400 || at(env, "result.error.message") != "ERR905: request body too large" {
		t.Errorf("over the limit: %d %v", status, env)
	}
	if l := wantOK(t, e.admin(t, tok, "GET", "/policy/", "")).(map[string]any); len(l) != 0 {
		t.Fatalf("a refused import left %d policies", len(l))
	}

	const n = 5000
	ctype, mp = multipartFile(t, "file", "many.cfg", policyFile(n))
	status, env = post(t, addr, "/policy/import/many.cfg", tok, ctype, []byte(mp))
	if status != 200 || at(env, "result.value") != float64(n) {
		t.Fatalf("import: %d %v", status, env)
	}
	if l := wantOK(t, e.admin(t, tok, "GET", "/policy/", "")).(map[string]any); len(l) != n {
		t.Errorf("%d policies stored, want %d", len(l), n)
	}
	rows, err := e.s.Audit().Search(t.Context(), audit.Query{Filters: map[string]string{"action": "POST /policy/import/*"}, PageSize: audit.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, r := range rows.Rows {
		if r["success"] == 1 {
			ok++
			if r["info"] != fmt.Sprintf("imported %d policies", n) {
				t.Errorf("entry info %q", r["info"])
			}
		}
	}
	if ok != 1 {
		t.Errorf("%d successful import entries: %v", ok, rows.Rows)
	}
}
