package server_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store/bolt"
)

// benchServer is a server on a real, fsync'd bbolt file.
func benchServer(b *testing.B) (http.Handler, string) {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "authsrv.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	s, err := authsrv.New(authsrv.WithStore(db), authsrv.WithEncKey(testKey), authsrv.WithJWTKey(testKey), authsrv.WithKDFParams(cheapKDF))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	tok, err := server.IssueToken(s, "admin", "", "admin")
	if err != nil {
		b.Fatal(err)
	}
	return server.New(s), tok
}

func benchParallel(b *testing.B, h http.Handler, path, tok string) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("GET", path, nil)
			if tok != "" {
				req.Header.Set("Authorization", tok)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 {
				b.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
			}
		}
	})
}

// BenchmarkAuditedRequest: an admin GET that writes its audit entry
// durably before answering (group-committed with the others in flight).
func BenchmarkAuditedRequest(b *testing.B) {
	h, tok := benchServer(b)
	b.SetParallelism(16)
	benchParallel(b, h, "/realm/superuser", tok)
}

// BenchmarkUnauditedProbe is the same path through the HTTP stack without
// a store write (the readiness probe reads the store once).
func BenchmarkUnauditedProbe(b *testing.B) {
	h, _ := benchServer(b)
	b.SetParallelism(16)
	benchParallel(b, h, "/healthz/readyz", "")
}
