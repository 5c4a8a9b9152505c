package radius_test

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rad "layeh.com/radius"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/radius"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
)

// libEnv is the library with alice (PIN 1234, an HOTP token) and bob (PIN
// 5678, an e-mail token whose mail goes to sink), behind a RADIUS server
// for 127.0.0.1 and one for 127.0.0.1 as a legacy client.
type libEnv struct {
	s            *authsrv.Server
	srv          *radius.Server
	addr, legacy string
	sink         *testsvc.SMTPSink
	key          []byte
	otp          func(i int) string
	dir          string
	legacySrv    *radius.Server
}

func newLibEnv(t *testing.T) *libEnv {
	t.Helper()
	e := &libEnv{dir: t.TempDir(), key: []byte("12345678901234567890"), sink: testsvc.NewSMTPSink(t)}
	e.otp = func(i int) string { return otp.HOTP(e.key, uint64(i), 6, otp.SHA1) }
	var err error
	e.s, err = authsrv.New(authsrv.WithStore(storetest.Open(t)), authsrv.WithEncKey(make([]byte, 32)), authsrv.WithJWTKey(make([]byte, 32)),
		authsrv.WithKDFParams(authsrv.KDFParams{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}),
		authsrv.WithFileRoots(e.dir), authsrv.WithDialPolicy(netguard.MustParse("127.0.0.0/8")),
		authsrv.WithTokenSettings(token.Settings{Values: map[string]string{"email.identifier": "mail"}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.s.Close() })
	ctx, local, passwd := t.Context(), caller.Caller{}, filepath.Join(e.dir, "passwd")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(passwd, []byte("alice:x:1000:1000:Alice:/home/alice:/bin/sh\nbob:x:1001:1001:Bob:/home/bob:/bin/sh\n"), 0o600))
	_, err = e.s.Ops().SetResolver(ctx, local, "local", map[string]string{"type": "passwdresolver", "fileName": passwd})
	must(err)
	_, _, err = e.s.Ops().SetRealm(ctx, local, "example", []realm.Entry{{Name: "local"}})
	must(err)
	must(e.s.Ops().SetSMTPServer(ctx, local, notify.SMTPServer{Identifier: "mail", Server: "127.0.0.1", Port: e.sink.Port, Sender: "authsrv@example.org", Timeout: 5}))
	_, err = e.s.Ops().InitToken(ctx, local, authsrv.TokenInit{Type: "hotp", Serial: "HOTP0001", User: authsrv.Target{User: "alice", Realm: "example"},
		Params: token.Params{"otpkey": hex.EncodeToString(e.key), "pin": "1234"}})
	must(err)
	_, err = e.s.Ops().InitToken(ctx, local, authsrv.TokenInit{Type: "email", Serial: "PIEM0001", User: authsrv.Target{User: "bob", Realm: "example"},
		Params: token.Params{"otpkey": hex.EncodeToString(e.key), "pin": "5678", "email": "bob@example.org"}})
	must(err)
	e.srv, err = radius.New(radius.Config{Checker: e.s.Validator(), Clients: []radius.Client{{Network: host("127.0.0.1"), Secret: secret, Realm: "example"}}})
	must(err)
	e.addr = serve(t, e.srv)
	e.legacySrv, err = radius.New(radius.Config{Checker: e.s.Validator(), Clients: []radius.Client{{Network: host("127.0.0.1"), Secret: secret, Realm: "example", Legacy: true}}})
	must(err)
	e.legacy = serve(t, e.legacySrv)
	return e
}

