package server_test

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/server"
)

// importFile is an oathcsv file of n HOTP tokens named prefix0000...
func importFile(t *testing.T, prefix string, n int) (body []byte, ctype string) {
	t.Helper()
	var csv strings.Builder
	for i := range n {
		fmt.Fprintf(&csv, "%s%04d,3132333435363738393031323334353637383930,hotp,6\n", prefix, i)
	}
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.WriteField("type", "oathcsv"); err != nil {
		t.Fatal(err)
	}
	f, err := w.CreateFormFile("file", prefix+".csv")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(csv.String())); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.FormDataContentType()
}

// TestAbandonedTokenWritesAreAudited: token enrollments and imports whose
// clients reset the connection right after sending (or in the middle of
// the file) leave no token without its audit entry, and the audit chain
// verifies.
func TestAbandonedTokenWritesAreAudited(t *testing.T) {
	e, tok := tokenEnv(t)
	srv := httptest.NewServer(server.New(e.s))
	addr := srv.Listener.Addr().String()
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("listener %s is not on loopback", addr)
	}

	const inits = 100
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range inits {
		body := url.Values{"serial": {fmt.Sprintf("ABN%03d", i)}, "genkey": {"1"}, "pin": {"1234"},
			"user": {"alice"}, "realm": {"realm1"}}.Encode()
		raw := rawRequest("POST", "/token/init", tok, formType, []byte(body))
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// Most clients give up at once or while the server works;
			// every tenth waits for the answer's first byte.
			wait := time.Duration(i%10) * 10 * time.Millisecond
			if i%10 == 9 {
				wait = 2 * time.Minute
			}
			resetAfter(t, addr, raw, len(raw), wait)
		})
	}
	// Imports of 200 tokens: reset in the middle of the file, and right
	// after the whole request.
	const perFile = 200
	imports := []struct {
		prefix string
		whole  bool
		wait   time.Duration
	}{{"IMPA", false, 0}, {"IMPB", true, 0}, {"IMPC", false, 50 * time.Millisecond}, {"IMPD", true, 20 * time.Millisecond}, {"IMPE", true, 2 * time.Minute}}
	for _, im := range imports {
		body, ctype := importFile(t, im.prefix, perFile)
		raw := rawRequest("POST", "/token/load/"+im.prefix+".csv", tok, ctype, body)
		n := len(raw)
		if !im.whole {
			n = len(raw) - len(body)/2
		}
		wg.Go(func() { resetAfter(t, addr, raw, n, im.wait) })
	}
	wg.Wait()
	// Close waits until every request the server accepted has finished.
	done := make(chan struct{})
	go func() { srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the server did not become idle")
	}

	ctx := t.Context()
	entries := map[string][]audit.Row{}
	err := e.s.Audit().Each(ctx, audit.Query{Filters: map[string]string{"action": "POST /token/*"}}, func(r audit.Row) error {
		entries[r["action"].(string)] = append(entries[r["action"].(string)], r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Every enrolled token has its successful entry, and every successful
	// entry its token.
	initOK := map[string]bool{}
	for _, r := range entries["POST /token/init"] {
		if r["success"] == 1 {
			initOK[r["serial"].(string)] = true
		}
	}
	enrolled := 0
	for i := range inits {
		serial := fmt.Sprintf("ABN%03d", i)
		exists, err := e.s.Tokens().Exists(ctx, serial)
		if err != nil {
			t.Fatal(err)
		}
		if exists {
			enrolled++
		}
		if exists != initOK[serial] {
			t.Errorf("%s: token exists %v, successful audit entry %v", serial, exists, initOK[serial])
		}
	}
	// Every import is all or nothing, with an entry naming what it
	// committed.
	imported := 0
	for _, im := range imports {
		n := 0
		for i := range perFile {
			if ok, _ := e.s.Tokens().Exists(ctx, fmt.Sprintf("%s%04d", im.prefix, i)); ok {
				n++
			}
		}
		ok := 0
		for _, r := range entries["POST /token/load/"+im.prefix+".csv"] {
			if r["success"] == 1 {
				ok++
				if r["info"] != fmt.Sprintf("imported %d tokens", perFile) {
					t.Errorf("%s: entry info %q", im.prefix, r["info"])
				}
			}
		}
		switch {
		case n == 0 && ok == 0:
		case n == perFile && ok == 1:
			imported++
		default:
			t.Errorf("%s: %d of %d tokens exist, %d successful entries", im.prefix, n, perFile, ok)
		}
		if !im.whole && n != 0 {
			t.Errorf("%s: an import cut in the middle of the file imported %d tokens", im.prefix, n)
		}
	}
	t.Logf("%d of %d enrollments and %d of %d imports went through", enrolled, inits, imported, len(imports))
	// The clients that waited for the answer's first byte saw changes
	// made: the check above was not empty.
	if enrolled < inits/10 || imported < 1 {
		t.Errorf("only %d enrollments and %d imports went through", enrolled, imported)
	}

	rep, err := e.s.Audit().Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("audit verify: %+v", rep.Problems)
	}
}
