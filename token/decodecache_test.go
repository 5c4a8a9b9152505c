package token_test

import (
	"testing"

	"github.com/authsrv/authsrv/token"
)

// The decoded-record cache never answers for bytes it was not decoded
// from: a rolled-back write, a second store with the same serial and a
// caller changing a returned token leave what Get returns as stored.
func TestDecodeCacheFollowsTheStore(t *testing.T) {
	ctx := t.Context()
	a, b := newEnv(t), newEnv(t)
	a.initToken(t, "hotp", "SAME", token.Params{"otpkey": rfcKey, "description": "in a"})
	b.initToken(t, "hotp", "SAME", token.Params{"otpkey": rfcKey, "description": "in b"})
	for _, tc := range []struct {
		e    *env
		want string
	}{{a, "in a"}, {b, "in b"}, {a, "in a"}} {
		got, err := tc.e.svc.Get(ctx, "SAME")
		if err != nil || got.Description != tc.want {
			t.Fatalf("Get = %v, %v; want description %q", got, err, tc.want)
		}
		got.Description = "changed by the caller"
		got.Info["x"] = "y"
	}
	if _, err := a.svc.Update(ctx, "SAME", false, func(tok *token.Token) error { tok.Description = "committed"; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := a.svc.Get(ctx, "SAME")
	if err != nil || got.Description != "committed" || got.Info["x"] != "" {
		t.Fatalf("after the update: %+v, %v", got, err)
	}
}
