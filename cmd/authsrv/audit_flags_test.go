package main

import (
	"bytes"
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
		{"negative age", []string{"-audit-max-age", "-1h"}, nil, `"-1h": want 0 (keep everything) or more`},
		{"unknown unit", []string{"-audit-max-age", "3w"}, nil, `"3w": want a duration such as 720h or a number of days such as 30d`},
		{"days overflow", []string{"-audit-max-age", "999999d"}, nil, `"999999d": want a duration`},
		{"negative count", []string{"-audit-max-entries", "-5"}, nil, `invalid value "-5" for flag -audit-max-entries`},
		{"zero interval", []string{"-audit-max-entries", "10", "-audit-cleanup-interval", "0s"}, nil, "-audit-cleanup-interval 0s: want more than 0"},
		{"interval alone", []string{"-audit-cleanup-interval", "1m"}, nil, "-audit-cleanup-interval needs -audit-max-age or -audit-max-entries"},
		{"interval alone from the environment", nil, map[string]string{"AUTHSRV_AUDIT_CLEANUP_INTERVAL": "1m"}, "-audit-cleanup-interval needs -audit-max-age or -audit-max-entries"},
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
	r, fs := parse()
	if opt, err := r.option(fs); err != nil || opt != nil {
		t.Fatalf("no flags: option %v, %v; want none (keep every entry)", opt != nil, err)
	}
	r, fs = parse("-audit-max-age", "30d", "-audit-max-entries", "1000", "-audit-cleanup-interval", "5m")
	if time.Duration(r.maxAge) != 30*24*time.Hour || r.maxEntries != 1000 || r.interval != 5*time.Minute {
		t.Fatalf("parsed %+v", *r)
	}
	if opt, err := r.option(fs); err != nil || opt == nil {
		t.Fatalf("option %v, %v; want one", opt != nil, err)
	}
	r, _ = parse("-audit-max-age", "36h")
	if time.Duration(r.maxAge) != 36*time.Hour || r.interval != defaultAuditCleanupInterval {
		t.Fatalf("parsed %+v", *r)
	}
}
