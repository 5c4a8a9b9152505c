package token_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/otp"
	"github.com/authsrv/authsrv/internal/secret"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/token"
)

// BenchmarkCheckOTPDurable checks fresh HOTP values, each success written
// durably (bbolt with fsync) through the atomic check-and-advance; every
// parallel worker owns one token.
func BenchmarkCheckOTPDurable(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"), bolt.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	sealer, _ := secret.NewSealer(nil, bytes.Repeat([]byte{7}, 32))
	h, _ := secret.NewHasher(secret.HasherConfig{Params: cheap})
	svc := token.New(token.Config{Store: db, Sealer: sealer, Hasher: h})
	ctx := context.Background()
	const tokens = 256
	key := []byte("12345678901234567890")
	for i := range tokens {
		if _, _, err := svc.Init(ctx, token.InitRequest{Serial: fmt.Sprintf("B%04d", i), Params: token.Params{"otpkey": rfcKey}}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := next.Add(1) - 1
		serial := fmt.Sprintf("B%04d", id%tokens)
		var c uint64
		for pb.Next() {
			r, err := svc.CheckOTP(ctx, serial, otp.HOTP(key, c, 6, otp.SHA1), nil)
			if err != nil || !r.OK {
				b.Errorf("%s counter %d: %+v %v", serial, c, r, err)
				return
			}
			c++
		}
	})
}
