package main

import (
	"context"
	"crypto/rand"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/authsrv/authsrv/internal/secret"
)

// kdfAlone is what the PIN hash alone allows on this machine: Argon2id
// with the server's default parameters (the ones new PINs get) on one
// goroutine per CPU, with nothing else running. A PIN check of mode pin
// or wrong costs one such hash, so this bounds their requests per second.
type kdfAlone struct {
	HashesPerSec float64 `json:"hashes_per_second"`
	Goroutines   int     `json:"goroutines"`
	Time         uint32  `json:"t"`
	MemoryKiB    uint32  `json:"m_kib"`
	Threads      uint8   `json:"p"`
	// LoadShare is the load's requests per second over HashesPerSec.
	LoadShare float64 `json:"load_share"`
}

// measureKDF hashes for d (or until ctx ends) and returns the rate.
func measureKDF(ctx context.Context, d time.Duration) kdfAlone {
	p := secret.DefaultParams
	n := runtime.NumCPU()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			salt := make([]byte, p.SaltLen)
			_, _ = rand.Read(salt)
			for ctx.Err() == nil {
				argon2.IDKey([]byte("authbench-kdf-baseline"), salt, p.Time, p.Memory, p.Threads, p.KeyLen)
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return kdfAlone{HashesPerSec: round3(float64(done.Load()) / time.Since(start).Seconds()), Goroutines: n,
		Time: p.Time, MemoryKiB: p.Memory, Threads: p.Threads}
}
