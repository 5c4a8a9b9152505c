package authsrv_test

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/eventing"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/notify"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/realm"
	"github.com/authsrv/authsrv/store/postgres"
	"github.com/authsrv/authsrv/sysconfig"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

// configBound is how long another node's configuration change may take
// to reach a node: the recheck of store.RevSnapshot (system settings,
// event handlers). Policies, realms and resolvers follow the revision at
// every request.
const configBound = time.Second

// pgNodes are Servers (node1, node2, ...) on one PostgreSQL schema, with
// the same keys: several authsrv nodes in one process.
type pgNodes struct {
	n     []*authsrv.Server
	users string // the passwd file of resolver "users"
}

// startPGNodes opens count stores on schema of pg and a Server on each,
// and has node 1 create the passwd resolver "users" (alice, bob, carol,
// dave, erin, frank) and the default realm realm1 on it.
func startPGNodes(t testing.TB, pg *testsvc.PostgresServer, schema string, count int) *pgNodes {
	t.Helper()
	encKey := []byte(strings.Repeat("e", 32))
	jwtKey := []byte(strings.Repeat("j", 32))
	auditKey := ed25519.NewKeyFromSeed([]byte(strings.Repeat("a", ed25519.SeedSize)))
	ns := &pgNodes{n: make([]*authsrv.Server, count), users: filepath.Join(t.TempDir(), "users.passwd")}
	writePasswd(t, ns.users, "alice", "bob", "carol", "dave", "erin", "frank")
	for i := range ns.n {
		st, err := postgres.Open(t.Context(), pg.DSN(), postgres.Options{Schema: schema, MaxConns: 12})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		s, err := authsrv.New(authsrv.WithStore(st), authsrv.WithEncKey(encKey), authsrv.WithJWTKey(jwtKey),
			authsrv.WithAuditKey(auditKey), authsrv.WithNodeName(fmt.Sprintf("node%d", i+1)), cheapKDF,
			authsrv.WithDialPolicy(netguard.MustParse("127.0.0.0/8")))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		ns.n[i] = s
	}
	ctx := t.Context()
	if _, err := ns.n[0].Ops().SetResolver(ctx, caller.Caller{}, "users", map[string]string{"type": "passwdresolver", "fileName": ns.users}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ns.n[0].Ops().SetRealm(ctx, caller.Caller{}, "realm1", []realm.Entry{{Name: "users"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.n[0].Ops().SetDefaultRealm(ctx, caller.Caller{}, "realm1"); err != nil {
		t.Fatal(err)
	}
	return ns
}

// writePasswd writes a passwd file with the logins (uids from 1000).
func writePasswd(t testing.TB, path string, logins ...string) {
	t.Helper()
	var b strings.Builder
	for i, l := range logins {
		fmt.Fprintf(&b, "%s:x:%d:%d:%s,,,:/home/%s:/bin/sh\n", l, 1000+i, 1000+i, l, l)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// enrollHOTP enrolls an HOTP token with hotpKey and pin for login in
// realm1 through s.
func enrollHOTP(t *testing.T, s *authsrv.Server, serial, login, pin string) {
	t.Helper()
	if _, err := s.Ops().InitToken(t.Context(), caller.Caller{}, authsrv.TokenInit{Type: "hotp", Serial: serial,
		User:   authsrv.Target{User: login, Realm: "realm1"},
		Params: token.Params{"otpkey": fmt.Sprintf("%x", hotpKey), "pin": pin}}); err != nil {
		t.Fatal(err)
	}
}

func hotpValue(counter uint64) string { return otp.HOTP(hotpKey, counter, 6, otp.SHA1) }

// checkOn runs the library's validate check on s.
func checkOn(t *testing.T, s *authsrv.Server, r validate.Request) validate.Response {
	t.Helper()
	res, err := s.Validator().Check(t.Context(), r)
	if err != nil {
		t.Fatalf("check %v: %v", r, err)
	}
	return res
}

// within polls cond every 20 ms until it holds or bound plus a margin
// passed, and returns how long it took; it fails t when cond never held.
func within(t *testing.T, what string, bound time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(bound + bound/2 + 250*time.Millisecond)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not seen within %v", what, time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestNodesPostgres runs three Servers on one PostgreSQL (issue 23): what
// one node writes, the others decide with, and an OTP is accepted once
// whichever nodes it is sent to.
func TestNodesPostgres(t *testing.T) {
	pg := testsvc.Postgres(t)
	var schemas atomic.Int64
	nodes := func(t *testing.T) *pgNodes {
		return startPGNodes(t, pg, fmt.Sprintf("nodes%02d", schemas.Add(1)), 3)
	}

	t.Run("enrolled on node 1 validates on node 3", func(t *testing.T) {
		ns := nodes(t)
		enrollHOTP(t, ns.n[0], "N1", "alice", "1234")
		res := checkOn(t, ns.n[2], validate.Request{User: "alice", Realm: "realm1", Pass: "1234" + hotpValue(0)})
		if !res.Value || res.Serial != "N1" {
			t.Fatalf("node 3: %+v", res)
		}
		// The counter node 3 moved is node 1's: the same OTP is a
		// replay there, the next one passes.
		if res := checkOn(t, ns.n[0], validate.Request{User: "alice", Pass: "1234" + hotpValue(0)}); res.Value {
			t.Fatal("node 1 accepted the OTP node 3 used")
		}
		if res := checkOn(t, ns.n[0], validate.Request{User: "alice", Pass: "1234" + hotpValue(1)}); !res.Value {
			t.Fatalf("node 1, next OTP: %+v", res)
		}
	})

	t.Run("one OTP sent to three nodes 64 times is accepted once", func(t *testing.T) {
		ns := nodes(t)
		enrollHOTP(t, ns.n[0], "P64", "alice", "")
		// Each node has decoded the token (its decode cache holds it)
		// before the race.
		for i, s := range ns.n {
			if res := checkOn(t, s, validate.Request{User: "alice", Pass: hotpValue(uint64(i))}); !res.Value {
				t.Fatalf("warm-up on node %d: %+v", i+1, res)
			}
		}
		pass := hotpValue(3)
		var ok, errs atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 64 {
			wg.Go(func() {
				<-start
				res, err := ns.n[i%3].Validator().Check(t.Context(), validate.Request{User: "alice", Realm: "realm1", Pass: pass})
				switch {
				case err != nil:
					errs.Add(1)
					t.Errorf("request %d on node %d: %v", i, i%3+1, err)
				case res.Value:
					ok.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if ok.Load() != 1 || errs.Load() != 0 {
			t.Fatalf("%d successes and %d errors for one OTP over three nodes", ok.Load(), errs.Load())
		}
		tok, err := ns.n[1].Tokens().Get(t.Context(), "P64")
		if err != nil || tok.Count != 4 {
			t.Fatalf("token after the race: count %d, %v", tok.Count, err)
		}
	})

	t.Run("policy created on node 2 applies on node 1", func(t *testing.T) {
		ns := nodes(t)
		bob := validate.Request{User: "bob", Realm: "realm1", Pass: "anything"}
		if res := checkOn(t, ns.n[0], bob); res.Value {
			t.Fatal("bob without a token accepted before the policy")
		}
		if _, err := ns.n[1].Ops().SetPolicy(t.Context(), caller.Caller{}, policy.Policy{Name: "pass", Scope: policy.ScopeAuthentication,
			Action: "passOnNoToken", Active: true, Priority: 1}); err != nil {
			t.Fatal(err)
		}
		took := within(t, "the policy of node 2 on node 1", configBound, func() bool { return checkOn(t, ns.n[0], bob).Value })
		if _, err := ns.n[1].Ops().DeletePolicy(t.Context(), caller.Caller{}, "pass"); err != nil {
			t.Fatal(err)
		}
		took2 := within(t, "the deletion of node 2 on node 1", configBound, func() bool { return !checkOn(t, ns.n[0], bob).Value })
		t.Logf("policy seen after %v, its deletion after %v (bound %v)", took, took2, configBound)
	})

	t.Run("system setting changed on node 2 applies on node 1", func(t *testing.T) {
		ns := nodes(t)
		enrollHOTP(t, ns.n[0], "S1", "alice", "1234")
		if !checkOn(t, ns.n[0], validate.Request{User: "alice", Pass: "1234" + hotpValue(0)}).Value {
			t.Fatal("PIN before OTP refused")
		}
		if _, err := ns.n[1].Ops().SetSystemConfig(t.Context(), caller.Caller{}, []sysconfig.Change{{Key: "PrependPin", Value: "False"}}); err != nil {
			t.Fatal(err)
		}
		took := within(t, "PrependPin of node 2 on node 1", configBound, func() bool { return ns.n[0].Tokens().Settings().AppendPIN })
		if res := checkOn(t, ns.n[0], validate.Request{User: "alice", Pass: hotpValue(1) + "1234"}); !res.Value {
			t.Fatalf("PIN after OTP on node 1: %+v", res)
		}
		t.Logf("system setting seen after %v (bound %v)", took, configBound)
	})

	t.Run("event handler defined on node 2 runs on node 1", func(t *testing.T) {
		ns := nodes(t)
		bob := validate.Request{User: "bob", Realm: "realm1", Pass: "wrong"}
		checkOn(t, ns.n[0], bob) // node 1 holds the (empty) handler set
		if _, err := ns.n[1].Events().Set(t.Context(), eventing.Definition{Name: "count", Active: true, Position: eventing.Post,
			HandlerModule: "Counter", Action: "increase_counter", Events: []string{"validate_check"},
			Options: map[string]string{"counter_name": "checks"}}, false); err != nil {
			t.Fatal(err)
		}
		took := within(t, "the event handler of node 2 on node 1", configBound, func() bool {
			checkOn(t, ns.n[0], bob)
			c, err := ns.n[2].Events().Counters(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			return c["checks"] > 0
		})
		t.Logf("event handler seen after %v (bound %v)", took, configBound)
	})

	t.Run("e-mail challenge of node 1 answered on node 2", func(t *testing.T) {
		ns := nodes(t)
		sink := testsvc.NewSMTPSink(t)
		if err := ns.n[0].Ops().SetSMTPServer(t.Context(), caller.Caller{}, notify.SMTPServer{Identifier: "mail", Server: "127.0.0.1",
			Port: sink.Port, Sender: "authsrv@example.org", Timeout: 5}); err != nil {
			t.Fatal(err)
		}
		if _, err := ns.n[0].Ops().InitToken(t.Context(), caller.Caller{}, authsrv.TokenInit{Type: "email", Serial: "EM1",
			User:   authsrv.Target{User: "alice", Realm: "realm1"},
			Params: token.Params{"email": "alice@example.org", "email.identifier": "mail", "pin": "mailpin"}}); err != nil {
			t.Fatal(err)
		}
		res := checkOn(t, ns.n[0], validate.Request{User: "alice", Realm: "realm1", Pass: "mailpin"})
		if res.Value || res.TransactionID == "" {
			t.Fatalf("no challenge: %+v", res)
		}
		msgs := sink.Messages()
		if len(msgs) != 1 {
			t.Fatalf("%d mails", len(msgs))
		}
		code := regexp.MustCompile(`\b\d{6}\b`).FindString(msgs[0].Data)
		if code == "" {
			t.Fatal("no OTP in the mail")
		}
		answer := validate.Request{User: "alice", Realm: "realm1", Pass: code, TransactionID: res.TransactionID}
		if res := checkOn(t, ns.n[1], answer); !res.Value {
			t.Fatalf("node 2's answer: %+v", res)
		}
		if res := checkOn(t, ns.n[2], answer); res.Value {
			t.Fatal("node 3 accepted the answer node 2 used")
		}
	})

	t.Run("fail counter of node 1 blocks on node 2", func(t *testing.T) {
		ns := nodes(t)
		enrollHOTP(t, ns.n[0], "F1", "alice", "1234")
		maxFail := 3
		if _, err := ns.n[0].Ops().SetTokenFields(t.Context(), caller.Caller{}, authsrv.TokenSelect{Serials: []string{"F1"}},
			token.Fields{MaxFail: &maxFail}); err != nil {
			t.Fatal(err)
		}
		for range maxFail {
			if checkOn(t, ns.n[0], validate.Request{User: "alice", Pass: "1234000000"}).Value {
				t.Fatal("a wrong OTP accepted")
			}
		}
		res := checkOn(t, ns.n[1], validate.Request{User: "alice", Pass: "1234" + hotpValue(0)})
		if res.Value || !strings.Contains(res.Message, token.MsgFailcounter) {
			t.Fatalf("node 2 after %d failures on node 1: %+v", maxFail, res)
		}
		if tok, err := ns.n[2].Tokens().Get(t.Context(), "F1"); err != nil || tok.FailCount != maxFail {
			t.Fatalf("node 3 reads fail count %d, %v", tok.FailCount, err)
		}
	})

	t.Run("realm and resolver of node 3 used on node 1", func(t *testing.T) {
		ns := nodes(t)
		// Node 1 has looked realm2 up (and found nothing) before node 3
		// creates it, and resolved realm1's users.
		if _, _, err := ns.n[0].Realms().Resolve(t.Context(), "dora", "realm2"); err == nil {
			t.Fatal("realm2 exists before node 3 made it")
		}
		if _, _, err := ns.n[0].Realms().Resolve(t.Context(), "alice", "realm1"); err != nil {
			t.Fatal(err)
		}
		more := filepath.Join(t.TempDir(), "more.passwd")
		writePasswd(t, more, "dora", "erin")
		if _, err := ns.n[2].Ops().SetResolver(t.Context(), caller.Caller{}, "more", map[string]string{"type": "passwdresolver", "fileName": more}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ns.n[2].Ops().SetRealm(t.Context(), caller.Caller{}, "realm2", []realm.Entry{{Name: "more"}}); err != nil {
			t.Fatal(err)
		}
		u, _, err := ns.n[0].Realms().Resolve(t.Context(), "dora", "realm2")
		if err != nil || u.Resolver != "more" {
			t.Fatalf("node 1 resolves dora@realm2: %+v %v", u, err)
		}
		if _, err := ns.n[0].Ops().InitToken(t.Context(), caller.Caller{}, authsrv.TokenInit{Type: "hotp", Serial: "D1",
			User: authsrv.Target{User: "dora", Realm: "realm2"}, Params: token.Params{"otpkey": fmt.Sprintf("%x", hotpKey)}}); err != nil {
			t.Fatal(err)
		}
		if res := checkOn(t, ns.n[0], validate.Request{User: "dora", Realm: "realm2", Pass: hotpValue(0)}); !res.Value {
			t.Fatalf("dora on node 1: %+v", res)
		}
		// Node 3 moves realm1 to the new resolver: node 1 no longer
		// finds alice there.
		if _, _, err := ns.n[2].Ops().SetRealm(t.Context(), caller.Caller{}, "realm1", []realm.Entry{{Name: "more"}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ns.n[0].Realms().Resolve(t.Context(), "alice", "realm1"); err == nil {
			t.Fatal("node 1 still finds alice in realm1 after node 3 changed its resolvers")
		}
	})

	t.Run("admin created on node 1 logs in on node 2", func(t *testing.T) {
		ns := nodes(t)
		if err := ns.n[0].Ops().AddAdmin(t.Context(), caller.Caller{}, "ops", "s3cret-pw"); err != nil {
			t.Fatal(err)
		}
		in, err := ns.n[1].Ops().Login(t.Context(), caller.Caller{}, authsrv.LoginRequest{Username: "ops", Password: "s3cret-pw"})
		if err != nil || in.Role != caller.Admin {
			t.Fatalf("login on node 2: %+v %v", in, err)
		}
		// The session node 2 issued is valid on node 3 until node 1
		// changes the password.
		raw, err := ns.n[1].IssueJWT(jwt.RegisteredClaims{Subject: "ops", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		var claims jwt.RegisteredClaims
		if err := ns.n[2].ParseJWT(raw, &claims); err != nil || claims.Subject != "ops" {
			t.Fatalf("node 3 parses node 2's token: %v", err)
		}
		if ok, err := ns.n[2].Admins().Session(t.Context(), "ops", in.Stamp); !ok || err != nil {
			t.Fatalf("session on node 3: %v %v", ok, err)
		}
		if err := ns.n[0].Ops().SetAdminPassword(t.Context(), caller.Caller{}, "ops", "n3w-pw-for-ops"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := ns.n[2].Admins().Session(t.Context(), "ops", in.Stamp); ok {
			t.Fatal("node 3 keeps a session after node 1 changed the password")
		}
	})

	t.Run("audit chain with three writers", func(t *testing.T) {
		ns := nodes(t)
		ctx := t.Context()
		logins := []string{"alice", "bob", "carol", "dave", "erin", "frank"}
		for i, l := range logins {
			enrollHOTP(t, ns.n[0], fmt.Sprintf("A%d", i), l, "")
		}
		before, err := ns.n[0].Audit().Verify(ctx)
		if err != nil || !before.OK() {
			t.Fatalf("before: %+v %v", before, err)
		}
		// Each node authenticates two users with their next OTPs, one
		// request in flight per user, while the other nodes do the same:
		// six writers of the one audit chain at once.
		const perUser = 20
		var wg sync.WaitGroup
		var accepted atomic.Int32
		start := time.Now()
		for u, login := range logins {
			s := ns.n[u%3]
			wg.Go(func() {
				for c := range perUser {
					res, err := s.Validator().Check(ctx, validate.Request{User: login, Realm: "realm1", Pass: hotpValue(uint64(c))})
					if err != nil {
						t.Errorf("node %d: %v", u%3+1, err)
						return
					}
					if res.Value {
						accepted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		after, err := ns.n[2].Audit().Verify(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !after.OK() {
			t.Fatalf("audit verify after three writers: %v", after.Problems)
		}
		n := uint64(len(logins) * perUser)
		if after.Last-before.Last != n || after.Entries != after.Last-after.First+1 || after.Entries-before.Entries != n {
			t.Fatalf("audit %+v -> %+v: want %d more entries, numbered without gap", before, after, n)
		}
		nodesSeen := map[string]int{}
		for _, r := range auditRows(t, ns.n[1])[before.Entries:] {
			nodesSeen[fmt.Sprint(r["privacyidea_server"])]++
		}
		if len(nodesSeen) != 3 {
			t.Errorf("entries by node: %v", nodesSeen)
		}
		t.Logf("%d checks (%d accepted) over three nodes in %v: %.0f/s; entries by node %v",
			n, accepted.Load(), elapsed, float64(n)/elapsed.Seconds(), nodesSeen)
		if accepted.Load() != int32(n) {
			t.Errorf("%d of %d checks accepted", accepted.Load(), n)
		}
	})
}

// BenchmarkNodesPostgresCheck measures authentications (HOTP without a
// PIN, each writing its token and an audit entry) on one PostgreSQL
// database by one node and by three: every commit appends to the one
// audit chain, whose head the nodes share.
func BenchmarkNodesPostgresCheck(b *testing.B) {
	pg := testsvc.Postgres(b)
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			ns := startPGNodes(b, pg, fmt.Sprintf("bench%d", n), n)
			const tokens = 64
			for i := range tokens {
				if _, err := ns.n[i%n].Ops().InitToken(b.Context(), caller.Caller{}, authsrv.TokenInit{Type: "hotp", Serial: fmt.Sprintf("B%d", i),
					Realm: "realm1", Params: token.Params{"otpkey": fmt.Sprintf("%x", hotpKey)}}); err != nil {
					b.Fatal(err)
				}
			}
			b.SetParallelism(4)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1)-1) % tokens
				s, serial := ns.n[i%n], fmt.Sprintf("B%d", i)
				for c := uint64(0); pb.Next(); c++ {
					res, err := s.Validator().Check(b.Context(), validate.Request{Serial: serial, Pass: hotpValue(c)})
					if err != nil || !res.Value {
						b.Errorf("check %s %d: %+v %v", serial, c, res, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checks/s")
		})
	}
}
