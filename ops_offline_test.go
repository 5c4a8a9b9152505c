package authsrv_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/validate"
)

// offlineServer is hotpServer with H1 attached to the offline
// application (count 10, rounds 20) without a machine.
func offlineServer(t *testing.T) *authsrv.Server {
	t.Helper()
	s := hotpServer(t)
	if _, err := s.MachineTokens().Attach(t.Context(), machine.AttachRequest{Serial: "H1", Application: machine.OfflineName,
		Options: map[string]string{"count": "10", "rounds": "20"}}); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkOfflineValues verifies that resp holds the hashes of PIN 1234 and
// the values at counters from..to-1.
func checkOfflineValues(t *testing.T, resp map[string]string, from, to uint64) {
	t.Helper()
	if len(resp) != int(to-from) {
		t.Fatalf("%d values, want counters %d..%d", len(resp), from, to-1)
	}
	for c := from; c < to; c++ {
		ok, err := machine.PBKDF2Verify(resp[strconv.FormatUint(c, 10)], "1234"+otp.HOTP(hotpKey, c, 6, otp.SHA1))
		if err != nil || !ok {
			t.Errorf("value of counter %d: %v %v", c, ok, err)
		}
	}
}

// TestOfflineThroughTheLibrary: a Go program gets the offline values from
// a check and refills them, exactly as an HTTP client does.
func TestOfflineThroughTheLibrary(t *testing.T) {
	s := offlineServer(t)
	ctx := t.Context()
	res, err := s.Validator().Check(ctx, validate.Request{User: "alice", Realm: "realm1", Pass: hotpPass(0)})
	if err != nil || !res.Value {
		t.Fatalf("check: %v %v", res.Value, err)
	}
	items, _ := res.AuthItems["offline"].([]map[string]any)
	if len(items) != 1 {
		t.Fatalf("auth items %v", res.AuthItems)
	}
	it := items[0]
	if it["serial"] != "H1" || it["count"] != "10" || it["rounds"] != "20" || it["user"] != "alice" || it["username"] != "alice" {
		t.Errorf("item %v", it)
	}
	// The check used counter 0: the values are those of 1..10.
	checkOfflineValues(t, it["response"].(map[string]string), 1, 11)
	tok, err := s.Tokens().Get(ctx, "H1")
	if err != nil || tok.Count != 11 || tok.Info[machine.InfoRefillToken] != it["refilltoken"] {
		t.Fatalf("token after the check: count %d, refill token stored %v (%v)", tok.Count, tok.Info[machine.InfoRefillToken] == it["refilltoken"], err)
	}

	// The user used the values of counters 1..4 offline.
	refill := it["refilltoken"].(string)
	got, err := s.Ops().OfflineRefill(ctx, caller.Caller{}, authsrv.OfflineRefillRequest{Serial: "H1", RefillToken: refill, Pass: hotpPass(4)})
	if err != nil {
		t.Fatal(err)
	}
	checkOfflineValues(t, got.Response, 11, 15)
	if got.RefillToken == refill || got.Serial != "H1" {
		t.Errorf("refill answer: serial %q, token rotated %v", got.Serial, got.RefillToken != refill)
	}
	rows := auditRows(t, s)
	last := rows[len(rows)-1]
	if last["action"] != "POST /validate/offlinerefill" || fmt.Sprint(last["success"]) != "1" || last["serial"] != "H1" {
		t.Errorf("audit entry of the refill: %v", last)
	}

	// The old refill token is used up; nothing changes.
	_, err = s.Ops().OfflineRefill(ctx, caller.Caller{}, authsrv.OfflineRefillRequest{Serial: "H1", RefillToken: refill, Pass: hotpPass(5)})
	if !errors.Is(err, machine.ErrRefillRefused) {
		t.Fatalf("reused refill token: %v", err)
	}
	if _, _, msg, _, _ := apierr.Wire(err); msg != "ERR905: Token is not an offline token or refill token is incorrect" {
		t.Errorf("message %q", msg)
	}
	if tok, _ := s.Tokens().Get(ctx, "H1"); tok.Count != 15 || tok.Info[machine.InfoRefillToken] != got.RefillToken {
		t.Errorf("a refused refill moved the counter to %d or changed the refill token", tok.Count)
	}
	rows = auditRows(t, s)
	if last := rows[len(rows)-1]; fmt.Sprint(last["success"]) != "0" || last["action"] != "POST /validate/offlinerefill" {
		t.Errorf("audit entry of the refusal: %v", last)
	}

	// A check of the token now continues after the values handed out.
	res, err = s.Validator().Check(ctx, validate.Request{Serial: "H1", Pass: hotpPass(15)})
	if err != nil || !res.Value {
		t.Fatalf("check at 15: %v %v", res.Value, err)
	}
	items, _ = res.AuthItems["offline"].([]map[string]any)
	if len(items) != 1 {
		t.Fatalf("auth items %v", res.AuthItems)
	}
	checkOfflineValues(t, items[0]["response"].(map[string]string), 16, 26)
}

// TestOfflineOnlyForAttachedTokens: a failed check, an OTP-only check and
// a token not attached get no values, and the counter stays.
func TestOfflineOnlyForAttachedTokens(t *testing.T) {
	s := hotpServer(t)
	ctx := t.Context()
	res, err := s.Validator().Check(ctx, validate.Request{User: "alice", Realm: "realm1", Pass: hotpPass(0)})
	if err != nil || !res.Value || res.AuthItems != nil {
		t.Fatalf("unattached: %v %v %v", res.Value, res.AuthItems, err)
	}
	if _, err := s.MachineTokens().Attach(ctx, machine.AttachRequest{Serial: "H1", Application: machine.OfflineName}); err != nil {
		t.Fatal(err)
	}
	res, err = s.Validator().Check(ctx, validate.Request{User: "alice", Realm: "realm1", Pass: "9999" + hotpPass(1)[4:]})
	if err != nil || res.Value || res.AuthItems != nil {
		t.Fatalf("wrong PIN: %v %v %v", res.Value, res.AuthItems, err)
	}
	res, err = s.Validator().Check(ctx, validate.Request{Serial: "H1", OTPOnly: true, Pass: hotpPass(1)[4:]})
	if err != nil || !res.Value || res.AuthItems != nil {
		t.Fatalf("otponly: %v %v %v", res.Value, res.AuthItems, err)
	}
	if tok, _ := s.Tokens().Get(ctx, "H1"); tok.Count != 2 {
		t.Errorf("counter %d, want 2", tok.Count)
	}
	// Attached without options: the default 100 values.
	res, err = s.Validator().Check(ctx, validate.Request{User: "alice", Realm: "realm1", Pass: hotpPass(2)})
	if err != nil || !res.Value {
		t.Fatal(err)
	}
	items, _ := res.AuthItems["offline"].([]map[string]any)
	if len(items) != 1 || len(items[0]["response"].(map[string]string)) != 100 {
		t.Fatalf("auth items %v", res.AuthItems)
	}
	if tok, _ := s.Tokens().Get(ctx, "H1"); tok.Count != 103 {
		t.Errorf("counter %d, want 103", tok.Count)
	}
}

// TestOfflineRefillParallelLibrary: of parallel refills with the same
// refill token exactly one succeeds.
func TestOfflineRefillParallelLibrary(t *testing.T) {
	s := offlineServer(t)
	res, err := s.Validator().Check(t.Context(), validate.Request{User: "alice", Realm: "realm1", Pass: hotpPass(0)})
	if err != nil || !res.Value {
		t.Fatal(err)
	}
	refill := res.AuthItems["offline"].([]map[string]any)[0]["refilltoken"].(string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, refused := 0, 0
	for range 6 {
		wg.Go(func() {
			_, err := s.Ops().OfflineRefill(t.Context(), caller.Caller{}, authsrv.OfflineRefillRequest{Serial: "H1", RefillToken: refill, Pass: hotpPass(2)})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, machine.ErrRefillRefused):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || refused != 5 {
		t.Fatalf("%d successes, %d refusals; want 1 and 5", wins, refused)
	}
	if tok, _ := s.Tokens().Get(t.Context(), "H1"); tok.Count != 13 {
		t.Errorf("counter %d, want 13 (11 + the 2 values used)", tok.Count)
	}
}
