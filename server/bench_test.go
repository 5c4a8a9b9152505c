package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/store/storetest"
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
	h := server.New(s)
	return h, benchAdminToken(b, s, h)
}

// benchAdminToken creates the administrator "admin" and logs it in
// through h: its token carries the account's session stamp.
func benchAdminToken(b *testing.B, s *authsrv.Server, h http.Handler) string {
	b.Helper()
	if err := s.Admins().Add(b.Context(), "admin", adminPass); err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/auth", strings.NewReader(url.Values{"username": {"admin"}, "password": {adminPass}}.Encode()))
	req.Header.Set("Content-Type", formType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var env struct {
		Result struct {
			Value struct {
				Token string `json:"token"`
			} `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != 200 || env.Result.Value.Token == "" {
		b.Fatalf("login: %d %s", rec.Code, rec.Body)
	}
	return env.Result.Value.Token
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

// BenchmarkAdminRequestNoSync is an admin GET on a store that does not
// fsync: the request's CPU cost (authentication, the rights check, the
// audit entry) without the disk's latency, one request at a time.
func BenchmarkAdminRequestNoSync(b *testing.B) {
	s, err := authsrv.New(authsrv.WithStore(storetest.Open(b)), authsrv.WithEncKey(testKey), authsrv.WithJWTKey(testKey), authsrv.WithKDFParams(cheapKDF))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	h := server.New(s)
	tok := benchAdminToken(b, s, h)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest("GET", "/realm/superuser", nil)
		req.Header.Set("Authorization", tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}
