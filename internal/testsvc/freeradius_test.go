package testsvc_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/radclient"
	"github.com/authsrv/authsrv/internal/testsvc"
)

func TestFreeRADIUS(t *testing.T) {
	users := map[string]string{
		"alice":       "secret",
		`o'brien "x"`: `q'u"o\te %{User-Name} ${x} # ;`,
		"jürgen":      "pässwörd €✓ 日本",
	}
	start := time.Now()
	s := testsvc.FreeRADIUS(t, users)
	t.Logf("FreeRADIUS ready in %s on %s", time.Since(start), s.Addr)

	exchange := func(t *testing.T, user, pw string, secret []byte) (radclient.Response, error) {
		t.Helper()
		return radclient.Exchange(t.Context(), radclient.Request{
			Addr: s.Addr, Secret: secret, Username: user, Password: pw,
			Timeout: 300 * time.Millisecond, Retries: -1,
		})
	}
	for user, pw := range users {
		t.Run("accept "+user, func(t *testing.T) {
			resp, err := exchange(t, user, pw, s.Secret)
			if err != nil || resp.Code != radclient.Accept {
				t.Fatalf("got %v, %v; want Access-Accept; log: %s", resp.Code, err, s.Log())
			}
			resp, err = exchange(t, user, pw+"x", s.Secret)
			if err != nil || resp.Code != radclient.Reject {
				t.Fatalf("wrong password: got %v, %v; want Access-Reject", resp.Code, err)
			}
		})
	}
	t.Run("wrong secret dropped", func(t *testing.T) {
		_, err := exchange(t, "alice", "secret", []byte("not-the-secret"))
		if !errors.Is(err, radclient.ErrTimeout) {
			t.Fatalf("got %v, want ErrTimeout", err)
		}
		if !strings.Contains(s.Log(), "Message-Authenticator") {
			t.Errorf("FreeRADIUS did not log the bad Message-Authenticator: %s", s.Log())
		}
	})
	t.Run("stop and start", func(t *testing.T) {
		s.Stop(t)
		if s.Running() {
			t.Fatal("Running after Stop")
		}
		if _, err := exchange(t, "alice", "secret", s.Secret); !errors.Is(err, radclient.ErrTimeout) {
			t.Fatalf("stopped: got %v, want ErrTimeout", err)
		}
		s.Start(t)
		if resp, err := exchange(t, "alice", "secret", s.Secret); err != nil || resp.Code != radclient.Accept {
			t.Fatalf("restarted: got %v, %v", resp.Code, err)
		}
	})
}
