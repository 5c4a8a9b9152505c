package eventing

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/user"
)

// scriptDef is a Script definition of action name with opts.
func scriptDef(name string, opts map[string]string) Definition {
	return Definition{Name: "run " + name, Active: true, Position: Post, HandlerModule: "Script", Action: name,
		Events: []string{"token_init"}, Options: opts}
}

// scriptOutputLines polls for file p (written by a script) until the deadline.
func scriptOutputLines(t *testing.T, p string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(p)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written: %v", p, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestScriptWait(t *testing.T) {
	needShell(t)
	dir := t.TempDir()
	writeTestScript(t, dir, "ok.sh", "exit 0")
	// The failing script prints something that must never reach the error.
	writeTestScript(t, dir, "fail.sh", "echo LEAKED-OUTPUT; echo LEAKED-ERROR >&2; exit 1")
	s := scriptTestService(t, dir)
	m := newScript(s)

	tests := []struct {
		name      string
		script    string
		opts      map[string]string
		wantErr   bool
		wantAbort bool
	}{
		{"exit 0", "ok.sh", map[string]string{"background": "wait", "raise_error": "1"}, false, false},
		{"exit 1 raise_error", "fail.sh", map[string]string{"background": "wait", "raise_error": "True"}, true, true},
		{"exit 1 privacyIDEA wait label", "fail.sh", map[string]string{"background": "Wait for script to finish", "raise_error": "1"}, true, true},
		{"exit 1 without raise_error", "fail.sh", map[string]string{"background": "wait"}, true, false},
		{"raise_error needs wait", "fail.sh", map[string]string{"background": "background", "raise_error": "1"}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := scriptTestRun(s, scriptDef(tc.script, tc.opts), &Call{Event: "token_init"}, Post)
			err := m.Do(t.Context(), r)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Do = %v, want error %v", err, tc.wantErr)
			}
			var ab *Abort
			if errors.As(err, &ab) != tc.wantAbort {
				t.Fatalf("Do = %#v, want abort %v", err, tc.wantAbort)
			}
			if err == nil {
				return
			}
			_, _, msg, _, internal := apierr.Wire(err)
			if internal || msg != "ERR903: Error during execution of the script." {
				t.Errorf("wire message %q (internal %v)", msg, internal)
			}
			if strings.Contains(msg, "LEAKED") || strings.Contains(err.Error(), "LEAKED") {
				t.Errorf("the script's output reached the error: %q", err.Error())
			}
		})
	}
}

// TestScriptAbortStopsOperation: through Service.Run, raise_error stops
// the operation even without abort_on_error; a plain failure does not.
func TestScriptAbortStopsOperation(t *testing.T) {
	needShell(t)
	dir := t.TempDir()
	writeTestScript(t, dir, "fail.sh", "exit 3")
	s := scriptTestService(t, dir)
	ctx := t.Context()

	id, err := s.Set(ctx, scriptDef("fail.sh", map[string]string{"background": "wait"}), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx, Post, &Call{Event: "token_init"}); err != nil {
		t.Fatalf("a failing script without raise_error stopped the operation: %v", err)
	}
	d := scriptDef("fail.sh", map[string]string{"background": "wait", "raise_error": "true"})
	d.ID = id
	if _, err := s.Set(ctx, d, true); err != nil {
		t.Fatal(err)
	}
	err = s.Run(ctx, Post, &Call{Event: "token_init"})
	if ab, ok := errors.AsType[*Abort](err); !ok || ab == nil {
		t.Fatalf("Run = %v, want *Abort", err)
	}
}

func TestScriptBackground(t *testing.T) {
	needShell(t)
	dir := t.TempDir()
	out := t.TempDir()
	gate, done := filepath.Join(out, "go"), filepath.Join(out, "done")
	// The script finishes only after the test saw Do return.
	writeTestScript(t, dir, "slow.sh",
		"while [ ! -e '"+gate+"' ]; do sleep 0.02; done\necho finished > '"+done+"'\nexit 1")
	s := scriptTestService(t, dir)
	m := newScript(s)
	for _, bg := range []string{"", "background", "Run in background"} {
		t.Run("option "+bg, func(t *testing.T) {
			os.Remove(gate)
			os.Remove(done)
			r := scriptTestRun(s, scriptDef("slow.sh", map[string]string{"background": bg, "raise_error": "1"}), &Call{}, Post)
			if err := m.Do(t.Context(), r); err != nil {
				t.Fatalf("Do = %v; a background script's result must not matter", err)
			}
			if _, err := os.Stat(done); err == nil {
				t.Fatal("Do waited for the script")
			}
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if got := scriptOutputLines(t, done); !slices.Equal(got, []string{"finished"}) {
				t.Fatalf("script wrote %q", got)
			}
		})
	}
}

