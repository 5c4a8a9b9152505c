package main

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store/storetest"
)

// TestAgainstServer runs the driver against the real server in-process:
// setup of 5 users, then 2 s of load with 2 clients in every mode, all on
// the same users and serials.
func TestAgainstServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real server for several seconds")
	}
	key := bytes.Repeat([]byte{0x5a}, 32)
	s, err := authsrv.New(
		authsrv.WithStore(storetest.Open(t)),
		authsrv.WithEncKey(key),
		authsrv.WithJWTKey(key),
		authsrv.WithKDFParams(authsrv.KDFParams{Time: 1, Memory: 1024, Threads: 1, KeyLen: 32, SaltLen: 16}),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const adminPW = "bench-admin-pw"
	if err := s.Admins().Add(t.Context(), "admin", adminPW); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(s))
	t.Cleanup(srv.Close)

	const pin = "Kp%9q"
	cases := []struct {
		name string
		mode string
		pin  string
	}{
		{"valid", modeValid, ""},
		{"pin", modePIN, pin},
		{"wrong", modeWrong, pin},
		// The same serials again without a PIN: the setup must clear the
		// PIN and the fail counters the runs before left.
		{"valid again", modeValid, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{envAdminPassword: adminPW, envPIN: tc.pin}
			sum, code, out := runJSON(t, t.Context(), env, "-url", srv.URL, "-users", "5", "-clients", "2",
				"-duration", "2s", "-mode", tc.mode, "-passwd-dir", t.TempDir())
			t.Logf("%s: %d requests, %.1f req/s, p50 %.3f ms, p99 %.3f ms",
				tc.mode, sum.Requests, sum.RequestsPerSec, sum.LatencyMS.P50, sum.LatencyMS.P99)
			if code != exitOK {
				t.Errorf("exit %d\n%s", code, out)
			}
			if sum.Successes == 0 || sum.Errors.Total != 0 || sum.Successes != sum.Requests {
				t.Errorf("summary %+v\n%s", sum, out)
			}
			for _, secret := range []string{adminPW, "Kp%9q", "eyJ"} {
				if strings.Contains(out, secret) {
					t.Errorf("the output shows a secret (%q):\n%s", secret, out)
				}
			}
		})
	}
}
