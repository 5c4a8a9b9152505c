package server_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/policy"
)

var refillTokenRe = regexp.MustCompile(`^[0-9a-f]{80}$`)

// offlineEnv is tokenEnv with the HOTP token V1 (RFC 4226 key, PIN "pin")
// of alice attached to the offline application (10 values, 20 rounds)
// without a machine.
func offlineEnv(t *testing.T) (*env, string) {
	t.Helper()
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "V1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	if _, err := e.s.MachineTokens().Attach(t.Context(), machine.AttachRequest{Serial: "V1", Application: machine.OfflineName,
		Options: map[string]string{"count": "10", "rounds": "20"}}); err != nil {
		t.Fatal(err)
	}
	return e, tok
}

func rfcValue(c uint64) string { return otp.HOTP([]byte("12345678901234567890"), c, 6, otp.SHA1) }

// offlineItem returns the one item of auth_items.offline.
func offlineItem(t *testing.T, r reply) map[string]any {
	t.Helper()
	list, _ := at(r.json, "auth_items.offline").([]any)
	if len(list) != 1 {
		t.Fatalf("auth_items.offline: %s", r.body)
	}
	item, _ := list[0].(map[string]any)
	return item
}

// wantOfflineValues checks that response holds the hashes of PIN "pin"
// and the RFC 4226 values at counters from..to-1, in Go and with Python's
// hashlib.
func wantOfflineValues(t *testing.T, response any, from, to uint64) {
	t.Helper()
	resp, _ := response.(map[string]any)
	if len(resp) != int(to-from) {
		t.Fatalf("%d values, want counters %d..%d: %v", len(resp), from, to-1, resp)
	}
	type pyCase struct {
		Hash     string `json:"hash"`
		Password string `json:"password"`
	}
	var cases []pyCase
	for c := from; c < to; c++ {
		h, _ := resp[strconv.FormatUint(c, 10)].(string)
		if ok, err := machine.PBKDF2Verify(h, "pin"+rfcValue(c)); err != nil || !ok {
			t.Errorf("value of counter %d (%q): %v %v", c, h, ok, err)
		}
		cases = append(cases, pyCase{h, "pin" + rfcValue(c)})
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is missing; CI needs it to cross-check the offline hashes")
		}
		t.Log("python3 not found: the hashlib cross-check is skipped")
		return
	}
	in, _ := json.Marshal(cases)
	cmd := exec.CommandContext(t.Context(), py, "-c", `
import base64, hashlib, hmac, json, sys
def ab64(s):
    s = s.replace(".", "+")
    return base64.b64decode(s + "=" * (-len(s) % 4))
out = []
for c in json.load(sys.stdin):
    _, scheme, rounds, salt, chk = c["hash"].split("$")
    dk = hashlib.pbkdf2_hmac("sha512", c["password"].encode(), ab64(salt), int(rounds))
    out.append(scheme == "pbkdf2-sha512" and hmac.compare_digest(dk, ab64(chk)))
print(json.dumps(out))
`)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var got []bool
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) || slices.Contains(got, false) {
		t.Fatalf("hashlib verification: %s (%v)", out, err)
	}
}

func refillReq(t *testing.T, e *env, kv ...string) reply {
	t.Helper()
	r := e.do(t, "POST", "/validate/offlinerefill", formType, form(kv...), nil)
	noNulls(t, r.json, "$")
	return r
}