func TestScriptTimeout(t *testing.T) {
	needShell(t)
	dir := t.TempDir()
	writeTestScript(t, dir, "hang.sh", "exec sleep 30")
	s := scriptTestService(t, dir)
	m := newScript(s).(*scriptModule)
	m.timeout = 200 * time.Millisecond
	start := time.Now()
	err := m.Do(t.Context(), scriptTestRun(s, scriptDef("hang.sh", map[string]string{"background": "wait", "raise_error": "1"}), &Call{}, Post))
	if _, ok := errors.AsType[*Abort](err); !ok {
		t.Fatalf("Do = %v, want *Abort", err)
	}
	if !strings.Contains(errors.Unwrap(errors.Unwrap(err)).Error(), "did not finish in time") {
		t.Errorf("cause %v does not tell the timeout", errors.Unwrap(errors.Unwrap(err)))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the hanging script was not stopped at the timeout (%v)", d)
	}
}

func TestScriptArguments(t *testing.T) {
	needShell(t)
	t.Setenv("AUTHSRV_TEST_SECRET", "do-not-pass")
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "args")
	env := filepath.Join(t.TempDir(), "env")
	writeTestScript(t, dir, "args.sh", `printf '%s\n' "$@" > '`+out+`'
env > '`+env+`'
pwd >> '`+env+`'`)
	s := scriptTestService(t, dir)
	m := newScript(s)
	all := map[string]string{"background": "wait", "serial": "1", "user": "True", "realm": "true",
		"logged_in_user": "1", "logged_in_role": "1", "sync_to_database": "1"}

	tests := []struct {
		name string
		opts map[string]string
		call *Call
		want []string
	}{
		{"all values", all, &Call{
			Serial: "HOTP0001", User: user.User{Login: "alice", Realm: "r1"},
			Caller: caller.Caller{Role: caller.Admin, Name: "root", Realm: "adm"},
		}, []string{"--serial", "HOTP0001", "--user", "alice", "--realm", "r1",
			"--logged_in_user", "root@adm", "--logged_in_role", "admin"}},
		{"missing values are none", all, &Call{Caller: caller.Caller{Role: caller.Anonymous}},
			[]string{"--serial", "none", "--user", "none", "--realm", "none",
				"--logged_in_user", "none@none", "--logged_in_role", "none"}},
		{"serial from the parameters, a user logged in", all, &Call{
			Params: map[string]any{"serial": "TOTP9"},
			Caller: caller.Caller{Role: caller.User, Name: "bob", Realm: "r2"},
		}, []string{"--serial", "TOTP9", "--user", "none", "--realm", "none",
			"--logged_in_user", "bob@r2", "--logged_in_role", "user"}},
		{"serial from the answer", map[string]string{"background": "wait", "serial": "1"}, &Call{
			Response: &Response{Status: true, Detail: map[string]any{"serial": "OATH77"}},
		}, []string{"--serial", "OATH77"}},
		{"only some flags", map[string]string{"background": "wait", "realm": "1", "user": "0"}, &Call{
			User: user.User{Login: "carol", Realm: "r3"},
		}, []string{"--realm", "r3"}},
		{"no flags", map[string]string{"background": "wait"}, &Call{Serial: "X"}, []string{""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(out)
			if err := m.Do(t.Context(), scriptTestRun(s, scriptDef("args.sh", tc.opts), tc.call, Post)); err != nil {
				t.Fatal(err)
			}
			if got := scriptOutputLines(t, out); !slices.Equal(got, tc.want) {
				t.Errorf("arguments %q, want %q", got, tc.want)
			}
		})
	}

	lines := scriptOutputLines(t, env)
	realDir, _ := filepath.EvalSymlinks(dir)
	if lines[len(lines)-1] != realDir {
		t.Errorf("working directory %q, want %q", lines[len(lines)-1], realDir)
	}
	var path bool
	for _, l := range lines[:len(lines)-1] {
		if strings.Contains(l, "do-not-pass") || strings.HasPrefix(l, "AUTHSRV_") {
			t.Errorf("the server's environment reached the script: %q", l)
		}
		path = path || l == "PATH=/usr/bin:/bin"
	}
	if !path {
		t.Errorf("PATH is not /usr/bin:/bin in %q", lines)
	}
}

