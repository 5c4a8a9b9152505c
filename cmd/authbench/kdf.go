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
	// Rounds is the number of slices the hashing ran in, alternating
	// with slices of the load.
	Rounds int `json:"rounds"`
	// LoadShare is the load's requests per second over HashesPerSec.
	LoadShare float64 `json:"load_share"`
}

// kdfRun sums the slices of hashing alone.
type kdfRun struct {
	hashes  int64
	elapsed time.Duration
}

func (k *kdfRun) add(hashes int64, elapsed time.Duration) {
	k.hashes += hashes
	k.elapsed += elapsed
}

// result is the rate over all slices.
func (k *kdfRun) result(rounds int) kdfAlone {
	p := secret.DefaultParams
	out := kdfAlone{Goroutines: runtime.NumCPU(), Time: p.Time, MemoryKiB: p.Memory, Threads: p.Threads, Rounds: rounds}
	if k.elapsed > 0 {
		out.HashesPerSec = round3(float64(k.hashes) / k.elapsed.Seconds())
	}
	return out
}

// measureKDF hashes for d (or until ctx ends) on one goroutine per CPU
// and returns the number of hashes and the time taken.
func measureKDF(ctx context.Context, d time.Duration) (int64, time.Duration) {
	p := secret.DefaultParams
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range runtime.NumCPU() {
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
	return done.Load(), time.Since(start)
}
