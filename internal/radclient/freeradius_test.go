package radclient_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/radclient"
	"github.com/authsrv/authsrv/internal/testsvc"
)

// TestFreeRADIUS runs the client against Debian's FreeRADIUS, which drops
// requests without a valid Message-Authenticator and signs its answers.
func TestFreeRADIUS(t *testing.T) {
	special := `p@$$ w'o"r\d %{User-Name} ünï€ødé ✓ 日本語`
	long := strings.Repeat("0123456789", 10)
	users := map[string]string{
		"alice":   "secret",
		"special": special,
		"long":    long,
		"max":     strings.Repeat("m", radclient.MaxPasswordLen),
		"jürgen":  "pw",
	}
	s := testsvc.FreeRADIUS(t, users)

	const timeout, retries = 300 * time.Millisecond, 1
	exchange := func(t *testing.T, user, pw string, secret []byte) (radclient.Response, time.Duration, error) {
		t.Helper()
		start := time.Now()
		resp, err := radclient.Exchange(t.Context(), radclient.Request{
			Addr: s.Addr, Secret: secret, Username: user, Password: pw,
			Timeout: timeout, Retries: retries,
		})
		return resp, time.Since(start), err
	}

	for _, tc := range []struct {
		name, user, pw string
		want           radclient.Code
	}{
		{"known user", "alice", "secret", radclient.Accept},
		{"wrong password", "alice", "Secret", radclient.Reject},
		{"password prefix", "alice", "secre", radclient.Reject},
		{"unknown user", "mallory", "secret", radclient.Reject},
		{"special and non-ASCII", "special", special, radclient.Accept},
		{"special, one byte off", "special", special[:len(special)-1], radclient.Reject},
		{"100 characters", "long", long, radclient.Accept},
		{"100 characters, last wrong", "long", long[:99] + "x", radclient.Reject},
		{"128 bytes", "max", strings.Repeat("m", radclient.MaxPasswordLen), radclient.Accept},
		{"non-ASCII user", "jürgen", "pw", radclient.Accept},
		{"empty password", "alice", "", radclient.Reject}, // FreeRADIUS's pap refuses it
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _, err := exchange(t, tc.user, tc.pw, s.Secret)
			if err != nil || resp.Code != tc.want {
				t.Fatalf("got %v, %v; want %v; log:\n%s", resp.Code, err, tc.want, s.Log())
			}
		})
	}

	t.Run("wrong secret", func(t *testing.T) {
		resp, d, err := exchange(t, "alice", "secret", []byte("wrong-secret"))
		if !errors.Is(err, radclient.ErrTimeout) || resp.Code != 0 {
			t.Fatalf("got %v, %v; want ErrTimeout", resp.Code, err)
		}
		if max := timeout*(retries+1) + 500*time.Millisecond; d > max {
			t.Errorf("took %s, more than %s", d, max)
		}
		// FreeRADIUS checks our Message-Authenticator and drops the
		// request: proof that it checks, and that we sign with the secret.
		if !strings.Contains(s.Log(), "invalid Message-Authenticator") {
			t.Errorf("FreeRADIUS did not report the bad Message-Authenticator:\n%s", s.Log())
		}
	})

	t.Run("stopped", func(t *testing.T) {
		s.Stop(t)
		_, d, err := exchange(t, "alice", "secret", s.Secret)
		if !errors.Is(err, radclient.ErrTimeout) {
			t.Fatalf("got %v; want ErrTimeout", err)
		}
		if min := timeout * (retries + 1); d < min {
			t.Errorf("gave up after %s, before the %d tries (%s)", d, retries+1, min)
		}
		t.Log(err)

		s.Start(t)
		resp, _, err := exchange(t, "alice", "secret", s.Secret)
		if err != nil || resp.Code != radclient.Accept {
			t.Fatalf("after Start: got %v, %v; want Accept", resp.Code, err)
		}
	})
}