func TestScriptCheckAndActions(t *testing.T) {
	needShell(t)
	dir := t.TempDir()
	outside := t.TempDir()
	writeTestScript(t, dir, "good.sh", "exit 0")
	writeTestScript(t, outside, "evil.sh", "exit 0")
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeTestScript(t, filepath.Join(dir, "sub"), "deep.sh", "exit 0")
	for link, target := range map[string]string{
		"escape": filepath.Join(outside, "evil.sh"), "shell": "/bin/sh", "alias.sh": "good.sh", "dangling": "nothing",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	s := scriptTestService(t, dir)
	m := newScript(s)
	ctx := t.Context()

	acts, err := m.Actions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n, opts := range acts {
		names = append(names, n)
		if opts["background"].Type != "str" || !slices.Equal(opts["background"].Value, []string{"background", "wait"}) ||
			opts["raise_error"].VisibleIf != "background" || opts["logged_in_role"].Type != "bool" {
			t.Errorf("options of %s: %+v", n, opts)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"alias.sh", "good.sh"}) {
		t.Errorf("actions %q, want the executables inside the directory", names)
	}

	tests := []struct {
		action string
		opts   map[string]string
		ok     bool
	}{
		{"good.sh", nil, true},
		{"good.sh", map[string]string{"background": "wait", "raise_error": "1"}, true},
		{"alias.sh", nil, true},
		{"good.sh", map[string]string{"background": "later"}, false},
		{"", nil, false},
		{".", nil, false},
		{"..", nil, false},
		{"../" + filepath.Base(outside) + "/evil.sh", nil, false},
		{filepath.Join(outside, "evil.sh"), nil, false},
		{"/bin/sh", nil, false},
		{"sub/deep.sh", nil, false},
		{"sub", nil, false},
		{"escape", nil, false},
		{"shell", nil, false},
		{"dangling", nil, false},
		{"notes.txt", nil, false},
		{"missing.sh", nil, false},
		{"good.sh\n", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.action, func(t *testing.T) {
			err := m.Check(ctx, scriptDef(tc.action, tc.opts))
			if (err == nil) != tc.ok {
				t.Fatalf("Check(%q) = %v, want ok %v", tc.action, err, tc.ok)
			}
			if err != nil && !apierr.Is(err, apierr.Parameter) {
				t.Errorf("Check(%q) = %v, want a parameter error", tc.action, err)
			}
			if !tc.ok && tc.opts == nil {
				// Do refuses the same names (a definition stored before the
				// file changed).
				if err := m.Do(ctx, scriptTestRun(s, scriptDef(tc.action, map[string]string{"background": "wait"}), &Call{}, Post)); err == nil {
					t.Errorf("Do(%q) ran", tc.action)
				}
			}
		})
	}
}

func TestScriptDirectoryMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, dir := range []string{missing, ""} {
		s := scriptTestService(t, dir)
		m := newScript(s)
		ctx := t.Context()
		check := func(what string, err error) {
			t.Helper()
			e, ok := errors.AsType[*apierr.Error](err)
			if !ok || e.Code != apierr.ConfigAdmin || !strings.HasPrefix(e.Message(), "ERR302: Unable to open script directory: ") {
				t.Fatalf("%s with directory %q = %v", what, dir, err)
			}
			if dir != "" && !strings.HasSuffix(e.Message(), dir) {
				t.Errorf("%s: %q does not name the directory", what, e.Message())
			}
		}
		_, err := m.Actions(ctx)
		check("Actions", err)
		check("Check", m.Check(ctx, scriptDef("x.sh", nil)))
		if _, err := s.Set(ctx, scriptDef("x.sh", nil), false); !apierr.Is(err, apierr.ConfigAdmin) {
			t.Errorf("Set = %v", err)
		}
		if err := m.Do(ctx, scriptTestRun(s, scriptDef("x.sh", map[string]string{"background": "wait"}), &Call{}, Post)); err == nil {
			t.Error("Do without a script directory succeeded")
		}
	}
}

func TestScriptModuleInfo(t *testing.T) {
	m := newScript(scriptTestService(t, t.TempDir()))
	if m.Name() != "Script" || !slices.Equal(m.Positions(), []string{"post", "pre"}) || m.DefaultAbort() {
		t.Errorf("module %s %v %v", m.Name(), m.Positions(), m.DefaultAbort())
	}
}
