package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"

	"github.com/authsrv/authsrv"
	"github.com/rs/zerolog"
)

// memoryHeadroom is what the default memory limit allows beyond the KDF
// budget, for everything that is not a PIN or password hash: the store's
// page bookkeeping, decode caches, requests in flight and the collector's
// own slack. Measured with authbench on two cores at GOGC 400: under
// validate load (catalogue row L1, 50 clients) the anonymous RSS is 25–30
// MiB (43 MiB idle, just after start); under PIN load (-mode pin, 32
// clients) the whole process peaks at 255–312 MiB (VmHWM), most of it the
// hashes in flight, which the KDF budget bounds. 256 MiB is several times
// what the rest needs, so the collector works no harder under ordinary
// load and the limit still bounds a runaway heap.
const memoryHeadroom = 256 << 20

// byteUnits are the suffixes GOMEMLIMIT takes, longest first.
var byteUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

// parseByteSize reads a size as GOMEMLIMIT does: a whole number of bytes,
// optionally with a B, KiB, MiB, GiB or TiB suffix, or "off" for no limit.
func parseByteSize(s string) (int64, error) {
	if s == "off" {
		return math.MaxInt64, nil
	}
	num, shift := s, uint(0)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, shift = strings.TrimSuffix(s, u.suffix), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange):
		return 0, errors.New("too large")
	case err != nil || num == "" || num[0] == '+':
		return 0, errors.New("want bytes with an optional B, KiB, MiB, GiB or TiB suffix (e.g. 768MiB), or off")
	case n < 0:
		return 0, errors.New("negative")
	case n > math.MaxInt64>>shift:
		return 0, errors.New("too large")
	}
	return n << shift, nil
}

// formatByteSize writes n in the largest unit that divides it.
func formatByteSize(n int64) string {
	if n == math.MaxInt64 {
		return "off"
	}
	for _, u := range byteUnits {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return "0B"
}

// memoryLimit is the -memory-limit flag; given records whether it was set
// on the command line or from AUTHSRV_MEMORY_LIMIT.
type memoryLimit struct {
	bytes int64
	given bool
}

func (m *memoryLimit) String() string {
	if m == nil || !m.given {
		return ""
	}
	return formatByteSize(m.bytes)
}

func (m *memoryLimit) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	m.bytes, m.given = n, true
	return nil
}

func (m *memoryLimit) register(fs *flag.FlagSet) {
	fs.Var(m, "memory-limit", "the Go runtime's soft memory limit (GOMEMLIMIT): bytes or 300MiB, 1GiB, ..., or off; at least the KDF budget (default: -kdf-budget-mib + 256 MiB; GOMEMLIMIT in the environment wins over this default)")
}

// setting is the memory limit to set, in bytes: the flag's value when it
// was given, else the KDF budget plus memoryHeadroom unless the Go runtime
// already took GOMEMLIMIT from the environment. A limit below the KDF
// budget is an error: hashes within the budget would hold the heap at the
// limit and the collector would run without pause.
func (m *memoryLimit) setting(kdfBudget int64, getenv func(string) string) (int64, bool, error) {
	if m.given {
		if m.bytes < kdfBudget {
			return 0, false, fmt.Errorf("-memory-limit %s: below the KDF budget of %s (-kdf-budget-mib); the collector would run without pause while PINs are hashed", formatByteSize(m.bytes), formatByteSize(kdfBudget))
		}
		return m.bytes, true, nil
	}
	if getenv("GOMEMLIMIT") != "" {
		return 0, false, nil
	}
	if kdfBudget > math.MaxInt64-memoryHeadroom {
		return math.MaxInt64, true, nil
	}
	return kdfBudget + memoryHeadroom, true, nil
}

// apply sets the memory limit that setting chooses.
func (m *memoryLimit) apply(kdfBudget int64, getenv func(string) string) error {
	limit, ok, err := m.setting(kdfBudget, getenv)
	if err != nil {
		return err
	}
	if ok {
		debug.SetMemoryLimit(limit)
	}
	return nil
}

// collectorFacts adds the collector's effective GOGC and memory limit,
// wherever they came from, to a start-up log line.
func collectorFacts(e *zerolog.Event) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		e.Int64("gogc", int64(s[0].Value.Uint64())) // off reads as -1
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		e.Str("memory_limit", formatByteSize(int64(min(s[1].Value.Uint64(), math.MaxInt64))))
	}
}

// residentLimit is the -store-resident-limit flag.
type residentLimit struct{ bytes int64 }

func (r *residentLimit) String() string {
	if r == nil {
		return ""
	}
	return formatByteSize(r.bytes)
}

func (r *residentLimit) Set(s string) error {
	if s == "off" {
		r.bytes = 0
		return nil
	}
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	r.bytes = n
	return nil
}

func (r *residentLimit) register(fs *flag.FlagSet) {
	r.bytes = authsrv.DefaultStoreResidentLimit
	fs.Var(r, "store-resident-limit", "how much of the data file stays mapped in the process's resident memory (bytes or 128MiB, ...; off or 0: no bound); past it the pages are unmapped and stay in the page cache")
}
