package subscription_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/subscription"
)

func intp(n int) *int { return &n }

func day(s string) time.Time {
	t, err := time.Parse(subscription.DateFormat, s)
	if err != nil {
		panic(err)
	}
	return t
}

func sample() subscription.Subscription {
	return subscription.Subscription{
		Application: "privacyidea", ForName: "Example Corp", ForEmail: "it@example.com",
		ByName: "Vendor GmbH", DateFrom: day("2026-01-01"), DateTill: day("2027-01-01"),
		NumUsers: intp(100), NumTokens: intp(100), NumClients: intp(0), Level: "gold",
	}
}

func signed(t *testing.T, sub subscription.Subscription, key crypto.Signer) []byte {
	t.Helper()
	sig, err := subscription.Sign(sub, key)
	if err != nil {
		t.Fatal(err)
	}
	sub.Signature = sig
	return subscription.Format(sub)
}

func wantCode(t *testing.T, err error, code apierr.Code, fragment string) {
	t.Helper()
	var ae *apierr.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v: want an apierr of code %d", err, code)
	}
	if ae.Code != code || !strings.Contains(ae.Error(), fragment) {
		t.Fatalf("error %q (code %d): want code %d containing %q", ae.Error(), ae.Code, code, fragment)
	}
}

func TestSignedTextIsCanonical(t *testing.T) {
	sub := sample()
	want := "authsrv-subscription-v1\napplication=privacyidea\nfor_name=Example Corp\nfor_email=it@example.com\n" +
		"by_name=Vendor GmbH\ndate_from=2026-01-01\ndate_till=2027-01-01\nnum_users=100\nnum_tokens=100\nnum_clients=0\nlevel=gold\n"
	if got := string(subscription.SignedText(sub)); got != want {
		t.Fatalf("canonical text:\n%s\nwant:\n%s", got, want)
	}
}

func TestSignAndVerify(t *testing.T) {
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  crypto.Signer
	}{{"ed25519", edKey}, {"rsa", rsaKey}} {
		t.Run(tc.name, func(t *testing.T) {
			file := signed(t, sample(), tc.key)
			sub, err := subscription.Parse(file)
			if err != nil {
				t.Fatalf("parse %s: %v", file, err)
			}
			if err := subscription.Verify(sub, tc.key.Public()); err != nil {
				t.Fatalf("verify: %v", err)
			}
			// Reformatted YAML: other order, quotes, comments.
			lines := strings.Split(strings.TrimSpace(string(file)), "\n")
			var b strings.Builder
			b.WriteString("# a comment\n")
			for i := len(lines) - 1; i >= 0; i-- {
				name, value, _ := strings.Cut(lines[i], ": ")
				if name == "for_name" {
					value = `"Example Corp"`
				}
				b.WriteString(name + ":   " + value + "\n")
			}
			re, err := subscription.Parse([]byte(b.String()))
			if err != nil {
				t.Fatalf("parse reformatted: %v\n%s", err, b.String())
			}
			if err := subscription.Verify(re, tc.key.Public()); err != nil {
				t.Fatalf("verify reformatted: %v", err)
			}
			// Any changed, added or removed field breaks it.
			for _, change := range []func(*subscription.Subscription){
				func(s *subscription.Subscription) { s.NumTokens = intp(1000) },
				func(s *subscription.Subscription) { s.DateTill = day("2030-01-01") },
				func(s *subscription.Subscription) { s.ForComment = "extra" },
				func(s *subscription.Subscription) { s.Level = "" },
				func(s *subscription.Subscription) { s.Application = "privacyidea-cp" },
			} {
				tampered := sub
				change(&tampered)
				wantCode(t, subscription.Verify(tampered, tc.key.Public()), apierr.Subscription, "does not match")
			}
		})
	}
	t.Run("wrong key", func(t *testing.T) {
		other, _, _ := ed25519.GenerateKey(rand.Reader)
		sub, err := subscription.Parse(signed(t, sample(), edKey))
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, subscription.Verify(sub, other), apierr.Subscription, "does not match")
		wantCode(t, subscription.Verify(sub, &rsaKey.PublicKey), apierr.Subscription, "configured key verifies")
		wantCode(t, subscription.Verify(sub, nil), apierr.Subscription, "No subscription key")
		sub.Signature = ""
		wantCode(t, subscription.Verify(sub, edKey.Public()), apierr.Subscription, "no signature")
		sub.Signature = "ed25519:not base64!"
		wantCode(t, subscription.Verify(sub, edKey.Public()), apierr.Subscription, "base64")
	})
}

