package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const unitFile = "systemd/authsrv.service"

// unitSettings returns the KEY=VALUE lines of a unit file, comments left
// out, in their order.
func unitSettings(unit string) [][2]string {
	var out [][2]string
	for line := range strings.SplitSeq(unit, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
	}
	return out
}

// TestSystemdUnitSettings: the unit runs authsrv serve with the hardening
// the README promises and no capability.
func TestSystemdUnitSettings(t *testing.T) {
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, kv := range unitSettings(string(b)) {
		got[kv[0]] = append(got[kv[0]], kv[1])
	}
	want := map[string]string{
		"ExecStart":               "/usr/local/bin/authsrv serve",
		"Restart":                 "on-failure",
		"KillSignal":              "SIGTERM",
		"DynamicUser":             "yes",
		"StateDirectory":          "authsrv",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"NoNewPrivileges":         "yes",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
		"SystemCallFilter":        "@system-service",
		"CapabilityBoundingSet":   "",
		"AmbientCapabilities":     "",
	}
	for k, v := range want {
		if len(got[k]) != 1 || got[k][0] != v {
			t.Errorf("%s: %q, want exactly %q", k, got[k], v)
		}
	}
}

// TestSystemdUnitVerifies runs systemd-analyze verify on the unit, with
// ExecStart pointing at an existing program (verify checks that it
// exists), alone and with the commented capability drop-in.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze is missing (Debian package systemd)")
		}
		t.Skip("systemd-analyze is missing (Debian package systemd)")
	}
	b, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const exec0 = "ExecStart=/usr/local/bin/authsrv "
	if !strings.Contains(unit, exec0) {
		t.Fatalf("no %q in the unit", exec0)
	}
	unit = strings.Replace(unit, exec0, "ExecStart="+bin+" ", 1)

	// verify exits 0 on an unknown or misspelt key, with a warning naming
	// the file: any line naming the unit or its drop-in is a failure.
	verify := func(t *testing.T, unit, dropIn string) string {
		t.Helper()
		dir := t.TempDir()
		path := filepath.Join(dir, "authsrv.service")
		if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		if dropIn != "" {
			d := path + ".d"
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "radius.conf"), []byte(dropIn), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, err := exec.CommandContext(t.Context(), analyze, "verify", "--man=no", path).CombinedOutput()
		var problems []string
		for line := range strings.SplitSeq(string(out), "\n") {
			if strings.Contains(line, dir) || strings.Contains(line, "authsrv.service") {
				problems = append(problems, line)
			}
		}
		if err != nil {
			problems = append(problems, "exit: "+err.Error())
		}
		return strings.Join(problems, "\n")
	}

	t.Run("unit", func(t *testing.T) {
		if p := verify(t, unit, ""); p != "" {
			t.Errorf("systemd-analyze verify:\n%s", p)
		}
	})
	t.Run("capability drop-in", func(t *testing.T) {
		dropIn := commentedDropIn(t, string(b))
		if !strings.Contains(dropIn, "AmbientCapabilities=CAP_NET_BIND_SERVICE\n") {
			t.Fatalf("drop-in %q", dropIn)
		}
		if p := verify(t, unit, dropIn); p != "" {
			t.Errorf("systemd-analyze verify:\n%s", p)
		}
	})
	t.Run("a misspelt key is caught", func(t *testing.T) {
		bad := strings.Replace(unit, "ProtectSystem=", "ProtectSystm=", 1)
		if p := verify(t, bad, ""); !strings.Contains(p, "ProtectSystm") {
			t.Errorf("verify did not report the misspelt key: %q", p)
		}
	})
}

// commentedDropIn returns the drop-in the unit's comments show: the lines
// from "#   [Service]" on that are indented in the comment.
func commentedDropIn(t *testing.T, unit string) string {
	t.Helper()
	var b strings.Builder
	in := false
	for line := range strings.SplitSeq(unit, "\n") {
		body, ok := strings.CutPrefix(line, "#   ")
		switch {
		case ok && body == "[Service]":
			in = true
		case !ok || !in:
			if in {
				return b.String()
			}
			continue
		}
		b.WriteString(body + "\n")
	}
	t.Fatal("no commented [Service] drop-in in the unit")
	return ""
}
