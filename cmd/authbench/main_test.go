package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestParseBaseURL(t *testing.T) {
	cases := []struct {
		raw     string
		want    string // the normalised URL; "" = refused
		errText string
	}{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080", ""},
		{"http://127.8.9.10:18181", "http://127.8.9.10:18181", ""},
		{"https://localhost:8443", "https://localhost:8443", ""},
		{"http://LOCALHOST", "http://LOCALHOST", ""},
		{"http://localhost.:8080", "http://localhost.:8080", ""},
		{"http://[::1]:8080", "http://[::1]:8080", ""},
		{"http://[::ffff:127.0.0.1]:8080", "http://[::ffff:127.0.0.1]:8080", ""},
		{"http://127.0.0.1:8080/pi/", "http://127.0.0.1:8080/pi", ""},
		{"http://10.0.0.1:8080", "", "not a loopback address"},
		{"http://192.168.1.1", "", "not a loopback address"},
		{"http://0.0.0.0:8080", "", "not a loopback address"},
		{"http://[::]:8080", "", "not a loopback address"},
		{"http://example.com", "", "not a loopback address"},
		{"http://localhost.example.com", "", "not a loopback address"},
		{"http://127.0.0.1.nip.io", "", "not a loopback address"},
		{"http://2130706433", "", "not a loopback address"}, // 127.0.0.1 as a number: a name to us
		{"ftp://127.0.0.1", "", "scheme"},
		{"127.0.0.1:8080", "", "-url"},
		{"http://admin:pw@127.0.0.1:8080", "", "credentials"},
		{"http://127.0.0.1:8080/?x=1", "", "without query"},
		{"http://127.0.0.1:0", "", "bad port"},
		{"http://:8080", "", "no host"},
		{"http://127.0.0.1:99999", "", "bad port"},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			u, err := parseBaseURL(tc.raw)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("accepted as %s, want an error", u)
				}
				if !strings.Contains(err.Error(), tc.errText) {
					t.Errorf("error %q lacks %q", err, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.String() != tc.want {
				t.Errorf("got %s, want %s", u, tc.want)
			}
		})
	}
}

func TestParseBaseURLHidesCredentials(t *testing.T) {
	_, err := parseBaseURL("http://admin:s3cret@127.0.0.1")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error %v: want a refusal without the password", err)
	}
}

func noEnv(string) string { return "" }

func TestParseFlags(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		errText string // "" = accepted
		check   func(t *testing.T, c *config)
	}{
		{name: "defaults with env password", env: map[string]string{envAdminPassword: "pw"}, check: func(t *testing.T, c *config) {
			if c.base.String() != "http://127.0.0.1:8080" || c.users != 100 || c.clients != 8 || c.duration != 30*time.Second ||
				c.mode != modeValid || c.realm != "bench" || c.prefix != "bench" || c.admin != "admin" || c.password != "pw" ||
				c.timeout != 10*time.Second || c.kdfRounds != 5 {
				t.Errorf("defaults: %+v", c)
			}
		}},
		{name: "flag password wins", args: []string{"-password", "flag"}, env: map[string]string{envAdminPassword: "env"}, check: func(t *testing.T, c *config) {
			if c.password != "flag" {
				t.Errorf("password from %q", c.password)
			}
		}},
		{name: "no password", errText: envAdminPassword},
		{name: "skip-setup needs no password", args: []string{"-skip-setup", "-state", "/tmp/s"}},
		{name: "skip-setup needs state", args: []string{"-skip-setup"}, errText: "-state"},
		{name: "setup-only needs state", args: []string{"-setup-only", "-password", "x"}, errText: "-state"},
		{name: "both setup flags", args: []string{"-setup-only", "-skip-setup", "-state", "s", "-password", "x"}, errText: "exclude"},
		{name: "remote url", args: []string{"-url", "http://10.1.2.3", "-password", "x"}, errText: "not a loopback"},
		{name: "bad mode", args: []string{"-mode", "fast", "-password", "x"}, errText: "-mode"},
		{name: "pin mode needs pin", args: []string{"-mode", "pin", "-password", "x"}, errText: envPIN},
		{name: "pin from env", args: []string{"-mode", "pin", "-password", "x"}, env: map[string]string{envPIN: "1234"}, check: func(t *testing.T, c *config) {
			if c.pin != "1234" {
				t.Errorf("pin %q", c.pin)
			}
		}},
		{name: "valid mode refuses pin", args: []string{"-pin", "1", "-password", "x"}, errText: "without a PIN"},
		{name: "wrong mode without pin", args: []string{"-mode", "wrong", "-password", "x"}},
		{name: "zero users", args: []string{"-users", "0", "-password", "x"}, errText: "-users"},
		{name: "zero clients", args: []string{"-clients", "0", "-password", "x"}, errText: "-clients"},
		{name: "zero duration", args: []string{"-duration", "0s", "-password", "x"}, errText: "-duration"},
		{name: "zero kdf rounds", args: []string{"-kdf-rounds", "0", "-password", "x"}, errText: "-kdf-rounds 0"},
		{name: "bad prefix", args: []string{"-prefix", "a:b", "-password", "x"}, errText: "-prefix"},
		{name: "bad realm", args: []string{"-realm", "a/b", "-password", "x"}, errText: "-realm"},
		{name: "realm lower-cased", args: []string{"-realm", "BenchR", "-password", "x"}, check: func(t *testing.T, c *config) {
			if c.realm != "benchr" || !c.realmSet {
				t.Errorf("realm %q set %v", c.realm, c.realmSet)
			}
		}},
		{name: "extra argument", args: []string{"-password", "x", "extra"}, errText: "unexpected argument"},
		{name: "negative pid", args: []string{"-pid", "-1", "-password", "x"}, errText: "-pid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			c, err := parseFlags(tc.args, &stderr, env(tc.env))
			if tc.errText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("err = %v, want one with %q", err, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, c)
			}
		})
	}
}

func TestRunUsageErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-url", "http://8.8.8.8", "-password", "topsecret"}, &out, &errOut, noEnv)
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(errOut.String(), "not a loopback address") || strings.Contains(errOut.String(), "topsecret") {
		t.Errorf("stderr: %s", errOut.String())
	}
	if code := run(context.Background(), []string{"-h"}, &out, &errOut, noEnv); code != exitOK {
		t.Errorf("-h: exit %d", code)
	}
}
