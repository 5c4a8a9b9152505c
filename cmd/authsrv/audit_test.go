package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
)

// TestKill9KeepsAnsweredEntries: a client that got an answer finds its
// audit entry after the server is killed with SIGKILL right after it; the
// chain still verifies.
func TestKill9KeepsAnsweredEntries(t *testing.T) {
	dir := shortDir(t)
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "disabled"}
	cmd, out, _ := child(t, env, "serve", "-listen", "127.0.0.1:0")
	waitFor(t, "serving", func() bool { return servingRe.MatchString(out.String()) })
	addr := servingRe.FindStringSubmatch(out.String())[2]
	const n = 40
	for i := range n {
		resp, err := http.PostForm("http://"+addr+"/auth", url.Values{"username": {fmt.Sprintf("kill9-%02d", i)}, "password": {"x"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("answer %d", resp.StatusCode)
		}
	}
	// The last answer is in; kill at once.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	s, err := authsrv.New(authsrv.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	res, err := s.Audit().Search(context.Background(), audit.Query{Filters: map[string]string{"user": "kill9-*"}, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != n {
		t.Errorf("%d of %d answered requests are in the audit after kill -9", res.Count, n)
	}
	rep, err := s.Audit().Verify(context.Background())
	if err != nil || !rep.OK() {
		t.Errorf("verify after kill -9: %+v %v", rep.Problems, err)
	}
}

// TestAuditVerifyNamesEditedEntry: one byte of one entry edited in a copy
// of the data file makes "authsrv audit verify -db" name that entry.
func TestAuditVerifyNamesEditedEntry(t *testing.T) {
	dir := shortDir(t)
	s, err := authsrv.New(authsrv.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Audit().Write(context.Background(), audit.Entry{Action: "POST /auth", User: fmt.Sprintf("marker-user-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "disabled"}
	if code, o, e := cli(t, env, "", "audit", "verify"); code != 0 || !strings.Contains(o, "5 entries (1..5): OK") {
		t.Fatalf("verify untouched: %d %q %q", code, o, e)
	}
	raw, err := os.ReadFile(filepath.Join(dir, authsrv.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	// Every copy is edited: free pages may hold an older copy of the page.
	if !bytes.Contains(raw, []byte("marker-user-3")) {
		t.Fatal("entry bytes not found in the data file")
	}
	raw = bytes.ReplaceAll(raw, []byte("marker-user-3"), []byte("marker-user-7"))
	edited := filepath.Join(filepath.Dir(dir), "copy.db")
	if err := os.WriteFile(edited, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	code, o, e := cli(t, env, "", "audit", "verify", "-db", edited)
	if code != 1 || !regexp.MustCompile(`(?m)^entry 4: edited`).MatchString(o) {
		t.Errorf("verify edited copy: %d %q %q", code, o, e)
	}
	if strings.Contains(o, "entry 3:") || strings.Contains(o, "entry 5: edited") {
		t.Errorf("other entries were named: %q", o)
	}
}
