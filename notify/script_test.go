//go:build unix

package notify_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/notify"
)

// writeScript writes an executable shell script into dir.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func scriptGateway(name, script string, extra ...string) notify.Gateway {
	opts := map[string]string{"script": script, "background": "wait"}
	for i := 0; i+1 < len(extra); i += 2 {
		opts[extra[i]] = extra[i+1]
	}
	return notify.Gateway{Name: name, Module: notify.ModuleScript, Options: opts}
}

// waitFile waits for a file to appear and returns its content.
func waitFile(t *testing.T, p string, limit time.Duration) []byte {
	t.Helper()
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			return b
		}
	}
	t.Fatalf("%s did not appear within %v", p, limit)
	return nil
}

func TestSMSScript(t *testing.T) {
	t.Setenv("AUTHSRV_TEST_SECRET", "env-secret-6161")
	base := t.TempDir()
	dir := filepath.Join(base, "scripts")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// args.sh records its argument count and arguments, NUL-separated,
	// and its environment.
	writeScript(t, dir, "args.sh", `d=$(dirname "$0")
printf '%s\0' "$#" "$@" > "$d/args.out"
env > "$d/env.out"
`)
	writeScript(t, dir, "fail.sh", "exit 3\n")
	writeScript(t, dir, "slow.sh", "sleep 30\n")
	writeScript(t, dir, "bg.sh", `sleep 0.2; printf '%s' "$1" > "$(dirname "$0")/bg.out"`+"\n")
	if err := os.WriteFile(filepath.Join(dir, "noexec.sh"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	evil := writeScript(t, outside, "evil.sh", `touch "$(dirname "$0")/ran"`+"\n")
	if err := os.Symlink(evil, filepath.Join(dir, "link-out.sh")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "dir-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "args.sh"), filepath.Join(dir, "link-in.sh")); err != nil {
		t.Fatal(err)
	}

	e := newEnv(t, func(c *notify.Config) { c.AllowScripts = dir })
	ctx := t.Context()

	t.Run("ArgvUnmodified", func(t *testing.T) {
		for _, name := range []string{"args.sh", filepath.Join(dir, "args.sh"), "link-in.sh"} {
			t.Run(filepath.Base(name), func(t *testing.T) {
				_ = os.Remove(filepath.Join(dir, "args.out"))
				if _, err := e.s.SetGateway(ctx, scriptGateway("sc", name, "REGEXP", "/^00/+/")); err != nil {
					t.Fatal(err)
				}
				phone := `0049 1; rm -rf / $(touch pwned) "q"`
				text := "Code 123 ; rm -rf / $(touch pwned2) `id` 'x'\nline2 *"
				if err := e.s.SendSMS(ctx, "sc", phone, text); err != nil {
					t.Fatal(err)
				}
				got := strings.Split(strings.TrimSuffix(string(waitFile(t, filepath.Join(dir, "args.out"), time.Second)), "\x00"), "\x00")
				want := []string{"2", `+49 1; rm -rf / $(touch pwned) "q"`, text}
				if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
					t.Errorf("argv %q, want %q", got, want)
				}
				for _, f := range []string{"pwned", "pwned2"} {
					if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
						t.Errorf("a shell ran: %s exists", f)
					}
				}
				env, _ := os.ReadFile(filepath.Join(dir, "env.out"))
				if bytes.Contains(env, []byte("env-secret-6161")) {
					t.Error("the script inherited the server's environment")
				}
			})
		}
	})

	t.Run("OutsideRefused", func(t *testing.T) {
		for _, name := range []string{"../outside/evil.sh", evil, "link-out.sh", "dir-out/evil.sh", "./../outside/evil.sh", dir + "/../outside/evil.sh", "/bin/sh", "", "."} {
			t.Run(name, func(t *testing.T) {
				_, err := e.s.SetGateway(ctx, scriptGateway("bad", name))
				wantCode(t, err, apierr.Parameter)
			})
		}
		// A symlink swapped in after the definition was saved is caught
		// when sending.
		if _, err := e.s.SetGateway(ctx, scriptGateway("later", "later.sh")); err != nil {
			t.Fatalf("a missing script inside the directory should be accepted: %v", err)
		}
		if err := os.Symlink(evil, filepath.Join(dir, "later.sh")); err != nil {
			t.Fatal(err)
		}
		wantSendFailed(t, e.s.SendSMS(ctx, "later", "1", "x"))
		if _, err := os.Stat(filepath.Join(outside, "ran")); err == nil {
			t.Error("the script outside the directory ran")
		}
	})

	t.Run("NotExecutable", func(t *testing.T) {
		if _, err := e.s.SetGateway(ctx, scriptGateway("noexec", "noexec.sh")); err != nil {
			t.Fatal(err)
		}
		wantSendFailed(t, e.s.SendSMS(ctx, "noexec", "1", "x"))
	})

	t.Run("ExitStatus", func(t *testing.T) {
		_, _ = e.s.SetGateway(ctx, scriptGateway("fail", "fail.sh"))
		err := e.s.SendSMS(ctx, "fail", "1", "otp-3131")
		wantSendFailed(t, err, "otp-3131")
		if !strings.Contains(err.Error(), "exit status 3") {
			t.Errorf("err %v", err)
		}
	})

	t.Run("Timeout", func(t *testing.T) {
		_, _ = e.s.SetGateway(ctx, scriptGateway("slow", "slow.sh", "TIMEOUT", "1"))
		err := within(t, 3*time.Second, func() error { return e.s.SendSMS(ctx, "slow", "1", "x") })
		wantSendFailed(t, err)
		if !strings.Contains(err.Error(), "did not finish in time") {
			t.Errorf("err %v", err)
		}
	})

	t.Run("Background", func(t *testing.T) {
		_, _ = e.s.SetGateway(ctx, scriptGateway("bg", "bg.sh", "background", "background"))
		err := within(t, 150*time.Millisecond, func() error { return e.s.SendSMS(ctx, "bg", "+4917", "x") })
		if err != nil {
			t.Fatal(err)
		}
		if got := string(waitFile(t, filepath.Join(dir, "bg.out"), 5*time.Second)); got != "+4917" {
			t.Errorf("background script got %q", got)
		}
	})

	t.Run("Disabled", func(t *testing.T) {
		off := newEnv(t)
		_, err := off.s.SetGateway(ctx, scriptGateway("sc", "args.sh"))
		wantCode(t, err, apierr.ConfigAdmin)
	})
}
