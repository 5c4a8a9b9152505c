package server_test

import (
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// BenchmarkTokenInitHOTP enrolls HOTP tokens with genkey through POST
// /token/init on a store on disk (fsync on): the answer carries the
// three QR images. 16 clients, group-committed; tokens/s is the figure.
func BenchmarkTokenInitHOTP(b *testing.B) {
	h, tok := benchServer(b)
	b.ReportAllocs()
	b.SetParallelism(8)
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", "/token/init", strings.NewReader("type=hotp&genkey=1"))
			req.Header.Set("Content-Type", formType)
			req.Header.Set("Authorization", tok)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"img":"data:image/png;base64,`) {
				b.Fatalf("/token/init: %d %.200s", rec.Code, rec.Body)
			}
			n.Add(1)
		}
	})
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "tokens/s")
}
