package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/otp"
)

// TestServeAutoResync: -auto-resync (here AUTHSRV_AUTO_RESYNC) switches
// privacyIDEA's AutoResync on in the running server: two consecutive
// values far outside the count window resynchronise an HOTP token; without
// it they are both refused.
func TestServeAutoResync(t *testing.T) {
	key := []byte("12345678901234567890")
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			env := map[string]string{"AUTHSRV_DATA_DIR": shortDir(t), "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled"}
			if on {
				env["AUTHSRV_AUTO_RESYNC"] = "true"
			}
			ctx, cancel := context.WithCancel(t.Context())
			var out syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- run(ctx, nil, strings.NewReader(""), &out, io.Discard, func(k string) string { return env[k] })
			}()
			defer func() { cancel(); <-done }()
			waitFor(t, "serving", func() bool { return servingRe.MatchString(out.String()) })
			addr := servingRe.FindStringSubmatch(out.String())[2]
			tok := adminToken(t, addr, passwordRe.FindStringSubmatch(out.String())[1])
			post := func(path string, v url.Values, jwt string) map[string]any {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(v.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if jwt != "" {
					req.Header.Set("Authorization", jwt)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = resp.Body.Close() }()
				var m map[string]any
				if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
					t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
				}
				return m
			}
			post("/token/init", url.Values{"type": {"hotp"}, "serial": {"AR1"}, "otpkey": {"3132333435363738393031323334353637383930"}}, tok)
			value := func(counter uint64) any {
				m := post("/validate/check", url.Values{"serial": {"AR1"}, "pass": {otp.HOTP(key, counter, 6, otp.SHA1)}}, "")
				return m["result"].(map[string]any)["value"]
			}
			if v := value(500); v != false {
				t.Fatalf("the first value far out of the window: %v", v)
			}
			if v := value(501); v != on {
				t.Fatalf("the next value: %v, want %v", v, on)
			}
			if on && value(501) != false {
				t.Fatal("the resyncing value was accepted twice")
			}
			if on && value(502) != true {
				t.Fatal("the value after the resync was refused")
			}
		})
	}
}
