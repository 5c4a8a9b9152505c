package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/token"
)

// auditStore makes a data directory with a token, a policy and n audit
// entries, of which the retention removed all but the newest keep.
func auditStore(t *testing.T, n, keep int) string {
	t.Helper()
	dir := shortDir(t)
	ctx := t.Context()
	s, err := authsrv.New(authsrv.WithDataDir(dir), authsrv.WithAuditRetention(0, uint64(keep), time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if _, _, err := s.Tokens().Init(ctx, token.InitRequest{Type: "hotp", Serial: "HOTP1",
		Params: token.Params{"otpkey": "3132333435363738393031323334353637383930"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Policies().Set(ctx, policy.Policy{Name: "keys", Scope: policy.ScopeAuthorization,
		Action: "api_key_required", Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	for start := 0; start < n; start += 500 {
		err := s.Store().Update(ctx, func(tx store.Tx) error {
			for i := start; i < min(start+500, n); i++ {
				e := audit.Entry{Action: "POST /validate/check", User: fmt.Sprintf("user-%d", i), Serial: "HOTP1",
					Info: "wrong otp value " + strings.Repeat("x", 200)}
				if _, err := s.Audit().WriteTx(tx, e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Audit().Retain(ctx); err != nil {
		t.Fatal(err)
	}
	return dir
}

var compactedRe = regexp.MustCompile(`compacted .*authsrv\.db: (\d+) → (\d+) bytes \(\d+ % smaller\); audit log: (\d+) entries \((\d+)\.\.(\d+)\): OK`)

func TestCompactShrinksTheStore(t *testing.T) {
	const n, keep = 6000, 1000
	dir := auditStore(t, n, keep)
	path := filepath.Join(dir, authsrv.DBFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "disabled"}
	code, o, e := cli(t, env, "", "compact")
	m := compactedRe.FindStringSubmatch(o)
	if code != 0 || m == nil {
		t.Fatalf("compact: %d %q %q", code, o, e)
	}
	before, _ := strconv.ParseInt(m[1], 10, 64)
	after, _ := strconv.ParseInt(m[2], 10, 64)
	if before != fi.Size() {
		t.Errorf("reported %d bytes before, the file had %d", before, fi.Size())
	}
	if after*2 > before {
		t.Errorf("compacted %d → %d bytes: want at most half, 5/6 of the audit entries were removed", before, after)
	}
	if m[3] != strconv.Itoa(keep) || m[4] != strconv.Itoa(n-keep+1) || m[5] != strconv.Itoa(n) {
		t.Errorf("audit log in the report: %q", m[0])
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != after || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file after compaction: %v %v, want %d bytes and mode 0600", fi, err, after)
	}
	if code, o, e := cli(t, env, "", "audit", "verify"); code != 0 || !strings.Contains(o, fmt.Sprintf("%d entries (%d..%d): OK", keep, n-keep+1, n)) {
		t.Errorf("audit verify after compaction: %d %q %q", code, o, e)
	}
	s, err := authsrv.New(authsrv.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if tok, err := s.Tokens().Get(t.Context(), "HOTP1"); err != nil || tok == nil {
		t.Errorf("token after compaction: %v", err)
	}
	if _, ok, err := s.Policies().Get(t.Context(), "keys"); err != nil || !ok {
		t.Errorf("policy after compaction: %v %v", ok, err)
	}
	// The compacted store keeps the chain going.
	if _, err := s.Audit().Write(t.Context(), audit.Entry{Action: "POST /auth", User: "after"}); err != nil {
		t.Fatal(err)
	}
	if rep, err := s.Audit().Verify(t.Context()); err != nil || !rep.OK() || rep.Entries != keep+1 {
		t.Errorf("verify after a write to the compacted store: %+v %v", rep, err)
	}
}

func TestCompactRefusesARunningServer(t *testing.T) {
	dir := auditStore(t, 10, 5)
	path := filepath.Join(dir, authsrv.DBFile)
	s, err := authsrv.New(authsrv.WithDataDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "disabled"}
	code, o, e := cli(t, env, "", "compact", "-open-timeout", "300ms")
	if code != 1 || !strings.Contains(e, "in use by another process") || !strings.Contains(e, "stop the server first") || o != "" {
		t.Errorf("compact while a server holds the data: %d %q %q", code, o, e)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, orig) {
		t.Error("the store changed")
	}
	assertOnlyStore(t, dir)
}

// TestCompactKeepsTheOriginalOnError: a copy whose audit chain does not
// verify is not put in place.
func TestCompactKeepsTheOriginalOnError(t *testing.T) {
	dir := auditStore(t, 20, 10)
	path := filepath.Join(dir, authsrv.DBFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Every copy of the entry's bytes is edited: the file's free pages may
	// hold older copies of the page that holds the live one.
	if !bytes.Contains(raw, []byte("user-15")) {
		t.Fatal("entry bytes not found in the data file")
	}
	raw = bytes.ReplaceAll(raw, []byte("user-15"), []byte("user-75"))
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AUTHSRV_DATA_DIR": dir, "AUTHSRV_LOG_LEVEL": "disabled"}
	code, o, e := cli(t, env, "", "compact")
	if code != 1 || !strings.Contains(e, "problems, the first at entry 16: edited") {
		t.Errorf("compact of a store with an edited entry: %d %q %q", code, o, e)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, raw) {
		t.Error("the store changed")
	}
	assertOnlyStore(t, dir)

	if err := os.Remove(filepath.Join(dir, authsrv.AuditKeyFile)); err != nil {
		t.Fatal(err)
	}
	if code, _, e := cli(t, env, "", "compact"); code != 1 || !strings.Contains(e, "the audit key") {
		t.Errorf("compact without the audit key: %d %q", code, e)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, raw) {
		t.Error("the store changed")
	}
}

// assertOnlyStore fails when a compaction left a temporary file.
func assertOnlyStore(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".compact-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
