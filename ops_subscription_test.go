package authsrv_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/subscription"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

// lockedBuffer is a log sink safe for the background check's writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func signedSubscription(t *testing.T, key ed25519.PrivateKey, till time.Time, numTokens int) []byte {
	t.Helper()
	sub := subscription.Subscription{Application: "privacyidea", ByName: "Vendor GmbH",
		DateFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), DateTill: till, NumTokens: &numTokens}
	sig, err := subscription.Sign(sub, key)
	if err != nil {
		t.Fatal(err)
	}
	sub.Signature = sig
	return subscription.Format(sub)
}

// TestSubscriptionOps: the Go caller gets what the HTTP API gives:
// upload (audited with the change), list with the counts in use, status,
// delete; a tampered file changes nothing; an expired or exceeded
// subscription warns in the status and in the log (from Run) and
// authentication goes on.
func TestSubscriptionOps(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	logs := &lockedBuffer{}
	s := configServer(t, authsrv.WithSubscriptionKey(key.Public()), authsrv.WithClock(clock),
		authsrv.WithLogger(zerolog.New(logs)))
	ctx, local := t.Context(), caller.Caller{UserAgent: "authsrv-cli"}
	admin := caller.Caller{Role: caller.Admin, Name: "admin"}
	for _, serial := range []string{"S1", "S2"} {
		if _, err := s.Ops().InitToken(ctx, local, authsrv.TokenInit{Type: "spass", Serial: serial,
			User: authsrv.Target{User: "alice", Realm: "realm1"}, Params: token.Params{"pin": "pin-" + serial}}); err != nil {
			t.Fatal(err)
		}
	}
	accepts := func() {
		t.Helper()
		res, err := s.Validator().Check(ctx, validate.Request{User: "alice", Realm: "realm1", Pass: "pin-S1"})
		if err != nil || !res.Value {
			t.Fatalf("validate: %+v %v", res, err)
		}
	}

	before := len(auditRows(t, s))
	if _, err := s.Ops().AddSubscription(ctx, admin, signedSubscription(t, key, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), 1)); err != nil {
		t.Fatal(err)
	}
	rows := auditRows(t, s)
	if len(rows) != before+1 || rows[len(rows)-1]["action"] != "POST /subscriptions/" ||
		rows[len(rows)-1]["info"] != "application: privacyidea" || fmt.Sprint(rows[len(rows)-1]["success"]) != "1" {
		t.Fatalf("upload audited as %v", rows[before:])
	}

	// A tampered file: refused, audited as a failure, nothing stored.
	tampered := bytes.Replace(signedSubscription(t, key, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), 1),
		[]byte("num_tokens: 1"), []byte("num_tokens: 9"), 1)
	_, err := s.Ops().AddSubscription(ctx, admin, tampered)
	if !errors.Is(err, subscription.ErrBadSignature) {
		t.Fatalf("tampered upload: %v", err)
	}
	if rows := auditRows(t, s); fmt.Sprint(rows[len(rows)-1]["success"]) != "0" {
		t.Fatalf("refused upload audited as %v", rows[len(rows)-1])
	}

	list, err := s.Ops().Subscriptions(ctx, admin, "")
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if r := list[0]; *r.NumTokens != 1 || r.ActiveTokens != 2 || r.ActiveUsers != 1 || r.Timedelta != -214 {
		t.Fatalf("row %+v", r)
	}

	// Within its limit (one user, one allowed): valid; a second user
	// with a token exceeds it.
	st, err := s.Ops().SubscriptionStatus(ctx, admin)
	if err != nil || st.Entries[0].State != subscription.Valid {
		t.Fatalf("status: %+v %v", st.Entries[0], err)
	}
	if _, err := s.Ops().InitToken(ctx, local, authsrv.TokenInit{Type: "spass", Serial: "S3",
		User: authsrv.Target{User: "bob", Realm: "realm1"}, Params: token.Params{"pin": "pin-S3"}}); err != nil {
		t.Fatal(err)
	}
	st, err = s.Ops().SubscriptionStatus(ctx, admin)
	if err != nil || st.Entries[0].State != subscription.Exceeded || !strings.Contains(st.Entries[0].Warning, "2 users have an active token") {
		t.Fatalf("exceeded status: %+v %v", st.Entries[0], err)
	}
	accepts()

	// Run's check logs the warning.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "is exceeded") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if out := logs.String(); !strings.Contains(out, `"level":"warn"`) || !strings.Contains(out, `"component":"subscription"`) ||
		!strings.Contains(out, "The subscription for privacyidea is exceeded") {
		t.Fatalf("no warning in the log:\n%s", out)
	}

	// Expired: the status says so; authentication goes on.
	mu.Lock()
	now = time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC)
	mu.Unlock()
	st, err = s.Ops().SubscriptionStatus(ctx, admin)
	if err != nil || st.Entries[0].State != subscription.Expired || !strings.Contains(st.Entries[0].Warning, "expired on 2027-01-01") {
		t.Fatalf("expired status: %+v %v", st.Entries[0], err)
	}
	accepts()

	// A user is refused every operation.
	user := caller.Caller{Role: caller.User, Name: "alice", Realm: "realm1"}
	if _, err := s.Ops().Subscriptions(ctx, user, ""); err == nil {
		t.Fatal("a user listed the subscriptions")
	}
	if _, err := s.Ops().DeleteSubscription(ctx, user, "privacyidea"); err == nil {
		t.Fatal("a user deleted a subscription")
	}
	if id, err := s.Ops().DeleteSubscription(ctx, admin, "privacyidea"); err != nil || id != 1 {
		t.Fatalf("delete: %d %v", id, err)
	}
	if id, err := s.Ops().DeleteSubscription(ctx, admin, "privacyidea"); err != nil || id != -1 {
		t.Fatalf("second delete: %d %v", id, err)
	}
}

func TestSubscriptionKeyOption(t *testing.T) {
	if _, err := authsrv.New(authsrv.WithSubscriptionKey(ed25519.PublicKey("short"))); err == nil || !strings.Contains(err.Error(), "subscription key") {
		t.Fatalf("bad key accepted: %v", err)
	}
	s := configServer(t)
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	_, err := s.Ops().AddSubscription(t.Context(), caller.Caller{Role: caller.Admin, Name: "admin"},
		signedSubscription(t, key, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), 1))
	if ae, ok := errors.AsType[*apierr.Error](err); !ok || ae.Code != apierr.Subscription || !errors.Is(err, subscription.ErrNoKey) {
		t.Fatalf("upload without a key: %v", err)
	}
}
