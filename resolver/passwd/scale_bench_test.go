package passwd_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/passwd"
)

// scaleFile writes n users as a typical passwd file (shadowed passwords,
// a full gecos) and returns its path and size.
func scaleFile(b *testing.B, n int) (string, int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "passwd")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, "user%d:x:%d:100:Given%d Surname%d,Room %d,+49170%d,+4930%d,user%d@example.org:/home/user%d:/bin/bash\n",
			i, 100000+i, i, i, i, i, i, i, i)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	_ = f.Close()
	return path, fi.Size()
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
	b.Run("Memory", func(b *testing.B) {
		for b.Loop() {
		}
		b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
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
