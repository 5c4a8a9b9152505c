package token_test

import (
	"context"
	"testing"
	"time"

	"github.com/authsrv/authsrv/token"
)

func TestParsePINChangeEvery(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90d", 90 * day, true}, {"90", 90 * day, true}, {" 7D ", 7 * day, true},
		{"12h", 12 * time.Hour, true}, {"2w", 14 * day, true}, {"1y", 365 * day, true},
		{"", 0, false}, {"d", 0, false}, {"0d", 0, false}, {"-5d", 0, false},
		{"5m", 0, false}, {"1.5d", 0, false}, {"101y", 0, false}, {"99999999999999d", 0, false},
	} {
		got, ok := token.ParsePINChangeEvery(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParsePINChangeEvery(%q) = %v %v, want %v %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestPINChangeDue(t *testing.T) {
	now := time.Date(2026, 11, 22, 8, 0, 30, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		info     map[string]string
		set, due bool
	}{
		{"none", nil, false, false},
		{"past", map[string]string{token.InfoNextPinChange: "2026-11-22T08:00+0000"}, true, true},
		{"future", map[string]string{token.InfoNextPinChange: "2026-11-22T09:01+0100"}, true, false},
		{"unreadable is due", map[string]string{token.InfoNextPinChange: "soon"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, set, due := token.PINChangeDue(&token.Token{Info: tc.info}, now)
			if set != tc.set || due != tc.due || v != tc.info[token.InfoNextPinChange] {
				t.Fatalf("got %q %v %v, want set %v due %v", v, set, due, tc.set, tc.due)
			}
		})
	}
}

func TestFinishPINChange(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tok, _ := e.initToken(t, "hotp", "H", token.Params{"otpkey": rfcKey, "pin": "old"})
	if err := e.svc.SetInfo(ctx, "H", token.InfoNextPinChange, "2026-01-01T00:00+0000"); err != nil {
		t.Fatal(err)
	}
	hash, err := e.svc.HashPIN(ctx, "new")
	if err != nil {
		t.Fatal(err)
	}
	next := e.clock.Now().Add(30 * 24 * time.Hour)

	// Only a PIN reset challenge that is still there counts.
	if _, err := e.svc.CreateGenericChallenge(ctx, tok, "00000000000000000001", token.ChallengeResync, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.svc.FinishPINChange(ctx, "00000000000000000001", "H", hash, next); ok || err != nil {
		t.Fatalf("a resync challenge changed the PIN: %v %v", ok, err)
	}
	if ok, err := e.svc.FinishPINChange(ctx, "00000000000000000002", "H", hash, next); ok || err != nil {
		t.Fatalf("an unknown transaction changed the PIN: %v %v", ok, err)
	}
	if _, err := e.svc.CreateGenericChallenge(ctx, tok, "00000000000000000003", token.ChallengePINReset, []byte("x")); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(120 * time.Second)
	if ok, err := e.svc.FinishPINChange(ctx, "00000000000000000003", "H", hash, next); ok || err != nil {
		t.Fatalf("an expired challenge changed the PIN: %v %v", ok, err)
	}
	if ok, _ := e.svc.CheckPIN(ctx, stored(t, e, "H"), "old"); !ok {
		t.Fatal("PIN changed by a refused answer")
	}

	if _, err := e.svc.CreateGenericChallenge(ctx, tok, "00000000000000000004", token.ChallengePINReset, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.svc.FinishPINChange(ctx, "00000000000000000004", "H", hash, next); !ok || err != nil {
		t.Fatalf("FinishPINChange: %v %v", ok, err)
	}
	got := stored(t, e, "H")
	if ok, _ := e.svc.CheckPIN(ctx, got, "new"); !ok || got.Info[token.InfoNextPinChange] != token.FormatValidity(next) {
		t.Fatalf("after the change: PIN ok %v next_pin_change %q", ok, got.Info[token.InfoNextPinChange])
	}
	if chs, _ := e.svc.Challenges(ctx, token.ChallengeFilter{TransactionID: "00000000000000000004"}); len(chs) != 0 {
		t.Fatalf("challenge kept: %v", chs)
	}
	// Used once.
	if ok, err := e.svc.FinishPINChange(ctx, "00000000000000000004", "H", hash, time.Time{}); ok || err != nil {
		t.Fatalf("second FinishPINChange: %v %v", ok, err)
	}
	if stored(t, e, "H").Info[token.InfoNextPinChange] == "" {
		t.Fatal("a refused answer removed next_pin_change")
	}
}
