package eventing

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/store/storetest"
)

// scriptTestService returns a service on a real store whose script
// directory is scriptDir ("" for none), with the Script and mangler
// modules registered.
func scriptTestService(t *testing.T, scriptDir string) *Service {
	t.Helper()
	s := New(Config{Store: storetest.Open(t), ScriptDir: scriptDir, Log: zerolog.Nop()})
	t.Cleanup(s.Close)
	s.Register(newScript(s))
	s.Register(newRequestMangler(s))
	s.Register(newResponseMangler(s))
	return s
}

// scriptTestRun is one run of d for c at position, as Service.Run builds
// it.
func scriptTestRun(s *Service, d Definition, c *Call, position string) *Run {
	if d.Options == nil {
		d.Options = map[string]string{}
	}
	return &Run{Def: d, Call: c, Position: position, svc: s, facts: &facts{}}
}

// writeTestScript writes an executable shell script name into dir.
func writeTestScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// needShell skips a test that runs shell scripts where there is no
// /bin/sh.
func needShell(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("shell scripts need a Unix system")
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
}
