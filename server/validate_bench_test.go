package server_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/server"
	"github.com/authsrv/authsrv/store/bolt"
)

// benchUsers is how many users (one HOTP token each) the validate
// benchmarks spread their requests over.
const benchUsers = 256

// validateBench is the environment the validate benchmarks share across
// their rounds (the setup enrols benchUsers tokens, which takes seconds).
var validateBench struct {
	once    sync.Once
	h       http.Handler
	keys    [][]byte
	counter []uint64 // next HOTP counter per user
}

// benchValidateEnv enrols benchUsers passwd users with one HOTP token each
// (no PIN) in realm "bench" with otppin=none, on a durable store, once per
// process, and returns the handler and the token keys.
func benchValidateEnv(b *testing.B) (http.Handler, [][]byte) {
	b.Helper()
	validateBench.once.Do(func() {
		validateBench.h, validateBench.keys = newValidateBenchEnv(b)
		validateBench.counter = make([]uint64, benchUsers)
	})
	if validateBench.h == nil {
		b.Fatal("setup failed")
	}
	return validateBench.h, validateBench.keys
}

func newValidateBenchEnv(b *testing.B) (http.Handler, [][]byte) {
	// The store outlives this round: the directory is removed at exit by
	// nobody, so it lives under the test binary's temporary root.
	dir, err := os.MkdirTemp("", "authsrv-bench")
	if err != nil {
		b.Fatal(err)
	}
	h, keys, _ := hotpBenchEnv(b, dir, benchUsers, "bench", "BENCH")
	return h, keys
}

// hotpBenchEnv is a server on a durable store in dir with users passwd
// users <login>NNN, one HOTP token <SERIAL>NNNN each (no PIN), in realm
// "bench" with otppin=none. It returns the handler, the token keys and a
// function that sends an administrator's request.
func hotpBenchEnv(b *testing.B, dir string, users int, login, serial string, opts ...authsrv.Option) (http.Handler, [][]byte, func(method, path string, v url.Values)) {
	db, err := bolt.Open(filepath.Join(dir, "authsrv.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	s, err := authsrv.New(append([]authsrv.Option{authsrv.WithStore(db), authsrv.WithEncKey(testKey), authsrv.WithJWTKey(testKey),
		authsrv.WithKDFParams(cheapKDF)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	h := server.New(s)
	tok := benchAdminToken(b, s, h)
	do := func(method, path string, v url.Values) {
		req := httptest.NewRequest(method, path, strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", formType)
		req.Header.Set("Authorization", tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
	}
	var lines strings.Builder
	for i := range users {
		fmt.Fprintf(&lines, "%s%03d:x:%d:%d:Bench User:/home/%s%03d:/bin/sh\n", login, i, 5000+i, 5000+i, login, i)
	}
	path := filepath.Join(dir, "passwd")
	if err := os.WriteFile(path, []byte(lines.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	do("POST", "/resolver/benchfile", url.Values{"type": {"passwdresolver"}, "fileName": {path}})
	do("POST", "/realm/bench", url.Values{"resolvers": {"benchfile"}})
	do("POST", "/policy/benchpin", url.Values{"scope": {"authentication"}, "action": {"otppin=none"}, "realm": {"bench"}})
	keys := make([][]byte, users)
	for i := range keys {
		keys[i] = make([]byte, 20)
		_, _ = rand.Read(keys[i])
		do("POST", "/token/init", url.Values{"type": {"hotp"}, "serial": {fmt.Sprintf("%s%04d", serial, i)}, "otpkey": {hex.EncodeToString(keys[i])},
			"user": {fmt.Sprintf("%s%03d", login, i)}, "realm": {"bench"}})
	}
	return h, keys, do
}

// BenchmarkValidateCheckHOTP is the durable success path of
// /validate/check: user lookup, one HOTP check, the counter commit and the
// audit entry, each OTP fresh. Every goroutine owns its users' tokens.
func BenchmarkValidateCheckHOTP(b *testing.B) {
	h, keys := benchValidateEnv(b)
	var next atomic.Int32
	b.SetParallelism(16)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)-1) % 32
		counter := validateBench.counter
		mine := []int{i}
		for j := i + 32; j < benchUsers; j += 32 {
			mine = append(mine, j)
		}
		k := 0
		for pb.Next() {
			u := mine[k%len(mine)]
			k++
			form := url.Values{"user": {fmt.Sprintf("bench%03d", u)}, "realm": {"bench"}, "pass": {otp.HOTP(keys[u], counter[u], 6, otp.SHA1)}}
			counter[u]++
			req := httptest.NewRequest("POST", "/validate/check", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", formType)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"value":true`) {
				b.Errorf("check: %d %s", rec.Code, rec.Body)
				return
			}
		}
	})
}

// cpuTime is the process's user and system CPU time: on a shared machine
// it is steadier than the wall time per operation.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
