package main

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfig writes text into a new file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "authsrv.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// parsedServeFlags parses args with the environment vars as serve does and returns every
// flag's value.
func parsedServeFlags(t *testing.T, vars map[string]string, args ...string) (map[string]string, error) {
	t.Helper()
	fs := serveFlagSet()
	e := &env{ctx: t.Context(), stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string { return vars[k] }}
	err := e.parse(fs, args)
	vals := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { vals[f.Name] = f.Value.String() })
	return vals, err
}

// TestConfigEquivalentToFlags: a file gives every flag the value the
// same settings on the command line give: strings, numbers, booleans,
// durations, sizes, lists of a repeatable flag and KEY_file.
func TestConfigEquivalentToFlags(t *testing.T) {
	nameFile := filepath.Join(t.TempDir(), "node")
	if err := os.WriteFile(nameFile, []byte("node-7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, `# comment
listen: 127.0.0.1:9999
data-dir: /srv/authsrv
log-format: text
kdf-budget-mib: 64
auto-resync: true
auto-resync-timeout: 2m
gc-percent: 200
memory-limit: 1GiB
audit-max-age: 90d
file-root: [/etc/authsrv, /srv/files]
allow-dial:
  - 10.0.0.0/8
  - unix
node-name_file: `+nameFile+`
`)
	flags := []string{"-listen", "127.0.0.1:9999", "-data-dir", "/srv/authsrv", "-log-format", "text",
		"-kdf-budget-mib", "64", "-auto-resync", "-auto-resync-timeout", "2m", "-gc-percent", "200",
		"-memory-limit", "1GiB", "-audit-max-age", "90d", "-file-root", "/etc/authsrv", "-file-root", "/srv/files",
		"-allow-dial", "10.0.0.0/8", "-allow-dial", "unix", "-node-name", "node-7"}
	want, err := parsedServeFlags(t, nil, flags...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parsedServeFlags(t, nil, "-config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		if name != "config" && got[name] != w {
			t.Errorf("-%s: the file gives %q, the flags %q", name, got[name], w)
		}
	}
	// AUTHSRV_CONFIG names the file as well.
	viaEnv, err := parsedServeFlags(t, map[string]string{"AUTHSRV_CONFIG": cfg})
	if err != nil || viaEnv["listen"] != "127.0.0.1:9999" || viaEnv["node-name"] != "node-7" {
		t.Errorf("AUTHSRV_CONFIG: %v %v", err, viaEnv)
	}
}

// TestConfigPrecedence: flag > AUTHSRV_* > file > default.
func TestConfigPrecedence(t *testing.T) {
	cfg := writeConfig(t, "listen: 127.0.0.1:1001\nnode-name: from-file\npublic-url: https://file.example\nlog-level: warn\n")
	env := map[string]string{"AUTHSRV_LISTEN": "127.0.0.1:1002", "AUTHSRV_NODE_NAME": "from-env"}
	got, err := parsedServeFlags(t, env, "-config", cfg, "-listen", "127.0.0.1:1003")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"listen":           "127.0.0.1:1003",       // flag over env and file
		"node-name":        "from-env",             // env over file
		"public-url":       "https://file.example", // file over default
		"log-level":        "warn",
		"shutdown-timeout": "30s", // default
	} {
		if got[name] != want {
			t.Errorf("-%s = %q, want %q", name, got[name], want)
		}
	}
}

// TestConfigBadInput: every problem names the key and its line; no value
// is echoed from a KEY_file.
func TestConfigBadInput(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "s")
	if err := os.WriteFile(secret, []byte("hunter2-not-a-number\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ text, want string }{
		{"listen: 127.0.0.1:1\n\nlisen: x\n", `line 3: key "lisen": unknown key`},
		{"config: other.yaml\n", `line 1: key "config": unknown key`},
		{"listen: a\nauto-resync: yes\n", `line 2: key "auto-resync": want true or false`},
		{"gc-percent: many\n", `line 1: key "gc-percent"`},
		{"gc-percent: true\n", `line 1: key "gc-percent": want a number, not a boolean`},
		{"listen: [a, b]\n", `line 1: key "listen": a list, but the flag takes one value`},
		{"file-root:\n  dir: /x\n", `line 1: key "file-root": want a single value or a list`},
		{"listen:\n", `line 1: key "listen": no value`},
		{"listen: a\nlisten_file: /x\n", `line 2: key "listen_file": the flag -listen is already set on line 1`},
		{"shutdown-timeout: soon\n", `line 1: key "shutdown-timeout"`},
		{"gc-percent_file: " + secret + "\n", `line 1: key "gc-percent_file": the file's content is not a valid value`},
		{"node-name_file: /does/not/exist\n", `line 1: key "node-name_file"`},
		{"- listen\n", "line 1: want a mapping"},
		{"listen: a\n---\nlisten: b\n", "line 2: a second YAML document"},
		{"listen: [\n", "line"},
		{"listen: a\nlog-format: xml\n", `line 2: key "log-format": log format "xml"`},
		{"log-level: loud\n", `line 1: key "log-level": log level "loud"`},
		{"tls-key: /etc/authsrv/key.pem\n", `line 1: key "tls-key": tls-cert and tls-key go together`},
	} {
		p := writeConfig(t, c.text)
		code, out, errs := cli(t, nil, "", "config", "check", p)
		if code != 1 || out != "" || !strings.Contains(errs, c.want) || !strings.Contains(errs, p) {
			t.Errorf("%q: code %d, stdout %q, stderr %q; want %q", c.text, code, out, errs, c.want)
		}
		if strings.Contains(errs, "hunter2") {
			t.Errorf("%q: the error shows the file's content: %q", c.text, errs)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	code, out, errs := cli(t, nil, "", "config", "check", filepath.Join("testdata", "config", "authsrv.yaml"))
	if code != 0 || out != "ok\n" || errs != "" {
		t.Errorf("the example: code %d, stdout %q, stderr %q", code, out, errs)
	}
	code, out, errs = cli(t, nil, "", "config", "check", filepath.Join("testdata", "config", "typo.yaml"))
	if code != 1 || out != "" || !strings.Contains(errs, `typo.yaml line 3: key "lisen": unknown key`) {
		t.Errorf("the typo: code %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := cli(t, nil, "", "config", "check", filepath.Join(t.TempDir(), "none.yaml")); code != 1 || !strings.Contains(errs, "none.yaml") {
		t.Errorf("a missing file: code %d, stderr %q", code, errs)
	}
	if code, _, _ := cli(t, nil, "", "config", "check"); code != 2 {
		t.Errorf("no file: code %d", code)
	}
	if code, _, _ := cli(t, nil, "", "config"); code != 2 {
		t.Errorf("no subcommand: code %d", code)
	}
	if code, _, _ := cli(t, nil, "", "config", "check", writeConfig(t, "# nothing yet\n")); code != 0 {
		t.Errorf("a file of comments: code %d", code)
	}
}

// TestServeConfigFile: "authsrv serve -config FILE" serves as the
// equivalent flags do (address, data directory, log format); a typo in
// the file stops it with exit status 1 naming the key and line.
func TestServeConfigFile(t *testing.T) {
	dir := shortDir(t)
	cfg := writeConfig(t, "listen: 127.0.0.1:0\ndata-dir: "+dir+"\nlog-format: text\nlog-level: info\n")
	ctx, cancel := context.WithCancel(t.Context())
	var out, logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-config", cfg}, strings.NewReader(""), &out, &logs, func(string) string { return "" })
	}()
	waitFor(t, "serving", func() bool { return servingRe.MatchString(out.String()) })
	addr := servingRe.FindStringSubmatch(out.String())[2]
	if !strings.HasPrefix(addr, "127.0.0.1:") || addr == "127.0.0.1:8080" {
		t.Errorf("listening on %s, not the file's 127.0.0.1:0", addr)
	}
	if !strings.Contains(out.String(), "(data in "+dir+")") {
		t.Errorf("not the file's data directory: %q", out.String())
	}
	if code, _ := login(t, addr, passwordRe.FindStringSubmatch(out.String())[1]); code != 200 {
		t.Errorf("login: %d", code)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d: %s", code, logs.String())
	}
	if l := logs.String(); !strings.Contains(l, "serving") || strings.HasPrefix(l, "{") {
		t.Errorf("the log is not in the file's text format: %q", l)
	}

	// The other commands read the data directory from the same file and
	// pass over serve's own keys (listen).
	code, stdout, errs := cli(t, nil, "", "admin", "list", "-config", cfg, "-log-level", "disabled")
	if code != 0 || !strings.Contains(stdout, "admin\tcreated") {
		t.Errorf("admin list -config: code %d, stdout %q, stderr %q", code, stdout, errs)
	}

	typo := writeConfig(t, "listen: 127.0.0.1:0\ndata-dir: "+dir+"\nlog-levle: debug\n")
	for _, how := range []struct {
		args []string
		env  map[string]string
	}{{[]string{"serve", "-config", typo}, nil}, {nil, map[string]string{"AUTHSRV_CONFIG": typo}}} {
		code, stdout, errs := cli(t, how.env, "", how.args...)
		if code != 1 || strings.Contains(stdout, "serving") || !strings.Contains(errs, `line 3: key "log-levle": unknown key`) {
			t.Errorf("%v %v: code %d, stdout %q, stderr %q", how.args, how.env, code, stdout, errs)
		}
	}
}

// TestConfigRepeatableFlags: every flag whose help says it is repeatable
// takes a list in the file.
func TestConfigRepeatableFlags(t *testing.T) {
	n := 0
	serveFlagSet().VisitAll(func(f *flag.Flag) {
		if strings.Contains(f.Usage, "repeatable") {
			n++
			if !repeatable(f) {
				t.Errorf("-%s is repeatable but takes no list in a configuration file", f.Name)
			}
		}
	})
	if n == 0 {
		t.Error("no repeatable flag found")
	}
}
