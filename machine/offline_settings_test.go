package machine_test

import (
	"bytes"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/machine"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

// TestOfflineAppendPINSetting: the token settings' AppendPIN (the system
// setting PrependPin false, read at each use) splits the challenge as
// OTP+PIN and hashes OTP+PIN, without the OfflineConfig flag.
func TestOfflineAppendPINSetting(t *testing.T) {
	st := storetest.Open(t)
	sealer, err := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	h, err := secret.NewHasher(secret.HasherConfig{Params: secret.Params{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}})
	if err != nil {
		t.Fatal(err)
	}
	var appendPIN atomic.Bool
	source := func() *token.Settings {
		s := token.Settings{AppendPIN: appendPIN.Load()}.WithDefaults()
		return &s
	}
	now := func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }
	tokens := token.New(token.Config{Store: st, Sealer: sealer, Hasher: h, Now: now, Source: source})
	alice := user.User{Login: "alice", Realm: "realm1", Resolver: "r1", UID: "1"}
	if _, _, err := tokens.Init(t.Context(), token.InitRequest{Type: "hotp", Serial: "OATH1", Owner: &alice,
		Params: token.Params{"otpkey": rfcKey, "pin": "test"}}); err != nil {
		t.Fatal(err)
	}
	off := machine.NewOffline(machine.OfflineConfig{Tokens: tokens, Rand: rand.Reader, Now: now})
	b := machine.Binding{ID: 1, Serial: "OATH1", Application: machine.OfflineName, Options: map[string]string{"count": "3", "rounds": "5"}}
	get := func() *token.Token {
		tk, err := tokens.Get(t.Context(), "OATH1")
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}

	// PrependPin (the default): PIN first.
	item, ok, err := off.AuthItem(t.Context(), b, get(), machine.AuthItemRequest{Challenge: "test755224"})
	if err != nil || !ok {
		t.Fatalf("AuthItem = %v, %v", ok, err)
	}
	checkValues(t, item["response"].(map[string]string), 0, 3, "test", false, false)

	// PrependPin false: the OTP comes first, and the hashes are of OTP+PIN.
	appendPIN.Store(true)
	item, ok, err = off.AuthItem(t.Context(), b, get(), machine.AuthItemRequest{Challenge: "969429test"})
	if err != nil || !ok {
		t.Fatalf("AuthItem = %v, %v", ok, err)
	}
	checkValues(t, item["response"].(map[string]string), 3, 6, "test", true, false)
}
