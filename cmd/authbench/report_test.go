package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func msList(vals ...int) []time.Duration {
	out := make([]time.Duration, len(vals))
	for i, v := range vals {
		out[i] = time.Duration(v) * time.Millisecond
	}
	return out
}

func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value p50", msList(7), 50, 7 * time.Millisecond},
		{"one value p99", msList(7), 99, 7 * time.Millisecond},
		{"1..100 p50", msList(hundred...), 50, 50 * time.Millisecond},
		{"1..100 p90", msList(hundred...), 90, 90 * time.Millisecond},
		{"1..100 p99", msList(hundred...), 99, 99 * time.Millisecond},
		{"1..100 p100", msList(hundred...), 100, 100 * time.Millisecond},
		{"1..100 p99.5 rounds up", msList(hundred...), 99.5, 100 * time.Millisecond},
		{"four values p50", msList(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"four values p51", msList(1, 2, 3, 4), 51, 3 * time.Millisecond},
		{"four values p90", msList(1, 2, 3, 4), 90, 4 * time.Millisecond},
		{"tiny p is the minimum", msList(1, 2, 3, 4), 0.001, 1 * time.Millisecond},
		{"ten values p90", msList(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
		{"ten values p99", msList(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); got != tc.want {
				t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

func TestSummarizeSorts(t *testing.T) {
	lat := msList(9, 1, 5, 3, 7, 2, 8, 4, 10, 6)
	st := summarize(lat)
	want := latencyStats{P50: 5 * time.Millisecond, P90: 9 * time.Millisecond, P99: 10 * time.Millisecond,
		Max: 10 * time.Millisecond, Mean: 5500 * time.Microsecond}
	if st != want {
		t.Errorf("summarize = %+v, want %+v", st, want)
	}
	if st := summarize(nil); st != (latencyStats{}) {
		t.Errorf("summarize(nil) = %+v, want zero", st)
	}
}

func TestParseMem(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    memInfo
		wantErr bool
	}{
		{"status file", "Name:\tauthsrv\nVmPeak:\t 1000 kB\nVmHWM:\t   45678 kB\nVmRSS:\t   12345 kB\nThreads:\t9\n", memInfo{RSS: 12345, HWM: 45678}, false},
		{"no memory lines", "Name:\tkthreadd\nState:\tS (sleeping)\n", memInfo{}, true},
		{"only RSS", "VmRSS:\t 1 kB\n", memInfo{}, true},
		{"bad unit", "VmRSS:\t 1 MB\nVmHWM:\t 2 kB\n", memInfo{}, true},
		{"bad number", "VmRSS:\t x kB\nVmHWM:\t 2 kB\n", memInfo{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMem(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadMemSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	m, err := readMem(procStatusPath(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.HWM < m.RSS {
		t.Errorf("own memory %+v: want 0 < VmRSS <= VmHWM", m)
	}
	if _, err := readMem(procStatusPath(1 << 30)); err == nil {
		t.Error("a process that does not exist: no error")
	}
}

func TestSummaryOutput(t *testing.T) {
	base, _ := url.Parse("http://127.0.0.1:8080")
	cfg := &config{base: base, mode: modeWrong}
	tl := &tally{}
	tl.record(outOK, 2*time.Millisecond, "")
	tl.record(outOK, 4*time.Millisecond, "")
	tl.record(outValue, 6*time.Millisecond, "result.value true, want false")
	tl.record(outTransport, 8*time.Millisecond, "connection refused")
	s := newSummary(cfg, 2, 5, tl, 2*time.Second)
	s.Server = &serverMemory{PID: 42, RSSBeforeKB: 1024, RSSKB: 2048, HWMKB: 4096}

	var text bytes.Buffer
	if err := s.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"requests     4\n", "requests/s   2.0\n", "successes    2 (expected rejections)\n",
		"errors       2 (status 0, transport 1, unexpected value 1)\n",
		"p50 4.000ms", "p90 8.000ms", "p99 8.000ms", "max 8.000ms",
		"server RSS   1.0 MiB before, 2.0 MiB after, peak 4.0 MiB (pid 42",
		"first error  transport: connection refused\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text summary lacks %q:\n%s", want, text.String())
		}
	}

	var js bytes.Buffer
	if err := writeJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(js.String(), "\n"); n != 1 {
		t.Errorf("JSON summary has %d lines, want 1", n)
	}
	var back summary
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Requests != 4 || back.Successes != 2 || back.Errors.Total != 2 || back.Errors.Value != 1 ||
		back.Errors.Transport != 1 || back.LatencyMS.P50 != 4 || back.Server.HWMKB != 4096 || back.RequestsPerSec != 2 {
		t.Errorf("JSON round trip: %+v", back)
	}
}
