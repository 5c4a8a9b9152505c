package main

import (
	"bytes"
	"flag"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestParseByteSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"1048576", 1 << 20},
		{"123B", 123},
		{"512KiB", 512 << 10},
		{"300MiB", 300 << 20},
		{"1GiB", 1 << 30},
		{"2TiB", 2 << 40},
		{"off", math.MaxInt64},
	} {
		got, err := parseByteSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "want bytes"},
		{"MiB", "want bytes"},
		{"1.5GiB", "want bytes"},
		{"300MB", "want bytes"},
		{"300 MiB", "want bytes"},
		{"1G", "want bytes"},
		{"+5", "want bytes"},
		{"-1", "negative"},
		{"-300MiB", "negative"},
		{"Off", "want bytes"},
		{"8388608TiB", "too large"},
		{"99999999999999999999", "too large"},
	} {
		if got, err := parseByteSize(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseByteSize(%q) = %d, %v; want an error with %q", c.in, got, err, c.want)
		}
	}
}

func TestFormatByteSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 123: "123B", 2048: "2KiB", 768 << 20: "768MiB", 3 << 30: "3GiB", 1<<20 + 1: "1048577B", math.MaxInt64: "off"} {
		if got := formatByteSize(n); got != want {
			t.Errorf("formatByteSize(%d) = %q; want %q", n, got, want)
		}
		if n != 0 && n != math.MaxInt64 {
			if back, err := parseByteSize(formatByteSize(n)); err != nil || back != n {
				t.Errorf("parseByteSize(formatByteSize(%d)) = %d, %v", n, back, err)
			}
		}
	}
}

// memLimitFrom parses serve's flags as the binary does (the command line,
// then AUTHSRV_* from env) and returns the memory limit it would set.
func memLimitFrom(t *testing.T, args []string, vars map[string]string) (int64, bool, error) {
	t.Helper()
	getenv := func(k string) string { return vars[k] }
	e := &env{ctx: t.Context(), stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, getenv: getenv}
	var c common
	fs := e.flags("serve", &c)
	var m memoryLimit
	m.register(fs)
	if err := e.parse(fs, args); err != nil {
		return 0, false, err
	}
	return m.setting(c.kdfBudget<<20, getenv)
}

func TestMemoryLimitSetting(t *testing.T) {
	for _, c := range []struct {
		name   string
		args   []string
		env    map[string]string
		want   int64
		wantOK bool
	}{
		{"default: the KDF budget plus the headroom", nil, nil, 512<<20 + memoryHeadroom, true},
		{"the default follows -kdf-budget-mib", []string{"-kdf-budget-mib", "1024"}, nil, 1024<<20 + memoryHeadroom, true},
		{"the default follows AUTHSRV_KDF_BUDGET_MIB", nil, map[string]string{"AUTHSRV_KDF_BUDGET_MIB": "64"}, 64<<20 + memoryHeadroom, true},
		{"a size in MiB", []string{"-memory-limit", "600MiB"}, nil, 600 << 20, true},
		{"a size in GiB", []string{"-memory-limit", "1GiB"}, nil, 1 << 30, true},
		{"bytes", []string{"-memory-limit", "1073741824"}, nil, 1 << 30, true},
		{"exactly the KDF budget", []string{"-memory-limit", "512MiB"}, nil, 512 << 20, true},
		{"off", []string{"-memory-limit", "off"}, nil, math.MaxInt64, true},
		{"from AUTHSRV_MEMORY_LIMIT", nil, map[string]string{"AUTHSRV_MEMORY_LIMIT": "2GiB"}, 2 << 30, true},
		{"the flag wins over AUTHSRV_MEMORY_LIMIT", []string{"-memory-limit", "900MiB"}, map[string]string{"AUTHSRV_MEMORY_LIMIT": "2GiB"}, 900 << 20, true},
		{"GOMEMLIMIT in the environment wins over the default", nil, map[string]string{"GOMEMLIMIT": "100MiB"}, 0, false},
		{"a given flag wins over GOMEMLIMIT", []string{"-memory-limit", "1GiB"}, map[string]string{"GOMEMLIMIT": "100MiB"}, 1 << 30, true},
		{"AUTHSRV_MEMORY_LIMIT wins over GOMEMLIMIT", nil, map[string]string{"GOMEMLIMIT": "100MiB", "AUTHSRV_MEMORY_LIMIT": "1GiB"}, 1 << 30, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := memLimitFrom(t, c.args, c.env)
			if err != nil || got != c.want || ok != c.wantOK {
				t.Fatalf("memory limit = %d, %v, %v; want %d, %v", got, ok, err, c.want, c.wantOK)
			}
		})
	}
}

