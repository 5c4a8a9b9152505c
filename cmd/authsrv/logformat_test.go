package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNewLogger(t *testing.T) {
	tests := []struct {
		name          string
		level, format string
		check         func(t *testing.T, out string)
		wantErr       string
	}{
		{name: "json", level: "info", format: "json", check: func(t *testing.T, out string) {
			var m map[string]any
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("not one JSON object: %q: %v", out, err)
			}
			if m["level"] != "info" || m["message"] != "hello" || m["serial"] != "S1" || m["time"] == nil {
				t.Errorf("fields: %v", m)
			}
		}},
		{name: "text", level: "info", format: "text", check: func(t *testing.T, out string) {
			re := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S* INF hello serial=S1\n$`)
			if !re.MatchString(out) {
				t.Errorf("text line %q", out)
			}
			if strings.Contains(out, "\x1b[") {
				t.Errorf("colours outside a terminal: %q", out)
			}
		}},
		{name: "level filters", level: "warn", format: "text", check: func(t *testing.T, out string) {
			if out != "" {
				t.Errorf("an info message at level warn: %q", out)
			}
		}},
		{name: "unknown format", level: "info", format: "xml", wantErr: `log format "xml": want json or text`},
		{name: "unknown level", level: "loud", format: "json", wantErr: `log level "loud"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := newLogger(&buf, tc.level, tc.format)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Info().Str("serial", "S1").Msg("hello")
			tc.check(t, buf.String())
		})
	}
}

// TestServeLogFormat: AUTHSRV_LOG_FORMAT=text makes the server log text
// lines; a bad -log-format stops it before it starts.
func TestServeLogFormat(t *testing.T) {
	env := map[string]string{"AUTHSRV_DATA_DIR": shortDir(t), "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "info", "AUTHSRV_LOG_FORMAT": "text"}
	if code, _, errs := cli(t, env, "", "serve", "-log-format", "xml"); code != 1 || !strings.Contains(errs, `log format "xml"`) {
		t.Fatalf("-log-format xml: code %d, stderr %q", code, errs)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, nil, strings.NewReader(""), &out, &errs, func(k string) string { return env[k] })
	}()
	waitFor(t, "serving", func() bool { return servingRe.MatchString(out.String()) })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d: %s", code, errs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop")
	}
	logs := errs.String()
	if !regexp.MustCompile(`(?m)^\S+ INF serving .*listen=127\.0\.0\.1:\d+`).MatchString(logs) {
		t.Errorf("no text line for serving in %q", logs)
	}
	if strings.Contains(logs, `{"level"`) {
		t.Errorf("JSON lines in the text log: %q", logs)
	}
}
