package authsrv_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestExampleEmbed builds and runs examples/embed: a passwd user's HOTP
// token accepts the right OTP and rejects a wrong one, through the library
// alone.
func TestExampleEmbed(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("examples", "embed", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(src, []byte("\n")); n > 40 {
		t.Errorf("examples/embed/main.go has %d lines, want at most 40", n)
	}
	bin := filepath.Join(t.TempDir(), "embed")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/embed").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/embed: %v\n%s", err, out)
	}
	want := "alice, PIN + OTP accepted: true\nalice, PIN + OTP accepted: false\n"
	if string(out) != want {
		t.Errorf("examples/embed printed\n%s\nwant\n%s", out, want)
	}
}

// heavyDeps are the packages an embedder with passwd users must not link:
// the SQL and LDAP resolvers and their drivers.
var heavyDeps = regexp.MustCompile(`pgx|mysql|sqlite|ldap|/resolver/(sql|scim|builtin)$`)

func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var deps []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		deps = append(deps, sc.Text())
	}
	if len(deps) < 10 {
		t.Fatalf("go list -deps %s listed only %d packages", pkg, len(deps))
	}
	return deps
}

// TestEmbedLinksNoDrivers checks that the root package and examples/embed
// link no database or LDAP driver, and that the binary, which registers
// every resolver type, does (so the pattern still matches real names).
func TestEmbedLinksNoDrivers(t *testing.T) {
	for _, pkg := range []string{".", "./examples/embed"} {
		for _, d := range goListDeps(t, pkg) {
			if heavyDeps.MatchString(d) {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
	var seen []string
	for _, d := range goListDeps(t, "./cmd/authsrv") {
		if heavyDeps.MatchString(d) {
			seen = append(seen, d)
		}
	}
	for _, want := range []string{"pgx", "mysql", "sqlite", "ldap"} {
		if !strings.Contains(strings.Join(seen, " "), want) {
			t.Errorf("cmd/authsrv links no %s package: the pattern is out of date (%v)", want, seen)
		}
	}
}

// TestExamplesUsePublicAPI checks that no example imports an internal
// package: an example shows what a program outside this module can write.
func TestExamplesUsePublicAPI(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "./examples/...").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("no example packages")
	}
	for _, l := range lines {
		if strings.Contains(l, "/internal/") || strings.Contains(l, "/internal ") {
			t.Errorf("example imports an internal package: %s", l)
		}
	}
}
