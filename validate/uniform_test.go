package validate_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/validate"
)

// countingHasher counts the key derivations of the hasher it wraps (a
// Verify that fails before deriving counts too: none of the cases below
// makes one).
type countingHasher struct {
	h *secret.Hasher
	n atomic.Int64
}

func (c *countingHasher) Hash(ctx context.Context, pw string) (string, error) {
	c.n.Add(1)
	return c.h.Hash(ctx, pw)
}

func (c *countingHasher) Verify(ctx context.Context, enc, pw string) (bool, bool, error) {
	c.n.Add(1)
	return c.h.Verify(ctx, enc, pw)
}

func (c *countingHasher) Dummy(ctx context.Context, pw string) {
	c.n.Add(1)
	c.h.Dummy(ctx, pw)
}

// TestOneDerivationPerRefusal: every refusal of check and
// triggerchallenge costs exactly one key derivation, whether or not a PIN
// was checked (the dummy runs only where none was), with and without
// hide_specific_error_message; a success costs no more than its own PIN
// check. The timing test of the server (S4) measures what this counts.
func TestOneDerivationPerRefusal(t *testing.T) {
	e := newEnv(t, token.Settings{})
	e.enroll(t, "hotp", "P1", "alice", "realm1", rfcKey, "pin")
	e.enroll(t, "hotp", "N1", "dave", "realm2", keyB, "")
	// The refusals below must not lock the tokens the successes use.
	e.setMaxFail(t, "P1", 100)
	e.setMaxFail(t, "N1", 100)
	e.enroll(t, "hotp", "D1", "carol", "realm1", keyC, "pin")
	if _, err := e.tokens.SetActive(t.Context(), "D1", false); err != nil {
		t.Fatal(err)
	}
	e.enroll(t, "spass", "U1", "", "", "", "pin")
	e.enroll(t, "hotp", "R1", "alice", "realm2", keyC, "pin")
	if err := e.tokens.Revoke(t.Context(), "R1"); err != nil {
		t.Fatal(err)
	}
	ch := &countingHasher{h: e.hasher}
	tokens := token.New(token.Config{Store: e.st, Sealer: e.sealer, Hasher: ch, Now: e.clk.Now})
	v := validate.New(validate.Config{Tokens: tokens, Realms: e.realms, Policies: e.pol, Now: e.clk.Now, NodeName: "n1"})

	type tc struct {
		name    string
		r       validate.Request
		trigger bool
		value   bool
		errNum  int // 0: no error
		kdf     int64
	}
	run := func(t *testing.T, cases []tc) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				before := ch.n.Load()
				var res validate.Response
				var err error
				if c.trigger {
					res, err = v.Trigger(t.Context(), c.r)
				} else {
					res, err = v.Check(t.Context(), c.r)
				}
				got := ch.n.Load() - before
				num := 0
				if err != nil {
					num = -1
					if ae, ok := err.(interface{ Number() int }); ok {
						num = ae.Number()
					}
				}
				if num != c.errNum || (err == nil && res.Value != c.value) {
					t.Fatalf("value %v message %q error %v (number %d), want value %v error number %d", res.Value, res.Message, err, num, c.value, c.errNum)
				}
				if got != c.kdf {
					t.Errorf("%d key derivations, want %d", got, c.kdf)
				}
			})
		}
	}
	refusals := func(noUser int) []tc {
		return []tc{
			{name: "unknown user", r: validate.Request{User: "eve", Pass: "pin123456"}, errNum: noUser, kdf: 1},
			{name: "unknown realm", r: validate.Request{User: "alice", Realm: "nowhere", Pass: "pin123456"}, errNum: noUser, kdf: 1},
			{name: "user without tokens", r: validate.Request{User: "bob", Pass: "pin123456"}, kdf: 1},
			{name: "disabled token", r: validate.Request{User: "carol", Pass: "pin" + hotpAt(t, keyC, 0)}, kdf: 1},
			{name: "revoked token", r: validate.Request{User: "alice", Realm: "realm2", Pass: "pin123456"}, errNum: 1007, kdf: 1},
			{name: "wrong PIN", r: validate.Request{User: "alice", Pass: "nip654321"}, kdf: 1},
			{name: "wrong PIN right OTP", r: validate.Request{User: "alice", Pass: "nip" + rfcHOTP[0]}, kdf: 1},
			{name: "wrong OTP right PIN", r: validate.Request{User: "alice", Pass: "pin123456"}, kdf: 1},
			{name: "token without PIN wrong OTP", r: validate.Request{User: "dave", Realm: "realm2", Pass: "123456"}, kdf: 1},
			{name: "pass shorter than the OTP", r: validate.Request{User: "alice", Pass: "12"}, kdf: 1},
			{name: "unknown serial", r: validate.Request{Serial: "NOPE", Pass: "pin123456"}, errNum: 601, kdf: 1},
			{name: "serial of another user", r: validate.Request{User: "bob", Serial: "P1", Pass: "pin123456"}, errNum: 905, kdf: 1},
			{name: "unknown challenge", r: validate.Request{User: "alice", TransactionID: "12345678901234567890", Pass: "123456"}, kdf: 1},
			{name: "trigger for an unknown user", r: validate.Request{User: "eve"}, trigger: true, errNum: 905, kdf: 1},
			{name: "trigger for a user without tokens", r: validate.Request{User: "bob"}, trigger: true, kdf: 1},
		}
	}
	t.Run("refusals", func(t *testing.T) { run(t, refusals(904)) })
	e.policy(t, "hide", "hide_specific_error_message")
	t.Run("hide_specific_error_message", func(t *testing.T) { run(t, refusals(403)) })
	t.Run("successes", func(t *testing.T) {
		run(t, []tc{
			{name: "right PIN and OTP", r: validate.Request{User: "alice", Pass: "pin" + rfcHOTP[0]}, value: true, kdf: 1},
			{name: "token without PIN", r: validate.Request{User: "dave", Realm: "realm2", Pass: hotpAt(t, keyB, 0)}, value: true, kdf: 0},
			{name: "unassigned spass by serial", r: validate.Request{Serial: "U1", Pass: "pin"}, value: true, kdf: 1},
		})
	})
}
