package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/metrics"
	"github.com/authsrv/authsrv/validate"
)

// TestMetrics: each validate request is counted once by endpoint and
// result, whoever asks (HTTP or a Go program); each HTTP request by its
// route's pattern, method and status; PIN checks report their KDF wait;
// no label names a user, serial, realm or address.
func TestMetrics(t *testing.T) {
	m := new(metrics.Memory)
	e, tok, _ := eventEnv(t, authsrv.WithMetrics(m))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "MSERIAL1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))

	type count struct {
		e    metrics.Endpoint
		r    metrics.Result
		want uint64
	}
	wantCounts := func(t *testing.T, counts ...count) {
		t.Helper()
		for _, c := range counts {
			if got := m.Validate(c.e, c.r); got != c.want {
				t.Errorf("%s/%s = %d, want %d", c.e, c.r, got, c.want)
			}
		}
	}

	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+hotpAt(0)), true, "")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin000000"), false, "")
	wantAuth(t, check(t, e, "serial", "MSERIAL1", "pass", "pin"+hotpAt(1)), true, "")
	if r := e.do(t, "GET", "/validate/check/?user=alice&realm=realm1&pass=wrong", "", "", nil); r.status != 200 {
		t.Fatalf("GET check: %d %s", r.status, r.body)
	}
	// A request the decision answers with an error (a realm that does not
	// exist) counts as an error; one refused while its parameters are
	// read (no user, no serial) never reaches the decision and counts only
	// as an HTTP 400.
	if r := e.do(t, "POST", "/validate/check", formType, form("user", "alice", "realm", "nosuchrealm", "pass", "x"), nil); r.status != 400 {
		t.Fatalf("check in an unknown realm: %d %s", r.status, r.body)
	}
	if r := e.do(t, "POST", "/validate/check", formType, form("pass", "x"), nil); r.status != 400 {
		t.Fatalf("check without user or serial: %d %s", r.status, r.body)
	}
	if r := e.do(t, "POST", "/validate/samlcheck", formType, form("user", "alice", "realm", "realm1", "pass", "pin"+hotpAt(2)), nil); r.status != 200 {
		t.Fatalf("samlcheck: %d %s", r.status, r.body)
	}
	if r := e.do(t, "POST", "/validate/radiuscheck", formType, form("user", "alice", "realm", "realm1", "pass", "pin"+hotpAt(3)), nil); r.status != 204 {
		t.Fatalf("radiuscheck: %d %s", r.status, r.body)
	}
	if r := e.do(t, "POST", "/validate/radiuscheck/", formType, form("user", "alice", "realm", "realm1", "pass", "nope"), nil); r.status != 400 {
		t.Fatalf("radiuscheck reject: %d %s", r.status, r.body)
	}
	// A Go program's check counts as a check.
	res, err := e.s.Validator().Check(t.Context(), validate.Request{User: "alice", Realm: "realm1", Pass: "pin" + hotpAt(4)})
	if err != nil || !res.Value {
		t.Fatalf("Go check: %v %v", res.Value, err)
	}
	wantCounts(t,
		count{metrics.Check, metrics.Accept, 3}, count{metrics.Check, metrics.Reject, 2}, count{metrics.Check, metrics.Error, 1},
		count{metrics.SAMLCheck, metrics.Accept, 1}, count{metrics.RadiusCheck, metrics.Accept, 1},
		count{metrics.RadiusCheck, metrics.Reject, 1}, count{metrics.Check, metrics.Challenge, 0})

	// Challenge-response: the PIN alone triggers a challenge; polling it
	// counts as a pending (challenge) poll, answering it as an accept.
	wantOK(t, e.admin(t, tok, "POST", "/policy/cr", form("scope", "authentication", "action", "challenge_response=hotp")))
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin")
	txid, _ := at(r.json, "detail.transaction_id").(string)
	if txid == "" {
		t.Fatalf("no challenge: %s", r.body)
	}
	if r := e.do(t, "GET", "/validate/polltransaction?transaction_id="+txid, "", "", nil); r.status != 200 {
		t.Fatalf("poll: %d %s", r.status, r.body)
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", hotpAt(5)), true, "")
	// An administrator's triggerchallenge.
	if r := e.admin(t, tok, "POST", "/validate/triggerchallenge", form("user", "alice", "realm", "realm1")); r.status != 200 {
		t.Fatalf("triggerchallenge: %d %s", r.status, r.body)
	}
	wantCounts(t, count{metrics.Check, metrics.Challenge, 1}, count{metrics.Check, metrics.Accept, 4},
		count{metrics.PollTransaction, metrics.Challenge, 1}, count{metrics.TriggerChallenge, metrics.Challenge, 1})

	// HTTP requests by route pattern: both slash forms count under the
	// registered one, and a path parameter never becomes a label.
	if got := m.Requests("/validate/check", http.MethodPost, 200); got != 5 {
		t.Errorf("POST /validate/check 200 = %d, want 5", got)
	}
	if got := m.Requests("/validate/check", http.MethodPost, 400); got != 2 {
		t.Errorf("POST /validate/check 400 = %d, want 2", got)
	}
	if got := m.Requests("/validate/check", http.MethodGet, 200); got != 1 {
		t.Errorf("GET /validate/check 200 = %d, want 1 (the slash form)", got)
	}
	if got := m.Requests("/validate/radiuscheck", http.MethodPost, 204) + m.Requests("/validate/radiuscheck", http.MethodPost, 400); got != 2 {
		t.Errorf("radiuscheck requests = %d, want 2", got)
	}
	if d := m.RouteTimes("/validate/check", http.MethodPost); d.Count != 7 || d.Total <= 0 {
		t.Errorf("POST /validate/check times = %+v", d)
	}
	r = e.admin(t, tok, "POST", "/token/lost/NOSUCHSERIAL", "")
	if got := m.Requests("/token/lost/:serial", http.MethodPost, r.status); got != 1 {
		t.Errorf("POST /token/lost/:serial %d = %d, want 1", r.status, got)
	}
	e.admin(t, tok, "DELETE", "/token/NOSUCHSERIAL", "")
	if got := m.RouteTimes("/token/:serial", http.MethodDelete); got.Count != 1 {
		t.Errorf("DELETE /token/:serial = %+v, want one request (the exact route)", got)
	}
	// Health probes count under their path.
	if r := e.do(t, "GET", "/healthz/livez/", "", "", nil); r.status != 200 {
		t.Fatalf("livez: %d", r.status)
	}
	if got := m.Requests("/healthz/livez", http.MethodGet, 200); got != 1 {
		t.Errorf("GET /healthz/livez 200 = %d, want 1", got)
	}
	for _, k := range m.Routes() {
		for _, bad := range []string{"alice", "realm1", "MSERIAL1", "NOSUCHSERIAL", "127.0.0.1", "192.0.2.1"} {
			if strings.Contains(k.Pattern, bad) {
				t.Errorf("route label %q holds %q", k.Pattern, bad)
			}
		}
	}

	// The PIN checks went through the KDF limiter.
	if w := m.KDFWaits(); w.Count == 0 {
		t.Error("no KDF wait reported")
	}
}

// TestMetricsOff: without WithMetrics the server reports to Nop (and
// package server leaves its routes unwrapped); a nil sink is refused.
func TestMetricsOff(t *testing.T) {
	e, tok, _ := eventEnv(t)
	if !metrics.IsNop(e.s.Metrics()) {
		t.Fatalf("Metrics() = %T, want Nop", e.s.Metrics())
	}
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "S1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+hotpAt(0)), true, "")
	if _, err := authsrv.New(authsrv.WithMetrics(nil)); err == nil || !strings.Contains(err.Error(), "metrics") {
		t.Errorf("WithMetrics(nil): %v", err)
	}
}
