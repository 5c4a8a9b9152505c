package main

import (
	"context"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/radclient"
	"github.com/authsrv/authsrv/otp"
)

// freeUDP returns a loopback UDP address that was free a moment ago.
func freeUDP(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	return c.LocalAddr().String()
}

// TestServeRADIUS: "authsrv serve -radius-listen ... -radius-clients FILE"
// answers Access-Requests for a passwd user's HOTP token through the same
// library as HTTP, and stops with the server.
func TestServeRADIUS(t *testing.T) {
	dir := shortDir(t)
	clients := filepath.Join(filepath.Dir(dir), "clients")
	if err := os.WriteFile(clients, []byte("# the NAS\n127.0.0.1 nas-secret realm=example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	udp := freeUDP(t)
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "info",
		"AUTHSRV_RADIUS_LISTEN": udp, "AUTHSRV_RADIUS_CLIENTS": clients}
	ctx, cancel := context.WithCancel(t.Context())
	var out, logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, nil, strings.NewReader(""), &out, &logs, func(k string) string { return env[k] })
	}()
	defer func() { cancel(); <-done }()
	waitFor(t, "serving", func() bool {
		return servingRe.MatchString(out.String()) && strings.Contains(out.String(), "RADIUS on udp")
	})
	if !strings.Contains(out.String(), "authsrv RADIUS on udp "+udp+"\n") {
		t.Errorf("output %q", out.String())
	}
	addr := servingRe.FindStringSubmatch(out.String())[2]
	jwt := adminToken(t, addr, passwordRe.FindStringSubmatch(out.String())[1])

	passwd := filepath.Join(dir, "files", "passwd")
	if err := os.WriteFile(passwd, []byte(fileUsers), 0o600); err != nil {
		t.Fatal(err)
	}
	key := []byte("12345678901234567890")
	for _, c := range []struct {
		path string
		v    url.Values
	}{
		{"/resolver/local", url.Values{"type": {"passwdresolver"}, "fileName": {passwd}}},
		{"/realm/example", url.Values{"resolvers": {"local"}}},
		{"/token/init", url.Values{"type": {"hotp"}, "serial": {"R1"}, "otpkey": {hex.EncodeToString(key)}, "user": {"alice"}, "realm": {"example"}, "pin": {"1234"}}},
	} {
		if code, m := apiCall(t, "POST", addr, c.path, jwt, c.v); code != 200 {
			t.Fatalf("%s: %d %v", c.path, code, m)
		}
	}
	ask := func(pass string) (radclient.Response, error) {
		return radclient.Exchange(t.Context(), radclient.Request{Addr: udp, Secret: []byte("nas-secret"), Username: "alice", Password: pass,
			Timeout: 2 * time.Second, Retries: -1})
	}
	if r, err := ask("1234" + otp.HOTP(key, 0, 6, otp.SHA1)); err != nil || r.Code != radclient.Accept || r.ReplyMessage != "matching 1 tokens" {
		t.Errorf("PIN+OTP: %+v %v", r, err)
	}
	if r, err := ask("1234" + otp.HOTP(key, 0, 6, otp.SHA1)); err != nil || r.Code != radclient.Reject || !strings.Contains(r.ReplyMessage, "wrong otp value") {
		t.Errorf("the same OTP again: %+v %v", r, err)
	}
	// The audit names the NAS and the RADIUS user agent.
	code, m := apiCall(t, "GET", addr, "/audit/?user_agent=authsrv-radius&client=127.0.0.1", jwt, nil)
	count := func() any {
		r, _ := m["result"].(map[string]any)
		v, _ := r["value"].(map[string]any)
		return v["count"]
	}
	if code != 200 || count() != float64(2) {
		t.Errorf("audit: %d %v", code, m)
	}
	if strings.Contains(logs.String(), "nas-secret") || strings.Contains(logs.String(), "1234"+otp.HOTP(key, 0, 6, otp.SHA1)) {
		t.Error("a secret in the log")
	}

	// Stopping the server stops RADIUS and frees its port.
	cancel()
	select {
	case code := <-done:
		done <- code
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	c, err := net.ListenPacket("udp", udp)
	if err != nil {
		t.Errorf("the RADIUS port is still taken: %v", err)
	} else {
		_ = c.Close()
	}
}

// TestServeRADIUSBadFlags: RADIUS flags that cannot work stop the start
// with a message.
func TestServeRADIUSBadFlags(t *testing.T) {
	dir := t.TempDir()
	readable := filepath.Join(dir, "readable")
	if err := os.WriteFile(readable, []byte("127.0.0.1 s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(readable, 0o644)
	private, mapping := filepath.Join(dir, "private"), filepath.Join(dir, "mapping")
	if err := os.WriteFile(private, []byte("127.0.0.1 s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mapping, []byte("serial = Nonsense\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"NoClients", []string{"-radius-listen", "127.0.0.1:0"}, "needs -radius-clients"},
		{"NoListen", []string{"-radius-clients", readable}, "need -radius-listen"},
		{"ReadableSecrets", []string{"-radius-listen", "127.0.0.1:0", "-radius-clients", readable}, "readable by group or others"},
		{"BadMapping", []string{"-radius-listen", "127.0.0.1:0", "-radius-clients", private, "-radius-mapping", mapping}, `unknown attribute "Nonsense"`},
		{"MissingClients", []string{"-radius-listen", "127.0.0.1:0", "-radius-clients", filepath.Join(dir, "none")}, "-radius-clients"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"AUTHSRV_DATA_DIR": shortDir(t), "AUTHSRV_LOG_LEVEL": "disabled"}
			code, _, e := cli(t, env, "", append([]string{"serve", "-listen", "127.0.0.1:0"}, tc.args...)...)
			if code != 1 || !strings.Contains(e, tc.want) {
				t.Errorf("exit %d, stderr %q; want %q", code, e, tc.want)
			}
			if strings.Contains(e, "s3cret") {
				t.Error("the secret in the message")
			}
		})
	}
}