func TestMemoryLimitBadValues(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unparsable", []string{"-memory-limit", "lots"}, nil, `invalid value "lots" for flag -memory-limit: want bytes`},
		{"a unit Go does not take", []string{"-memory-limit", "1GB"}, nil, `invalid value "1GB" for flag -memory-limit: want bytes`},
		{"negative", []string{"-memory-limit", "-1"}, nil, `invalid value "-1" for flag -memory-limit: negative`},
		{"below the KDF budget", []string{"-memory-limit", "300MiB"}, nil, "-memory-limit 300MiB: below the KDF budget of 512MiB (-kdf-budget-mib)"},
		{"below a raised KDF budget", []string{"-memory-limit", "1GiB", "-kdf-budget-mib", "2048"}, nil, "-memory-limit 1GiB: below the KDF budget of 2GiB"},
		{"bad in AUTHSRV_MEMORY_LIMIT", nil, map[string]string{"AUTHSRV_MEMORY_LIMIT": "1.5GiB"}, "AUTHSRV_MEMORY_LIMIT: want bytes"},
		{"below the budget from AUTHSRV_MEMORY_LIMIT", nil, map[string]string{"AUTHSRV_MEMORY_LIMIT": "0"}, "-memory-limit 0B: below the KDF budget"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := memLimitFrom(t, c.args, c.env)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("memory limit = %d, %v, %v; want an error with %q", got, ok, err, c.want)
			}
		})
	}
}

// serve refuses a bad limit before it opens the data directory, so the
// process's own limit and the data directory stay as they were.
func TestServeRejectsBadMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-memory-limit", "100MiB"}, "-memory-limit 100MiB: below the KDF budget of 512MiB"},
		{[]string{"-memory-limit", "12XB"}, `invalid value "12XB" for flag -memory-limit`},
	} {
		dir := t.TempDir()
		var out, errb bytes.Buffer
		code := run(t.Context(), append([]string{"serve", "-data-dir", dir}, c.args...), strings.NewReader(""), &out, &errb, func(string) string { return "" })
		if code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Fatalf("%v: exit %d, stderr %q", c.args, code, errb.String())
		}
	}
}

func TestCollectorFacts(t *testing.T) {
	var buf bytes.Buffer
	log := zerolog.New(&buf)
	log.Info().Func(collectorFacts).Msg("serving")
	// The test binary runs with the runtime's defaults unless the
	// environment set them; either way both facts are on the line.
	if s := buf.String(); !strings.Contains(s, `"gogc":`) || !strings.Contains(s, `"memory_limit":"`) {
		t.Fatalf("log line %s lacks gogc or memory_limit", s)
	}
}

func TestResidentLimitFlag(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var r residentLimit
	r.register(fs)
	if r.bytes != 32<<20 {
		t.Fatalf("default %d", r.bytes)
	}
	for in, want := range map[string]int64{"64MiB": 64 << 20, "off": 0, "0": 0, "1GiB": 1 << 30} {
		if err := fs.Parse([]string{"-store-resident-limit", in}); err != nil || r.bytes != want {
			t.Fatalf("%s: %d, %v; want %d", in, r.bytes, err, want)
		}
	}
	if err := fs.Parse([]string{"-store-resident-limit", "-5MiB"}); err == nil {
		t.Fatal("a negative size was accepted")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := run(t.Context(), []string{"serve", "-data-dir", dir, "-store-resident-limit", "lots"}, strings.NewReader(""), &out, &errb, func(string) string { return "" })
	if code == 0 || !strings.Contains(errb.String(), `invalid value "lots" for flag -store-resident-limit`) {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
