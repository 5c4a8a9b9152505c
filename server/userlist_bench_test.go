package server_test

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store/storetest"
)

// BenchmarkUserList1M is GET /user/ on a realm holding one passwd resolver
// with a million users: a prefix search's first page of 15 (user12*:
// 11,111 matches), an exact login, the first page of everyone at the
// default page size (1000), and a deep page. Setup reports how long the
// server took from saving the resolver to ready.
func BenchmarkUserList1M(b *testing.B) {
	const n = 1_000_000
	path, _ := resolvertest.PasswdFile(b, n)
	s, err := authsrv.New(authsrv.WithStore(storetest.Open(b)), authsrv.WithEncKey(testKey), authsrv.WithJWTKey(testKey), authsrv.WithKDFParams(cheapKDF))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := server.New(s)
	tok := benchAdminToken(b, s, h)
	get := func(target string) int {
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set("Authorization", tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
		return rec.Body.Len()
	}
	post := func(target string, v url.Values) {
		req := httptest.NewRequest("POST", target, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", formType)
		req.Header.Set("Authorization", tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("POST %s: %d %s", target, rec.Code, rec.Body)
		}
	}
	start := time.Now()
	post("/resolver/big", url.Values{"type": {"passwdresolver"}, "fileName": {path}})
	post("/realm/r1", url.Values{"resolvers": {"big"}})
	for s.Ready(b.Context()) != nil {
		time.Sleep(10 * time.Millisecond)
	}
	b.Logf("saved to ready: %v", time.Since(start).Round(time.Millisecond))
	for _, c := range []struct{ name, target string }{
		{"Prefix15", "/user/?realm=r1&username=user12*&pagesize=15"},
		{"Exact", "/user/?realm=r1&username=user123456"},
		{"AllDefaultPage", "/user/?realm=r1"},
		{"PrefixDeep", "/user/?realm=r1&username=user1*&pagesize=15&page=5000"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				get(c.target)
			}
		})
	}
}
