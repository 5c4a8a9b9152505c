package eventing

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/apierr"
)

// ntLogLines decodes the JSON lines of the captured log.
func ntLogLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLogging(t *testing.T) {
	detail := map[string]any{"pin": "rnd-pin-4242", "registrationcode": "reg-77",
		"googleurl": map[string]any{"value": "otpauth://hotp/x?secret=SEED"}}
	tests := []struct {
		name      string
		opts      map[string]string
		level     zerolog.Level
		wantLevel string
		wantName  string
		wantMsg   string
	}{
		{"Defaults", map[string]string{}, zerolog.DebugLevel, "info", "pi-eventlogger", "event=POST /token/init triggered"},
		{"Custom", map[string]string{"name": "audit-feed", "level": "WARNING",
			"message": "{serial} of {username}@{userrealm} by {admin}: pin={pin} reg={registrationcode} url={googleurl_value}"},
			zerolog.DebugLevel, "warn", "audit-feed",
			"HOTP0001 of alice@realm1 by super: pin={pin} reg={registrationcode} url={googleurl_value}"},
		{"Error", map[string]string{"level": "ERROR", "message": "m"}, zerolog.DebugLevel, "error", "pi-eventlogger", "m"},
		{"DebugLowercase", map[string]string{"level": "debug", "message": "m"}, zerolog.DebugLevel, "debug", "pi-eventlogger", "m"},
		{"DebugFiltered", map[string]string{"level": "DEBUG", "message": "m"}, zerolog.InfoLevel, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf syncLog
			e := newNtEnv(t, func(c *Config) { c.Log = zerolog.New(&buf).Level(tt.level) })
			e.token(t, "HOTP0001", "")
			if err := e.check(t, "Logging", "logging", tt.opts); err != nil {
				t.Fatal(err)
			}
			if err := e.do(t, e.run("Logging", "logging", tt.opts, ntAdminCall("HOTP0001", detail))); err != nil {
				t.Fatal(err)
			}
			lines := ntLogLines(t, buf.String())
			if tt.wantLevel == "" {
				if len(lines) != 0 {
					t.Fatalf("lines %v", lines)
				}
				return
			}
			if len(lines) != 1 {
				t.Fatalf("%d lines: %s", len(lines), buf.String())
			}
			l := lines[0]
			if l["level"] != tt.wantLevel || l["logger"] != tt.wantName || l["message"] != tt.wantMsg ||
				l["event"] != "token_init" || l["request_id"] != "req-1" {
				t.Errorf("line %v", l)
			}
			for _, leak := range []string{"rnd-pin", "reg-77", "SEED"} {
				if strings.Contains(buf.String(), leak) {
					t.Errorf("log leaks %q", leak)
				}
			}
		})
	}
}

func TestLoggingCheck(t *testing.T) {
	e := newNtEnv(t)
	for _, lv := range []string{"", "INFO", "warning", "ERROR", "DEBUG"} {
		if err := e.check(t, "Logging", "logging", map[string]string{"level": lv}); err != nil {
			t.Errorf("level %q refused: %v", lv, err)
		}
	}
	for _, lv := range []string{"VERBOSE", "CRITICAL", "warn"} {
		if err := e.check(t, "Logging", "logging", map[string]string{"level": lv}); !apierr.Is(err, apierr.Parameter) {
			t.Errorf("level %q: %v", lv, err)
		}
	}
	m, _ := e.svc.Module("Logging")
	acts, err := m.Actions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "message", "level"} {
		if _, ok := acts["logging"][k]; !ok {
			t.Errorf("logging lacks option %s", k)
		}
	}
}
