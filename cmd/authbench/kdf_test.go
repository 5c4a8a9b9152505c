package main

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/secret"
)

func TestMeasureKDF(t *testing.T) {
	var run kdfRun
	for range 2 {
		n, took := measureKDF(t.Context(), 150*time.Millisecond)
		if n <= 0 || took < 150*time.Millisecond {
			t.Fatalf("measureKDF = %d hashes in %v", n, took)
		}
		run.add(n, took)
	}
	k := run.result(2)
	p := secret.DefaultParams
	want := float64(run.hashes) / run.elapsed.Seconds()
	if k.HashesPerSec <= 0 || k.HashesPerSec-want > 0.001 || want-k.HashesPerSec > 0.001 || k.Rounds != 2 ||
		k.Goroutines != runtime.NumCPU() || k.Time != p.Time || k.MemoryKiB != p.Memory || k.Threads != p.Threads {
		t.Fatalf("result = %+v, want %.3f hashes/s over 2 rounds", k, want)
	}
	var b strings.Builder
	s := summary{Mode: modePIN, RequestsPerSec: k.HashesPerSec / 2, KDFAlone: &k}
	s.KDFAlone.LoadShare = 0.5
	if err := s.writeText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "2 rounds between the load's); the load is 50% of it") {
		t.Errorf("report:\n%s", b.String())
	}
}
