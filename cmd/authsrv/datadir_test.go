package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mkdirData creates the data directory dir, as an operator (or systemd's
// StateDirectory=) does before any command but serve may use it.
func mkdirData(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDefaultDataDir(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		ppid int
		want string
	}{
		{"a shell", nil, 4242, CheckoutDataDir},
		{"StateDirectory", map[string]string{"STATE_DIRECTORY": "/var/lib/authsrv-test", "INVOCATION_ID": "x"}, 1, "/var/lib/authsrv-test"},
		{"several state directories", map[string]string{"STATE_DIRECTORY": "/srv/a/:/srv/b"}, 1, "/srv/a"},
		{"relative state directory", map[string]string{"STATE_DIRECTORY": "rel"}, 4242, CheckoutDataDir},
		{"a service without StateDirectory", map[string]string{"INVOCATION_ID": "0123abcd"}, 1, ServiceDataDir},
		{"a desktop terminal started by a user service", map[string]string{"INVOCATION_ID": "0123abcd"}, 4242, CheckoutDataDir},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := defaultDataDir(func(k string) string { return tc.env[k] }, tc.ppid); got != tc.want {
				t.Errorf("defaultDataDir = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCommandsRefuseMissingDataDir: no command but serve makes a data
// directory; each names the absolute path it looked at and exits 1.
func TestCommandsRefuseMissingDataDir(t *testing.T) {
	base := t.TempDir()
	missing := filepath.Join(base, "nowhere")
	backup := filepath.Join(base, "backup.tar")
	commands := [][]string{
		{"admin", "list"}, {"admin", "add", "x"}, {"admin", "delete", "x"}, {"admin", "passwd", "x"},
		{"admin", "disable", "x"}, {"admin", "enable", "x"},
		{"jwt", "rotate"}, {"jwt", "list"}, {"api", "createtoken"},
		{"backup", "-out", backup}, {"restore", backup},
		{"audit", "verify"}, {"audit", "verify", "-db", backup}, {"compact"},
	}
	env := map[string]string{"AUTHSRV_LOG_LEVEL": "disabled"}
	for _, args := range commands {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errs := cli(t, env, "pw\n", append(args, "-data-dir", missing)...)
			if code != 1 || out != "" || !strings.Contains(errs, "data directory "+missing+" does not exist") {
				t.Errorf("code %d, stdout %q, stderr %q", code, out, errs)
			}
			for _, p := range []string{missing, backup} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s was created: %v", p, err)
				}
			}
		})
	}

	t.Run("restore says how to restore into a new directory", func(t *testing.T) {
		_, _, errs := cli(t, env, "", "restore", backup, "-data-dir", missing)
		if !strings.Contains(errs, "mkdir -m 0700 "+missing) {
			t.Errorf("stderr %q", errs)
		}
	})

	t.Run("a file is no data directory", func(t *testing.T) {
		file := filepath.Join(base, "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errs := cli(t, env, "", "admin", "list", "-data-dir", file)
		if code != 1 || !strings.Contains(errs, file+" is not a directory") {
			t.Errorf("code %d, stderr %q", code, errs)
		}
	})

	t.Run("the default from another directory", func(t *testing.T) {
		t.Chdir(base)
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		code, _, errs := cli(t, env, "", "admin", "list")
		want := filepath.Join(wd, "authsrv-data")
		if code != 1 || !strings.Contains(errs, "data directory "+want+" does not exist") {
			t.Errorf("code %d, stderr %q; want the path %s", code, errs, want)
		}
		if _, err := os.Stat(want); !os.IsNotExist(err) {
			t.Errorf("%s was created: %v", want, err)
		}
	})

	t.Run("STATE_DIRECTORY", func(t *testing.T) {
		state := filepath.Join(base, "state")
		senv := map[string]string{"AUTHSRV_LOG_LEVEL": "disabled", "STATE_DIRECTORY": state}
		if code, _, errs := cli(t, senv, "", "admin", "list"); code != 1 || !strings.Contains(errs, state+" does not exist") {
			t.Errorf("missing state directory: code %d, stderr %q", code, errs)
		}
		mkdirData(t, state) // what systemd does for StateDirectory=
		if code, _, errs := cli(t, senv, "pw\n", "admin", "add", "alice"); code != 0 {
			t.Fatalf("admin add: code %d, stderr %q", code, errs)
		}
		if _, err := os.Stat(filepath.Join(state, "authsrv.db")); err != nil {
			t.Errorf("the store is not in $STATE_DIRECTORY: %v", err)
		}
	})
}
