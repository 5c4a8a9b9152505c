package main

import (
	"flag"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// defaultHeapFloor is the serve command's -gc-heap-floor. At GOGC 100 the
// collector starts a cycle whenever the heap has doubled since the last
// one; with the few MiB of live heap a server usually keeps, validate
// load (about 25 KiB allocated per request) ran a cycle every couple of
// milliseconds, and each cycle's fixed costs (stacks, mark workers woken
// on every core, the sweep) were about a tenth of the server's CPU. A
// floor of 64 MiB lets the heap grow to that size before a cycle, which
// costs at most that much memory and makes the cycles rare; above the
// floor GOGC rules as before, and the memory limit bounds both.
const defaultHeapFloor = 64 << 20

// maxFloorPercent bounds the GOGC the floor sets, so that a nearly empty
// heap does not get an absurd setting.
const maxFloorPercent = 10000

// heapFloor is the -gc-heap-floor flag.
type heapFloor struct{ bytes int64 }

func (h *heapFloor) String() string {
	if h == nil {
		return ""
	}
	if h.bytes == 0 {
		return "off"
	}
	return formatByteSize(h.bytes)
}

func (h *heapFloor) Set(s string) error {
	if s == "off" || s == "0" {
		h.bytes = 0
		return nil
	}
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	if n == math.MaxInt64 {
		n = 0
	}
	h.bytes = n
	return nil
}

func (h *heapFloor) register(fs *flag.FlagSet) {
	h.bytes = defaultHeapFloor
	fs.Var(h, "gc-heap-floor", "heap size below which the Go collector does not start a cycle (bytes or 64MiB, ...; off or 0: GOGC alone decides); above it GOGC rules and the memory limit bounds both")
}

// runtimeHeapMinimum is the Go collector's smallest goal at GOGC 100; it
// scales with GOGC.
const runtimeHeapMinimum = 4 << 20

// floorPercent is the GOGC that lets a heap with live bytes after the last
// cycle grow to floor before the next one, never below base. The
// collector's goal is the larger of live + (live + stacks + globals) *
// GOGC/100 (roots = live + stacks + globals) and 4 MiB * GOGC/100: the
// percentage is the one that puts the larger at the floor.
func floorPercent(base int, live, roots, floor int64) int {
	roots = max(roots, live)
	if base < 0 || floor <= 0 || roots <= 0 || live >= floor {
		return base
	}
	need := min((floor-live)*100/roots, floor*100/runtimeHeapMinimum)
	if need > maxFloorPercent {
		need = maxFloorPercent
	}
	return max(base, int(need))
}

// gcFloor keeps the collector's goal at or above a floor: after every
// cycle it reads the live heap and sets GOGC for the next one. A cleanup
// attached to an unreachable sentinel runs once per cycle and arms the
// next sentinel.
type gcFloor struct {
	base   int
	floor  int64
	sample []metrics.Sample

	mu      sync.Mutex // orders adjust and stop
	stopped bool
}

// startGCFloor starts the floor over base (the effective GOGC) and returns
// a function that stops it and restores base. With floor 0 or GOGC off it
// does nothing.
func startGCFloor(base int, floor int64) (stop func()) {
	if floor <= 0 || base < 0 {
		return func() {}
	}
	g := &gcFloor{base: base, floor: floor, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	g.adjust()
	g.arm()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.stopped = true
		debug.SetGCPercent(base)
	}
}

// sentinel is allocated only to become garbage; it is large enough not to
// share a tiny-allocator block (whose objects are freed together).
type sentinel struct{ _ [32]byte }

func (g *gcFloor) arm() {
	runtime.AddCleanup(&sentinel{}, func(g *gcFloor) {
		if g.adjust() {
			g.arm()
		}
	}, g)
}

// adjust sets GOGC from the live heap the last cycle marked; it reports
// false once the floor was stopped.
func (g *gcFloor) adjust() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return false
	}
	metrics.Read(g.sample)
	var v [3]int64
	for i, s := range g.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = int64(s.Value.Uint64())
		}
	}
	live := max(v[0], 1<<20)
	debug.SetGCPercent(floorPercent(g.base, live, live+v[1]+v[2], g.floor))
	return true
}

// currentGCPercent is the collector's GOGC as set now (-1: off).
func currentGCPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 100
	}
	return int(int64(s[0].Value.Uint64()))
}
