package authsrv_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestExampleRADIUS builds and runs examples/radius: the RADIUS server
// embedded in a small program accepts alice's PIN + OTP sent with layeh's
// client, and the program links no database or LDAP driver.
func TestExampleRADIUS(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("examples", "radius", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(src, []byte("\n")); n > 62 {
		t.Errorf("examples/radius/main.go has %d lines, want at most 62", n)
	}
	if _, err := os.Stat(filepath.Join("examples", "radius", "README.md")); err != nil {
		t.Error(err)
	}
	bin := filepath.Join(t.TempDir(), "radius")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/radius").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/radius: %v\n%s", err, out)
	}
	if want := "alice, PIN + OTP over RADIUS: Access-Accept (matching 1 tokens)\n"; string(out) != want {
		t.Errorf("examples/radius printed\n%s\nwant\n%s", out, want)
	}
	for _, d := range goListDeps(t, "./examples/radius") {
		if heavyDeps.MatchString(d) {
			t.Errorf("examples/radius depends on %s", d)
		}
	}
}
