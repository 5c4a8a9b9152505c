package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/otp"
)

// BenchmarkValidateCheckEvents is the durable success path of
// /validate/check without event handler definitions and with a WebHook
// on validate_check to a receiver that takes 2 s per request: the hook
// is sent in the background, what the request pays is the handler's
// run (its tags and its audit entry).
func BenchmarkValidateCheckEvents(b *testing.B) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	b.Cleanup(slow.Close)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	b.Cleanup(fast.Close)
	for _, c := range []struct{ name, url string }{{"none", ""}, {"webhook-fast", fast.URL}, {"webhook-slow", slow.URL}} {
		hook := c.url != ""
		b.Run(c.name, func(b *testing.B) {
			const users = 64
			h, keys, do := eventBenchEnv(b, users)
			if hook {
				do("POST", "/event", url.Values{"name": {"hook"}, "event": {"validate_check"}, "handlermodule": {"WebHook"},
					"action": {"post_webhook"}, "option.URL": {c.url}, "option.content_type": {"application/json"},
					"option.replace": {"True"}, "option.data": {`{"serial": "{serial}", "user": "{username}"}`}})
			}
			counter := make([]atomic.Uint64, users)
			var next atomic.Int32
			b.SetParallelism(16)
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			defer func() { b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op") }()
			b.RunParallel(func(pb *testing.PB) {
				u := int(next.Add(1)-1) % users
				for pb.Next() {
					c := counter[u].Add(1) - 1
					form := url.Values{"user": {fmt.Sprintf("ev%03d", u)}, "realm": {"bench"}, "pass": {otp.HOTP(keys[u], c, 6, otp.SHA1)}}
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
		})
	}
}

// eventBenchEnv is hotpBenchEnv in a temporary directory, users ev000...,
// serials EV0000..., with loopback webhook receivers allowed.
func eventBenchEnv(b *testing.B, users int) (http.Handler, [][]byte, func(method, path string, v url.Values)) {
	return hotpBenchEnv(b, b.TempDir(), users, "ev", "EV", authsrv.WithDialPolicy(loopbackDial))
}

// BenchmarkValidateBurst200 is the burst: 200 parallel
// /validate/check requests at once, without event handler definitions
// and with a WebHook on validate_check to a receiver that takes 2 s per
// request. It reports the latency of the requests (p50, p99 over every
// burst of the run).
func BenchmarkValidateBurst200(b *testing.B) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
	}))
	b.Cleanup(slow.Close)
	for _, c := range []struct{ name, url string }{{"none", ""}, {"webhook-slow", slow.URL}} {
		b.Run(c.name, func(b *testing.B) {
			const users = 200
			h, keys, do := eventBenchEnv(b, users)
			if c.url != "" {
				do("POST", "/event", url.Values{"name": {"hook"}, "event": {"validate_check"}, "handlermodule": {"WebHook"},
					"action": {"post_webhook"}, "option.URL": {c.url}, "option.content_type": {"application/json"},
					"option.replace": {"True"}, "option.data": {`{"serial": "{serial}", "user": "{username}"}`}})
			}
			var lat []time.Duration
			var mu sync.Mutex
			counter := make([]uint64, users)
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				for u := range users {
					pass := otp.HOTP(keys[u], counter[u], 6, otp.SHA1)
					counter[u]++
					wg.Go(func() {
						form := url.Values{"user": {fmt.Sprintf("ev%03d", u)}, "realm": {"bench"}, "pass": {pass}}
						req := httptest.NewRequest("POST", "/validate/check", strings.NewReader(form.Encode()))
						req.Header.Set("Content-Type", formType)
						rec := httptest.NewRecorder()
						start := time.Now()
						h.ServeHTTP(rec, req)
						d := time.Since(start)
						if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"value":true`) {
							b.Errorf("check: %d %s", rec.Code, rec.Body)
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