func TestOfflineCheckAndRefill(t *testing.T) {
	e, _ := offlineEnv(t)
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcValue(0))
	wantAuth(t, r, true, "matching 1 tokens")
	it := offlineItem(t, r)
	for k, want := range map[string]any{"serial": "V1", "user": "alice", "username": "alice", "count": "10", "rounds": "20"} {
		if it[k] != want {
			t.Errorf("item %s = %v, want %v", k, it[k], want)
		}
	}
	refill, _ := it["refilltoken"].(string)
	if !refillTokenRe.MatchString(refill) {
		t.Errorf("refilltoken %q", refill)
	}
	// Counter 0 was the online authentication: 1..10 are handed out.
	wantOfflineValues(t, it["response"], 1, 11)

	// The user used counters 1..4 offline.
	r = refillReq(t, e, "serial", "V1", "refilltoken", refill, "pass", "pin"+rfcValue(4))
	if r.status != 200 || at(r.json, "result.status") != true || at(r.json, "result.value") != true || r.json["id"] != float64(1) {
		t.Fatalf("refill: %d %s", r.status, r.body)
	}
	if _, ok := r.json["detail"]; ok {
		t.Errorf("the refill answer has a detail: %s", r.body)
	}
	it = offlineItem(t, r)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range it {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.Equal(keys, []string{"refilltoken", "response", "serial"}) || it["serial"] != "V1" {
		t.Errorf("refill item %v", it)
	}
	wantOfflineValues(t, it["response"], 11, 15)
	next, _ := it["refilltoken"].(string)
	if next == refill || !refillTokenRe.MatchString(next) {
		t.Errorf("refill token not rotated: %q", next)
	}

	// The used refill token, a wrong OTP value, an unknown token: refused.
	wantError(t, refillReq(t, e, "serial", "V1", "refilltoken", refill, "pass", "pin"+rfcValue(5)), 400, 905,
		"ERR905: Token is not an offline token or refill token is incorrect")
	wantError(t, refillReq(t, e, "serial", "V1", "refilltoken", next, "pass", "pin000000"), 400, 401,
		"ERR401: You provided a wrong OTP value.")
	wantError(t, refillReq(t, e, "serial", "V1", "refilltoken", next, "pass", "nip"+rfcValue(5)), 400, 401,
		"ERR401: You provided a wrong OTP value.")
	wantError(t, refillReq(t, e, "serial", "NOPE1", "refilltoken", next, "pass", "pin"+rfcValue(5)), 400, 905,
		"ERR905: The token does not exist")
	wantError(t, refillReq(t, e, "serial", "V1", "pass", "pin"+rfcValue(5)), 400, 905, "ERR905: Missing parameter: refilltoken")
	tk, err := e.s.Tokens().Get(t.Context(), "V1")
	if err != nil || tk.Count != 15 || tk.Info[machine.InfoRefillToken] != next {
		t.Fatalf("after the refusals: counter %d, refill token kept %v (%v)", tk.Count, tk.Info[machine.InfoRefillToken] == next, err)
	}

	// hide_specific_error_message_for_offline_refill: one generic error.
	if _, err := e.s.Policies().Set(t.Context(), policy.Policy{Name: "hide", Scope: policy.ScopeToken,
		Action: "hide_specific_error_message_for_offline_refill", Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	wantError(t, refillReq(t, e, "serial", "V1", "refilltoken", refill, "pass", "pin"+rfcValue(5)), 400, 401,
		"ERR401: Failed offline token refill")
	wantError(t, refillReq(t, e, "serial", "V1", "refilltoken", next, "pass", "pin000000"), 400, 401,
		"ERR401: Failed offline token refill")
	r = refillReq(t, e, "serial", "V1", "refilltoken", next, "pass", "pin"+rfcValue(14))
	if r.status != 200 {
		t.Fatalf("refill under the hiding policy: %d %s", r.status, r.body)
	}
	wantOfflineValues(t, offlineItem(t, r)["response"], 15, 25)
}

func TestOfflineRefillParallelHTTP(t *testing.T) {
	e, _ := offlineEnv(t)
	r := check(t, e, "serial", "V1", "pass", "pin"+rfcValue(0))
	wantAuth(t, r, true, "matching 1 tokens")
	refill, _ := offlineItem(t, r)["refilltoken"].(string)
	const n = 6
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			statuses[i] = e.do(t, "POST", "/validate/offlinerefill", formType,
				form("serial", "V1", "refilltoken", refill, "pass", "pin"+rfcValue(3)), nil).status
		})
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		switch s {
		case 200:
			ok++
		case 400:
		default:
			t.Errorf("status %d", s)
		}
	}
	if ok != 1 {
		t.Fatalf("%d refills succeeded (%v); want exactly one", ok, statuses)
	}
	if tk, _ := e.s.Tokens().Get(t.Context(), "V1"); tk.Count != 14 {
		t.Errorf("counter %d, want 14", tk.Count)
	}
}

// TestOfflineCheckWithoutBinding: a token not attached gets no auth_items
// (and the envelope stays on the fast encoder's bytes).
func TestOfflineCheckWithoutBinding(t *testing.T) {
	e, tok := tokenEnv(t)
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "V1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcValue(0))
	wantAuth(t, r, true, "matching 1 tokens")
	if _, ok := r.json["auth_items"]; ok {
		t.Errorf("auth_items without an offline binding: %s", r.body)
	}
	wantError(t, refillReq(t, e, "serial", "V1", "refilltoken", "ab", "pass", "pin"+rfcValue(1)), 400, 905,
		"ERR905: Token is not an offline token or refill token is incorrect")
}
