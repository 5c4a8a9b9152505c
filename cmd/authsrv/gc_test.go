package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestGCSetting(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	for _, c := range []struct {
		name   string
		value  int
		given  bool
		env    map[string]string
		want   int
		wantOK bool
	}{
		{"default", defaultGCPercent, false, nil, defaultGCPercent, true},
		{"GOGC in the environment wins over the default", defaultGCPercent, false, map[string]string{"GOGC": "100"}, 0, false},
		{"a given flag wins over GOGC", 150, true, map[string]string{"GOGC": "100"}, 150, true},
		{"off", -1, true, nil, -1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := gcSetting(c.value, c.given, env(c.env))
			if got != c.want || ok != c.wantOK {
				t.Fatalf("gcSetting(%d, %v) = %d, %v; want %d, %v", c.value, c.given, got, ok, c.want, c.wantOK)
			}
		})
	}
}

func TestServeRejectsBadGCPercent(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"serve", "-data-dir", t.TempDir(), "-gc-percent", "-5"}, strings.NewReader(""), &out, &errb, func(string) string { return "" })
	if code == 0 || !strings.Contains(errb.String(), "-gc-percent -5: want -1 (off) or more") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
