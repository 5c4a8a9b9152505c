package passwd_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/passwd"
	"github.com/authsrv/authsrv/resolver/resolvertest"
)

// scaleFile writes n users as a typical passwd file and returns its path
// and size.
func scaleFile(b *testing.B, n int) (string, int64) { return resolvertest.PasswdFile(b, n) }

// procStatus is a field of /proc/self/status in bytes (0 where there is
// none).
func procStatus(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkPasswd1M is the passwd store at a million users: the first
// lookup after the store is built (the whole load), an exact login and uid
// lookup, a page of a prefix search (user12*: 11,111 matches), a page of
// an infix search (a walk that stops once the page is full), and the live
// heap the loaded store holds against the file's size (after a GC).
func BenchmarkPasswd1M(b *testing.B) {
	const n = 1_000_000
	path, size := scaleFile(b, n)
	cfg := resolver.Config{passwd.ParamFilename: path}
	ctx := context.Background()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := passwd.Type().New(ctx, cfg, resolver.Env{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if _, err := r.UserID(ctx, "user0"); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	// The process's anonymous resident memory once the collector has
	// returned what it can (heap and off-heap data alike), and its peak.
	kept := procStatus("RssAnon:") // before the heap left unused is returned
	debug.FreeOSMemory()
	anon, peak := procStatus("RssAnon:"), procStatus("VmHWM:")
	b.Run("Memory", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
		// The heap size at which the next collection starts (GOGC): what
		// the process grows to under load.
		b.ReportMetric(float64(after.NextGC)/(1<<20), "heap-goal-MiB")
		if anon > 0 {
			b.ReportMetric(float64(kept)/(1<<20), "rss-anon-kept-MiB")
			b.ReportMetric(float64(anon)/(1<<20), "rss-anon-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "peak-rss-MiB")
		}
		b.ReportMetric(float64(size)/(1<<20), "file-MiB")
		b.ReportMetric(float64(heap)/float64(size), "heap/file")
	})
	b.Run("FirstLookup", func(b *testing.B) {
		for b.Loop() {
			r, err := passwd.Type().New(ctx, cfg, resolver.Env{})
			if err != nil {
				b.Fatal(err)
			}
			if uid, err := r.UserID(ctx, "user999999"); err != nil || uid != "1099999" {
				b.Fatal(uid, err)
			}
			_ = r.Close()
		}
	})
	b.Run("ExactLookup", func(b *testing.B) {
		i := 0
		for b.Loop() {
			login := fmt.Sprintf("user%d", (i*7919)%n)
			uid, err := r.UserID(ctx, login)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := r.User(ctx, uid); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	pages := []struct {
		name   string
		filter map[string]string
	}{
		{"PrefixPage", map[string]string{"username": "user12*"}},
		{"PrefixPageDeep", map[string]string{"username": "user12*"}},
		{"InfixPage", map[string]string{"username": "*9999*"}},
		{"AllPage", map[string]string{}},
	}
	for _, pc := range pages {
		b.Run(pc.name, func(b *testing.B) {
			offset := 0
			if pc.name == "PrefixPageDeep" {
				offset = 10_000
			}
			for b.Loop() {
				p, err := resolver.SearchPage(ctx, r, pc.filter, offset, 50)
				if err != nil || len(p.Users) == 0 {
					b.Fatal(len(p.Users), err)
				}
			}
		})
	}
}
