package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestServeRejectsBadAuditRetention(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"negative age", []string{"-audit-max-age", "-1h"}, nil, `"-1h": want more than 0, or off for no age limit`},
		{"zero age", []string{"-audit-max-age", "0"}, nil, `"0": want more than 0, or off for no age limit`},
		{"zero days", []string{"-audit-max-age", "0d"}, nil, `"0d": want more than 0, or off for no age limit`},
		{"unknown unit", []string{"-audit-max-age", "3w"}, nil, `"3w": want a duration such as 720h, a number of days such as 30d, or off`},
		{"days overflow", []string{"-audit-max-age", "999999d"}, nil, `"999999d": want a duration`},
		{"negative count", []string{"-audit-max-entries", "-5"}, nil, `invalid value "-5" for flag -audit-max-entries`},
		{"zero interval", []string{"-audit-max-entries", "10", "-audit-cleanup-interval", "0s"}, nil, "-audit-cleanup-interval 0s: want more than 0"},
		{"interval with retention off", []string{"-audit-max-age", "off", "-audit-cleanup-interval", "1m"}, nil, "-audit-cleanup-interval does nothing with -audit-max-age off"},
		{"interval with retention off from the environment", nil, map[string]string{"AUTHSRV_AUDIT_MAX_AGE": "off", "AUTHSRV_AUDIT_CLEANUP_INTERVAL": "1m"}, "-audit-cleanup-interval does nothing with -audit-max-age off"},
		{"bad age in the environment", nil, map[string]string{"AUTHSRV_AUDIT_MAX_AGE": "soon"}, `AUTHSRV_AUDIT_MAX_AGE: "soon": want a duration`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var out, errb bytes.Buffer
			args := append([]string{"serve", "-data-dir", dir, "-listen", "127.0.0.1:0"}, c.args...)
			code := run(t.Context(), args, strings.NewReader(""), &out, &errb, func(k string) string { return c.env[k] })
			if code == 0 || !strings.Contains(errb.String(), c.want) {
				t.Fatalf("exit %d, stderr %q; want %q", code, errb.String(), c.want)
			}
			if strings.Contains(out.String(), "serving") {
				t.Fatalf("served with a bad retention: %q", out.String())
			}
		})
	}
}

func TestAuditRetentionOption(t *testing.T) {
	parse := func(args ...string) (*auditRetention, *flag.FlagSet) {
		t.Helper()
		var r auditRetention
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		r.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &r, fs
	}
	// The default: 180 days, every hour.
	r, fs := parse()
	if r.maxAge.off || r.maxAge.d != 180*24*time.Hour || r.maxEntries != 0 || r.interval != time.Hour {
		t.Fatalf("defaults %+v; want 180 days checked every hour", *r)
	}
	if opt, err := r.option(fs); err != nil || opt == nil {
		t.Fatalf("no flags: option %v, %v; want the default retention", opt != nil, err)
	}
	// Off only on purpose.
	r, fs = parse("-audit-max-age", "off")
	if opt, err := r.option(fs); err != nil || opt != nil {
		t.Fatalf("-audit-max-age off: option %v, %v; want none (keep every entry)", opt != nil, err)
	}
	r, fs = parse("-audit-max-age", "off", "-audit-max-entries", "50")
	if opt, err := r.option(fs); err != nil || opt == nil || !r.maxAge.off {
		t.Fatalf("-audit-max-age off -audit-max-entries 50: option %v, %v; want a count limit only", opt != nil, err)
	}
	r, fs = parse("-audit-max-age", "30d", "-audit-max-entries", "1000", "-audit-cleanup-interval", "5m")
	if r.maxAge.d != 30*24*time.Hour || r.maxEntries != 1000 || r.interval != 5*time.Minute {
		t.Fatalf("parsed %+v", *r)
	}
	if opt, err := r.option(fs); err != nil || opt == nil {
		t.Fatalf("option %v, %v; want one", opt != nil, err)
	}
	r, _ = parse("-audit-max-age", "36h")
	if r.maxAge.d != 36*time.Hour || r.interval != defaultAuditCleanupInterval {
		t.Fatalf("parsed %+v", *r)
	}
	// The help names the default and the way to turn it off.
	var help bytes.Buffer
	fs = flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(&help)
	new(auditRetention).register(fs)
	fs.PrintDefaults()
	if !strings.Contains(help.String(), "(default 180d)") || !strings.Contains(help.String(), "off: no age limit") {
		t.Errorf("help:\n%s", help.String())
	}
}

// TestServeWithRetentionOff: "-audit-max-age off" is accepted by serve.
func TestServeWithRetentionOff(t *testing.T) {
	for _, args := range [][]string{{"-audit-max-age", "off"}, {"-audit-max-age", "off", "-audit-max-entries", "10"}, nil} {
		dir := shortDir(t)
		env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LISTEN": "127.0.0.1:0", "AUTHSRV_LOG_LEVEL": "disabled"}
		ctx, cancel := context.WithCancel(t.Context())
		var out, errs syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, append([]string{"serve"}, args...), strings.NewReader(""), &out, &errs, func(k string) string { return env[k] })
		}()
		waitFor(t, "serving", func() bool { return servingRe.MatchString(out.String()) })
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve %v: exit %d, %q", args, code, errs.String())
		}
	}
}
