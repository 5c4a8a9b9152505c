package main

import (
	"flag"
	"io"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestFloorPercent(t *testing.T) {
	for _, c := range []struct {
		name               string
		base               int
		live, roots, floor int64
		want               int
	}{
		{"live heap far below the floor", 100, 4 << 20, 4 << 20, 64 << 20, 1500},
		// Stacks and globals count in the goal: 4 + 12 * 500 % = 64.
		{"stacks and globals count", 100, 4 << 20, 12 << 20, 64 << 20, 500},
		{"live heap at half the floor", 100, 32 << 20, 32 << 20, 64 << 20, 100},
		{"live heap above the floor", 100, 200 << 20, 200 << 20, 64 << 20, 100},
		{"a higher base wins", 400, 32 << 20, 32 << 20, 64 << 20, 400},
		// The runtime's minimum goal, 4 MiB at 100 %, scales too.
		{"an empty heap", 100, 1, 1, 64 << 20, 1600},
		{"an empty heap is capped", 100, 1, 1, 1 << 40, maxFloorPercent},
		{"GOGC off stays off", -1, 4 << 20, 4 << 20, 64 << 20, -1},
		{"no floor", 100, 4 << 20, 4 << 20, 0, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := floorPercent(c.base, c.live, c.roots, c.floor); got != c.want {
				t.Fatalf("floorPercent(%d, %d, %d, %d) = %d, want %d", c.base, c.live, c.roots, c.floor, got, c.want)
			}
		})
	}
}

func TestHeapFloorFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int64
	}{
		{nil, defaultHeapFloor},
		{[]string{"-gc-heap-floor", "128MiB"}, 128 << 20},
		{[]string{"-gc-heap-floor", "off"}, 0},
		{[]string{"-gc-heap-floor", "0"}, 0},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var h heapFloor
		h.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if h.bytes != c.want {
			t.Errorf("%v: floor %d, want %d", c.args, h.bytes, c.want)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var h heapFloor
	h.register(fs)
	if err := fs.Parse([]string{"-gc-heap-floor", "lots"}); err == nil {
		t.Fatal("-gc-heap-floor lots: no error")
	}
}

// TestGCFloorFollowsCycles starts the floor, lets collections run, and
// checks that GOGC was raised for the small live heap of a test binary and
// is restored when the floor stops.
func TestGCFloorFollowsCycles(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	const floor = 256 << 20
	stop := startGCFloor(100, floor)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for currentGCPercent() <= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d after collections with a 256 MiB floor", currentGCPercent())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := currentGCPercent(); got > maxFloorPercent {
		t.Fatalf("GOGC %d above the cap %d", got, maxFloorPercent)
	}
	// The collector's goal is the floor, not a multiple of it (stacks and
	// globals count in the goal as well as the live heap).
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	goal := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(goal)
	if g := int64(goal[0].Value.Uint64()); g < floor*3/4 || g > floor*5/4 {
		t.Errorf("heap goal %d MiB with a floor of %d MiB", g>>20, floor>>20)
	}
	stop()
	stopped = true
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := currentGCPercent(); got != 100 {
		t.Fatalf("GOGC %d after stop, want 100", got)
	}
}
