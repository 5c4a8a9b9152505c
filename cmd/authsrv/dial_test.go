package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/testsvc"
)

// sendTestMail asks the server at addr to send a test mail through the
// SMTP server on 127.0.0.1:port and returns the result's value and
// detail message.
func sendTestMail(t *testing.T, addr, jwt string, port int) (any, string) {
	t.Helper()
	status, m := apiCall(t, http.MethodPost, addr, "/smtpserver/send_test_email", jwt, url.Values{
		"identifier": {"m"}, "server": {"127.0.0.1"}, "port": {fmt.Sprint(port)}, "sender": {"authsrv@example.org"},
		"recipient": {"admin@example.org"}, "timeout": {"5"},
	})
	if status != http.StatusOK {
		t.Fatalf("send_test_email: %d %v", status, m)
	}
	result, _ := m["result"].(map[string]any)
	detail, _ := m["detail"].(map[string]any)
	msg, _ := detail["message"].(string)
	return result["value"], msg
}

// TestServeAllowDialDefault is S8 against the binary: without -allow-dial
// a test mail to an SMTP server on a loopback port is refused with the
// rule's message, and the port sees no connection.
func TestServeAllowDialDefault(t *testing.T) {
	ln := testsvc.NewCountingListener(t)
	dir := shortDir(t)
	addr, jwt := serveFor(t, map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled"})
	port := ln.Port()
	v, msg := sendTestMail(t, addr, jwt, port)
	want := fmt.Sprintf("connection to 127.0.0.1:%d refused: the address is in a range the server does not dial (loopback); allow it with -allow-dial", port)
	if v != false || !strings.Contains(msg, want) {
		t.Errorf("send_test_email = %v, %q; want false and %q", v, msg, want)
	}
	if n := ln.Accepted(); n != 0 {
		t.Errorf("the SMTP port saw %d connections", n)
	}
}

// TestServeAllowDialGiven: AUTHSRV_ALLOW_DIAL with loopback ranges lets
// the same test mail through.
func TestServeAllowDialGiven(t *testing.T) {
	sink := testsvc.NewSMTPSink(t)
	dir := shortDir(t)
	addr, jwt := serveFor(t, map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled",
		"AUTHSRV_ALLOW_DIAL": "127.0.0.0/8, ::1/128"})
	if v, msg := sendTestMail(t, addr, jwt, sink.Port); v != true || len(sink.Messages()) != 1 {
		t.Errorf("send_test_email = %v, %q; %d messages", v, msg, len(sink.Messages()))
	}
}

// TestServeAllowDialBadInput: a value that is not a CIDR prefix, an
// address or "unix" stops the start with a message naming it.
func TestServeAllowDialBadInput(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"bits", nil, []string{"-allow-dial", "10.0.0.0/33"}, []string{`-allow-dial "10.0.0.0/33" is not a CIDR prefix`}},
		{"word", nil, []string{"-allow-dial", "127.0.0.0/8", "-allow-dial", "abc"}, []string{`-allow-dial "abc" is neither a CIDR prefix`}},
		{"two in the environment", map[string]string{"AUTHSRV_ALLOW_DIAL": "fd00::/8,10.0.0.0/33,abc"}, nil,
			[]string{`"10.0.0.0/33"`, `"abc"`}},
		{"empty element", map[string]string{"AUTHSRV_ALLOW_DIAL": "10.0.0.0/8,,::1"}, nil, []string{"AUTHSRV_ALLOW_DIAL", "empty address range"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := shortDir(t)
			env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled"}
			for k, v := range tc.env {
				env[k] = v
			}
			code, out, errs := cli(t, env, "", append([]string{"serve"}, tc.args...)...)
			if code == 0 || strings.Contains(out, "serving") {
				t.Errorf("code %d, stdout %q", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr %q does not contain %q", errs, w)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "authsrv.db")); err == nil {
				t.Error("the server opened its data directory despite the bad range")
			}
		})
	}
}