// TestLibrary drives the library through the RADIUS server with layeh's
// packets: an OTP is never accepted twice, a retransmission gets the
// cached answer, and dropped packets and a foreign State spend no OTP.
func TestLibrary(t *testing.T) {
	e := newLibEnv(t)
	conn, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := build(t, pkt{user: "alice", pass: "1234" + e.otp(0)}, secret)
	a, ok := exchangeOn(t, conn, e.addr, b, secret, 10*time.Second)
	if !ok || a.code != rad.CodeAccessAccept || a.message != "matching 1 tokens" {
		t.Fatalf("PIN+OTP: %v %q", a.code, a.message)
	}
	// The NAS retransmits: the same answer, no second check.
	if a, ok := exchangeOn(t, conn, e.addr, b, secret, 10*time.Second); !ok || a.code != rad.CodeAccessAccept {
		t.Fatalf("retransmission: %v %q", a.code, a.message)
	}
	// A new request with the same OTP is a replay.
	if a, _ := exchange(t, "", e.addr, build(t, pkt{user: "alice", pass: "1234" + e.otp(0)}, secret), secret, 10*time.Second); a.code != rad.CodeAccessReject {
		t.Errorf("the OTP was accepted twice: %v %q", a.code, a.message)
	}
	// Dropped packets and foreign States spend nothing: OTP 1 still works.
	bad := build(t, pkt{user: "alice", pass: "1234" + e.otp(1), badMA: true}, secret)
	if _, ok := exchange(t, "", e.addr, bad, secret, noAnswer); ok {
		t.Error("bad Message-Authenticator answered")
	}
	for _, st := range []string{"not-ours", "01234567890123456789"} {
		a, _ := exchange(t, "", e.addr, build(t, pkt{user: "alice", pass: e.otp(1), state: []byte(st)}, secret), secret, 10*time.Second)
		if a.code != rad.CodeAccessReject {
			t.Errorf("State %q: %v %q", st, a.code, a.message)
		}
	}
	if a, _ := exchange(t, "", e.addr, build(t, pkt{user: "alice", pass: "1234" + e.otp(1)}, secret), secret, 10*time.Second); a.code != rad.CodeAccessAccept {
		t.Errorf("OTP 1 after the dropped and foreign requests: %v %q", a.code, a.message)
	}
	if st := e.srv.Stats(); st.Duplicates != 1 || st.Dropped["bad_message_authenticator"] != 1 {
		t.Errorf("stats %+v", st)
	}
	// The audit shows the NAS as the client and the RADIUS user agent.
	res, err := e.s.Audit().Search(t.Context(), audit.Query{Filters: map[string]string{
		"client": "127.0.0.1", "user_agent": radius.UserAgent, "action": radius.Action, "user": "alice", "success": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != 2 {
		t.Errorf("%d successful audit entries with client 127.0.0.1, user agent %s, action %s; want 2", res.Count, radius.UserAgent, radius.Action)
	}
	// ... and /client/ lists the NAS under the RADIUS user agent.
	apps, err := e.s.ClientApps().List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if ca := apps[radius.UserAgent]; len(ca) != 1 || ca[0].IP.String() != "127.0.0.1" {
		t.Errorf("client applications %v", apps)
	}
}

// rc runs Debian's radclient against addr with the attributes attrs and
// returns the answer's code name ("" for none), its Reply-Message and its
// State (as radclient prints it: 0x and hex).
func rc(t *testing.T, addr string, attrs ...string) (code, message, state string) {
	t.Helper()
	return rcFlags(t, addr, nil, attrs...)
}

// rcFlags is rc with more radclient flags.
func rcFlags(t *testing.T, addr string, flags []string, attrs ...string) (code, message, state string) {
	t.Helper()
	bin := testsvc.Require(t, "radclient", "/usr/bin")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dictionary"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sf := filepath.Join(dir, "secret")
	if err := os.WriteFile(sf, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-x", "-r", "1", "-t", "1", "-d", dir, "-S", sf}, flags...)
	cmd := exec.Command(bin, append(args, addr, "auth")...)
	cmd.Stdin = strings.NewReader(strings.Join(attrs, "\n") + "\n")
	out, _ := cmd.CombinedOutput()
	for _, m := range regexp.MustCompile(`Received (Access-\w+)`).FindAllSubmatch(out, -1) {
		code += " " + string(m[1])
	}
	code = strings.TrimSpace(code)
	for _, m := range regexp.MustCompile(`Reply-Message = "(.*)"`).FindAllSubmatch(out, -1) {
		message += string(m[1])
	}
	if m := regexp.MustCompile(`State = (0x[0-9a-f]+)`).FindSubmatch(out); m != nil {
		state = string(m[1])
	}
	if strings.Contains(string(out), string(secret)) {
		t.Error("radclient printed the secret")
	}
	return code, message, state
}

// TestRadclient is the "done when" with Debian's radclient:
// Accept for PIN+OTP, Reject with the message for a wrong OTP, the
// two-leg e-mail challenge, and requests without a Message-Authenticator
// dropped unless the client is legacy.
func TestRadclient(t *testing.T) {
	e := newLibEnv(t)
	const ma = "Message-Authenticator = 0x00"
	if code, msg, _ := rc(t, e.addr, `User-Name = "alice"`, fmt.Sprintf(`User-Password = "1234%s"`, e.otp(0)), ma); code != "Access-Accept" || msg != "matching 1 tokens" {
		t.Errorf("PIN+OTP: %q %q", code, msg)
	}
	if code, msg, _ := rc(t, e.addr, `User-Name = "alice@example"`, `User-Password = "1234000000"`, ma); code != "Access-Reject" || msg != "wrong otp value" {
		t.Errorf("wrong OTP: %q %q", code, msg)
	}
	// Without a Message-Authenticator: dropped, unless legacy.
	if code, _, _ := rc(t, e.addr, `User-Name = "alice"`, fmt.Sprintf(`User-Password = "1234%s"`, e.otp(1))); code != "" {
		t.Errorf("without Message-Authenticator: %q", code)
	}
	if code, _, _ := rc(t, e.legacy, `User-Name = "alice"`, fmt.Sprintf(`User-Password = "1234%s"`, e.otp(1))); code != "Access-Accept" {
		t.Errorf("legacy client without Message-Authenticator: %q", code)
	}
	if e.srv.Stats().Dropped["no_message_authenticator"] == 0 {
		t.Error("the request without Message-Authenticator was not counted")
	}

	// The first answer is lost: radclient retransmits the same packet
	// and gets the first answer again, from the cache.
	lossy := lossyProxy(t, e.addr, 1)
	if code, _, _ := rcFlags(t, lossy, []string{"-r", "3"}, `User-Name = "alice"`, fmt.Sprintf(`User-Password = "1234%s"`, e.otp(2)), ma); code != "Access-Accept" {
		t.Errorf("retransmission: %q", code)
	}
	if d := e.srv.Stats().Duplicates; d != 1 {
		t.Errorf("%d answers from the duplicate cache, want 1", d)
	}
	// -c 2 sends the request twice with new identifiers: the second is a
	// replay of the OTP.
	if code, msg, _ := rcFlags(t, e.addr, []string{"-c", "2"}, `User-Name = "alice"`, fmt.Sprintf(`User-Password = "1234%s"`, e.otp(3)), ma); code != "Access-Accept Access-Reject" || !strings.Contains(msg, "previous otp used again") {
		t.Errorf("the same OTP twice: %q %q", code, msg)
	}

	// The two-leg e-mail challenge.
	code, msg, state := rc(t, e.addr, `User-Name = "bob"`, `User-Password = "5678"`, ma)
	if code != "Access-Challenge" || msg != "Enter the OTP from the Email" || len(state) != 42 {
		t.Fatalf("first leg: %q %q %q", code, msg, state)
	}
	mails := e.sink.Messages()
	if len(mails) != 1 || mails[0].To[0] != "bob@example.org" {
		t.Fatalf("mails %+v", mails)
	}
	m := regexp.MustCompile(`\b(\d{6})\b`).FindStringSubmatch(mails[0].Data)
	if m == nil {
		t.Fatalf("no OTP in the mail: %s", mails[0].Data)
	}
	// A State that is not ours: Reject, the OTP is not spent.
	if code, _, _ := rc(t, e.addr, `User-Name = "bob"`, `State = 0x6e6f742d6f757273`, fmt.Sprintf(`User-Password = "%s"`, m[1]), ma); code != "Access-Reject" {
		t.Errorf("foreign State: %q", code)
	}
	if code, msg, _ := rc(t, e.addr, `User-Name = "bob"`, "State = "+state, fmt.Sprintf(`User-Password = "%s"`, m[1]), ma); code != "Access-Accept" {
		t.Errorf("second leg: %q %q", code, msg)
	}
}

// lossyProxy relays UDP between one client and server, dropping the first
// drop answers.
func lossyProxy(t *testing.T, server string, drop int) string {
	t.Helper()
	front, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	back, err := net.Dial("udp", server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Close(); _ = back.Close() })
	var client atomic.Pointer[net.Addr]
	go func() {
		buf := make([]byte, 4096)
		for {
			n, from, err := front.ReadFrom(buf)
			if err != nil {
				return
			}
			client.Store(&from)
			_, _ = back.Write(buf[:n])
		}
	}()
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := back.Read(buf)
			if err != nil {
				return
			}
			if drop > 0 {
				drop--
				continue
			}
			if to := client.Load(); to != nil {
				_, _ = front.WriteTo(buf[:n], *to)
			}
		}
	}()
	return front.LocalAddr().String()
}
