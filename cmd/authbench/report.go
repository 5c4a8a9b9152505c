package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, an ascending slice: the smallest value with at least p% of the
// values at or below it. An empty slice gives 0.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// latencyStats summarises latencies (sorting them in place).
type latencyStats struct {
	P50, P90, P99, Max, Mean time.Duration
}

func summarize(lat []time.Duration) latencyStats {
	if len(lat) == 0 {
		return latencyStats{}
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	return latencyStats{
		P50:  percentile(lat, 50),
		P90:  percentile(lat, 90),
		P99:  percentile(lat, 99),
		Max:  lat[len(lat)-1],
		Mean: sum / time.Duration(len(lat)),
	}
}

// memInfo is a process's resident memory from /proc/<pid>/status, in KiB.
type memInfo struct {
	RSS int64 // VmRSS: resident now
	HWM int64 // VmHWM: peak resident
}

func procStatusPath(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/status" }

// readMem reads VmRSS and VmHWM from a /proc/<pid>/status file.
func readMem(path string) (memInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return memInfo{}, err
	}
	defer f.Close()
	return parseMem(f)
}

// parseMem reads the "VmRSS:	  1234 kB" and "VmHWM:" lines.
func parseMem(r io.Reader) (memInfo, error) {
	var m memInfo
	var haveRSS, haveHWM bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return m, fmt.Errorf("unexpected %s line %q", key, sc.Text())
		}
		v, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || v < 0 {
			return m, fmt.Errorf("unexpected %s value %q", key, fields[0])
		}
		if key == "VmRSS" {
			m.RSS, haveRSS = v, true
		} else {
			m.HWM, haveHWM = v, true
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if !haveRSS || !haveHWM {
		return m, errors.New("no VmRSS/VmHWM lines (a kernel thread or a zombie?)")
	}
	return m, nil
}

// summary is the result of a load run, as printed.
type summary struct {
	Mode            string        `json:"mode"`
	URL             string        `json:"url"`
	Users           int           `json:"users"`
	Clients         int           `json:"clients"`
	SetupSeconds    float64       `json:"setup_seconds,omitempty"`
	Requests        int64         `json:"requests"`
	DurationSeconds float64       `json:"duration_seconds"`
	RequestsPerSec  float64       `json:"requests_per_second"`
	Successes       int64         `json:"successes"`
	Errors          errorCounts   `json:"errors"`
	LatencyMS       latencyMS     `json:"latency_ms"`
	Server          *serverMemory `json:"server,omitempty"`
	KDFAlone        *kdfAlone     `json:"kdf_alone,omitempty"`
	ErrorSamples    []string      `json:"error_samples,omitempty"`
	Interrupted     bool          `json:"interrupted,omitempty"`
}

// errorCounts splits the failed requests by cause.
type errorCounts struct {
	Total     int64 `json:"total"`
	Status    int64 `json:"status"`    // HTTP status not 200, or not an envelope with status true
	Transport int64 `json:"transport"` // connection, timeout, reading the body
	Value     int64 `json:"value"`     // result.value not the expected one
}

type latencyMS struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// serverMemory is the server's memory just before and after the load
// (after the setup), in KiB.
type serverMemory struct {
	PID         int   `json:"pid"`
	RSSBeforeKB int64 `json:"vmrss_before_kb"`
	RSSKB       int64 `json:"vmrss_kb"`
	HWMKB       int64 `json:"vmhwm_kb"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// newSummary builds the summary of a finished load.
func newSummary(cfg *config, clients int, users int, t *tally, elapsed time.Duration) *summary {
	st := summarize(t.lat)
	s := &summary{
		Mode:            cfg.mode,
		URL:             cfg.base.String(),
		Users:           users,
		Clients:         clients,
		Requests:        t.requests,
		DurationSeconds: math.Round(elapsed.Seconds()*1000) / 1000,
		Successes:       t.ok,
		Errors: errorCounts{
			Total:  t.status + t.transport + t.value,
			Status: t.status, Transport: t.transport, Value: t.value,
		},
		LatencyMS: latencyMS{P50: ms(st.P50), P90: ms(st.P90), P99: ms(st.P99), Max: ms(st.Max), Mean: ms(st.Mean)},
	}
	if elapsed > 0 {
		s.RequestsPerSec = math.Round(float64(t.requests)/elapsed.Seconds()*10) / 10
	}
	for _, m := range t.samples {
		if m != "" {
			s.ErrorSamples = append(s.ErrorSamples, m)
		}
	}
	return s
}

// writeText prints the summary for a person.
func (s *summary) writeText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "mode %s against %s: %d users, %d clients\n", s.Mode, s.URL, s.Users, s.Clients)
	if s.Interrupted {
		fmt.Fprintf(&b, "interrupted: the numbers cover the time until the interrupt\n")
	}
	fmt.Fprintf(&b, "requests     %d\n", s.Requests)
	fmt.Fprintf(&b, "duration     %.3fs\n", s.DurationSeconds)
	fmt.Fprintf(&b, "requests/s   %.1f\n", s.RequestsPerSec)
	okText := ""
	if s.Mode == modeWrong {
		okText = " (expected rejections)"
	}
	fmt.Fprintf(&b, "successes    %d%s\n", s.Successes, okText)
	fmt.Fprintf(&b, "errors       %d (status %d, transport %d, unexpected value %d)\n",
		s.Errors.Total, s.Errors.Status, s.Errors.Transport, s.Errors.Value)
	fmt.Fprintf(&b, "latency      p50 %.3fms  p90 %.3fms  p99 %.3fms  max %.3fms  (mean %.3fms)\n",
		s.LatencyMS.P50, s.LatencyMS.P90, s.LatencyMS.P99, s.LatencyMS.Max, s.LatencyMS.Mean)
	if m := s.Server; m != nil {
		fmt.Fprintf(&b, "server RSS   %s before, %s after, peak %s (pid %d, VmRSS/VmHWM)\n",
			mib(m.RSSBeforeKB), mib(m.RSSKB), mib(m.HWMKB), m.PID)
	}
	if k := s.KDFAlone; k != nil {
		fmt.Fprintf(&b, "kdf alone    %.1f hashes/s (argon2id t=%d m=%dKiB p=%d, %d goroutines, %d rounds between the load's); the load is %.0f%% of it\n",
			k.HashesPerSec, k.Time, k.MemoryKiB, k.Threads, k.Goroutines, k.Rounds, 100*k.LoadShare)
	}
	for _, e := range s.ErrorSamples {
		fmt.Fprintf(&b, "first error  %s\n", e)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func mib(kb int64) string { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }

// writeJSON prints v as one JSON object on one line.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
