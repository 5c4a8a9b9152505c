package main

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/secret"
)

func TestMeasureKDF(t *testing.T) {
	k := measureKDF(t.Context(), 300*time.Millisecond)
	p := secret.DefaultParams
	if k.HashesPerSec <= 0 || k.Goroutines != runtime.NumCPU() || k.Time != p.Time || k.MemoryKiB != p.Memory || k.Threads != p.Threads {
		t.Fatalf("measureKDF = %+v", k)
	}
	var b strings.Builder
	s := summary{Mode: modePIN, RequestsPerSec: k.HashesPerSec / 2, KDFAlone: &k}
	s.KDFAlone.LoadShare = 0.5
	if err := s.writeText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "the load is 50% of it") {
		t.Errorf("report:\n%s", b.String())
	}
}