func TestParseRefuses(t *testing.T) {
	good := "application: privacyidea\ndate_from: 2026-01-01\ndate_till: 2027-01-01\nsignature: ed25519:AAAA\n"
	if _, err := subscription.Parse([]byte(good)); err != nil {
		t.Fatalf("good file: %v", err)
	}
	for _, tc := range []struct {
		name, file, want string
	}{
		{"empty", "", "empty"},
		{"not yaml", "application: [unclosed\n", "not YAML"},
		{"list", "- a\n- b\n", "mapping"},
		{"no application", "date_from: 2026-01-01\ndate_till: 2027-01-01\n", `"application" is missing`},
		{"empty application", "application: ''\ndate_from: 2026-01-01\ndate_till: 2027-01-01\n", `"application" is missing`},
		{"no date_till", "application: x\ndate_from: 2026-01-01\n", `"date_till" is missing`},
		{"till before from", "application: x\ndate_from: 2027-01-01\ndate_till: 2026-01-01\n", "before date_from"},
		{"bad date", "application: x\ndate_from: 01.01.2026\ndate_till: 2027-01-01\n", "YYYY-MM-DD"},
		{"bad number", "application: x\ndate_from: 2026-01-01\ndate_till: 2027-01-01\nnum_tokens: -5\n", "whole number"},
		{"unknown field", "application: x\ndate_from: 2026-01-01\ndate_till: 2027-01-01\nnum_tokenz: 5\n", "unknown field"},
		{"twice", "application: x\napplication: y\ndate_from: 2026-01-01\ndate_till: 2027-01-01\n", "twice"},
		{"line break", "application: x\nfor_address: \"a\\nb\"\ndate_from: 2026-01-01\ndate_till: 2027-01-01\n", "line break"},
		{"nested", "application: x\nfor_name: {a: b}\ndate_from: 2026-01-01\ndate_till: 2027-01-01\n", "single value"},
		{"huge", "application: " + strings.Repeat("x", subscription.MaxFileSize) + "\n", "larger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := subscription.Parse([]byte(tc.file))
			wantCode(t, err, apierr.Parameter, tc.want)
		})
	}
}

func TestParsePublicKeyPEM(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	key, err := subscription.ParsePublicKeyPEM(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if err != nil || !pub.Equal(key) {
		t.Fatalf("PKIX Ed25519 key: %v %v", key, err)
	}
	privDER, _ := x509.MarshalPKCS8PrivateKey(priv)
	if _, err := subscription.ParsePublicKeyPEM(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})); err == nil || !strings.Contains(err.Error(), "private key") {
		t.Fatalf("private key: %v", err)
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	if _, err := subscription.ParsePublicKeyPEM(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&small.PublicKey)})); err == nil {
		t.Fatal("a 1024-bit RSA key was accepted")
	}
	if _, err := subscription.ParsePublicKeyPEM([]byte("nothing")); err == nil {
		t.Fatal("no PEM accepted")
	}
}

func TestServiceAddListDelete(t *testing.T) {
	ctx := t.Context()
	st := storetest.Open(t)
	_, key, _ := ed25519.GenerateKey(rand.Reader)

	if _, err := subscription.New(subscription.Config{Store: st}).Add(ctx, signed(t, sample(), key)); !errors.Is(err, subscription.ErrNoKey) {
		t.Fatalf("upload without a key: %v", err)
	}
	svc := subscription.New(subscription.Config{Store: st, Key: key.Public()})
	hooked := 0
	hook := func(store.Tx) error { hooked++; return nil }
	sub, err := svc.Add(ctx, signed(t, sample(), key), hook)
	if err != nil || sub.ID != 1 || hooked != 1 {
		t.Fatalf("add: %+v %v hooked %d", sub, err, hooked)
	}
	cp := sample()
	cp.Application = "privacyidea-cp"
	if _, err := svc.Add(ctx, signed(t, cp, key)); err != nil {
		t.Fatal(err)
	}
	// A new file for the same application replaces its row, same id.
	renewed := sample()
	renewed.DateTill = day("2028-01-01")
	if sub, err := svc.Add(ctx, signed(t, renewed, key)); err != nil || sub.ID != 1 {
		t.Fatalf("replace: %+v %v", sub, err)
	}
	// A tampered file is refused and changes nothing.
	tampered := strings.Replace(string(signed(t, sample(), key)), "num_tokens: 100", "num_tokens: 100000", 1)
	if _, err := svc.Add(ctx, []byte(tampered), hook); !errors.Is(err, subscription.ErrBadSignature) || hooked != 1 {
		t.Fatalf("tampered: %v hooked %d", err, hooked)
	}
	list, err := svc.List(ctx, "")
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list[0].Application != "privacyidea" || !list[0].DateTill.Equal(day("2028-01-01")) || *list[0].NumTokens != 100 || list[0].Signature == "" {
		t.Fatalf("stored row: %+v", list[0])
	}
	if only, _ := svc.List(ctx, "PRIVACYIDEA-CP"); len(only) != 1 || only[0].ID != 2 {
		t.Fatalf("filtered list: %+v", only)
	}
	if id, err := svc.Delete(ctx, "privacyidea-cp", hook); id != 2 || err != nil || hooked != 2 {
		t.Fatalf("delete: %d %v hooked %d", id, err, hooked)
	}
	if id, err := svc.Delete(ctx, "privacyidea-cp", hook); id != -1 || err != nil || hooked != 2 {
		t.Fatalf("delete again: %d %v hooked %d", id, err, hooked)
	}
}

func TestEvaluate(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	mk := func(till string, tokens, users *int) *subscription.Subscription {
		s := sample()
		s.DateTill, s.NumTokens, s.NumUsers = day(till), tokens, users
		return &s
	}
	for _, tc := range []struct {
		name  string
		sub   *subscription.Subscription
		users int
		state subscription.State
		days  int
		warn  string
	}{
		{"none", nil, 500, subscription.None, 0, ""},
		{"valid", mk("2027-01-01", intp(10), nil), 10, subscription.Valid, 213, ""},
		{"expiring", mk("2026-07-01", intp(10), nil), 3, subscription.Expiring, 29, ""},
		{"exceeded tokens", mk("2027-01-01", intp(10), nil), 11, subscription.Exceeded, 213, "11 users have an active token, the subscription allows 10"},
		{"exceeded users", mk("2027-01-01", nil, intp(5)), 6, subscription.Exceeded, 213, "allows 5"},
		{"expired", mk("2026-05-01", intp(10), nil), 50, subscription.Expired, -32, "expired on 2026-05-01"},
		{"expired today", mk("2026-06-01", intp(10), nil), 1, subscription.Expired, -1, "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := subscription.Evaluate("privacyidea", tc.sub, subscription.Usage{ActiveUsers: tc.users}, now)
			if st.State != tc.state || (tc.sub != nil && st.DaysLeft != tc.days) {
				t.Fatalf("state %s days %d, want %s %d", st.State, st.DaysLeft, tc.state, tc.days)
			}
			if (tc.warn == "") != (st.Warning == "") || !strings.Contains(st.Warning, tc.warn) {
				t.Fatalf("warning %q, want %q", st.Warning, tc.warn)
			}
		})
	}
	if d := subscription.Timedelta(*mk("2026-06-03", nil, nil), now); d != -2 {
		t.Fatalf("timedelta %d, want -2", d)
	}
	over := subscription.Overview([]subscription.Subscription{*mk("2027-01-01", nil, nil)}, subscription.Usage{}, now)
	if len(over) != 1+len(subscription.DashboardPlugins) || over[0].Application != "privacyidea" || over[0].State != subscription.Valid {
		t.Fatalf("overview: %+v", over[0])
	}
	for _, st := range over[1:] {
		// privacyidea-radius counts against the server's subscription.
		if want := map[bool]subscription.State{true: subscription.Valid, false: subscription.None}[st.Application == "privacyidea-radius"]; st.State != want {
			t.Fatalf("%s: %s, want %s", st.Application, st.State, want)
		}
	}
}

// FuzzParse: no input panics the parser, and a file that parses writes
// back (Format) to one with the same signed text.
func FuzzParse(f *testing.F) {
	f.Add([]byte("application: privacyidea\ndate_from: 2026-01-01\ndate_till: 2027-01-01\nnum_tokens: 5\nsignature: ed25519:AAAA\n"))
	f.Add([]byte("application: 'yes'\nfor_name: \"a: b # c\"\ndate_from: 2026-01-01\ndate_till: 2026-01-01\nlevel: ~\n"))
	f.Add([]byte("- x\n"))
	f.Add([]byte("a: &x [1]\nb: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sub, err := subscription.Parse(data)
		if err != nil {
			return
		}
		again, err := subscription.Parse(subscription.Format(sub))
		if err != nil {
			t.Fatalf("formatted file does not parse: %v\n%s", err, subscription.Format(sub))
		}
		if a, b := subscription.SignedText(sub), subscription.SignedText(again); string(a) != string(b) || sub.Signature != again.Signature {
			t.Fatalf("round trip changed the fields:\n%s\n%s", a, b)
		}
	})
}

func TestPluginOf(t *testing.T) {
	for ua, want := range map[string]string{
		"FreeRADIUS": "privacyidea-radius", "PAM/1.1.0": "privacyidea-pam", "pam-passkey/1.0.0 ComputerName/x": "pam-passkey",
		"privacyidea-cp/3.6": "privacyidea-cp", "privacyIDEA-Keycloak/1.5": "privacyidea-keycloak", "curl/8.0": "", "": "",
	} {
		if got := subscription.PluginOf(ua); got != want {
			t.Errorf("PluginOf(%q) = %q, want %q", ua, got, want)
		}
	}
}
