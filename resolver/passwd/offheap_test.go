package passwd_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/passwd"
)

// TestOffHeapTextOutlivesReloads: a file big enough for its text to live
// outside the heap is replaced again and again while lookups run and the
// collector runs (freeing the dropped versions' memory): every answer
// stays intact after later reloads and collections, as answers are
// copies and lookups keep their version alive while reading it.
func TestOffHeapTextOutlivesReloads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "passwd")
	const users = 5000
	pad := strings.Repeat("p", 300) // ~1.6 MB per version
	version := func(v int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "stable:x:1:1:Stable %s,,,,stable@example.org:/h:/bin/sh\n", pad)
		for i := range users {
			fmt.Fprintf(&b, "v%03d-%04d:x:%d:1:V%d %s,,,,v%d@example.org:/h:/bin/sh\n", v, i, 1000+i, v, pad, v)
		}
		return b.String()
	}
	write(t, path, version(0))
	clk := newClock()
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{Now: clk.Now})
	defer r.Close()
	passwd.SetBackgroundSize(r, 0)
	ctx := t.Context()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	})
	var kept []resolver.Info // answers held across reloads and collections
	var mu sync.Mutex
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				uid, err := r.UserID(ctx, "stable")
				if err != nil || uid != "1" {
					t.Errorf("UserID(stable) = %q, %v", uid, err)
					return
				}
				info, err := r.User(ctx, uid)
				if err != nil {
					t.Errorf("User: %v", err)
					return
				}
				list, err := r.Search(ctx, map[string]string{"userid": "1000"})
				if err != nil || len(list) != 1 {
					t.Errorf("Search: %d users, %v", len(list), err)
					return
				}
				mu.Lock()
				kept = append(kept, info, list[0])
				mu.Unlock()
			}
		})
	}
	for v := 1; v <= 12; v++ {
		tmp := filepath.Join(dir, "passwd.new")
		write(t, tmp, version(v))
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	for range 3 {
		runtime.GC()
	}
	if len(kept) == 0 {
		t.Fatal("no lookup ran")
	}
	for _, info := range kept {
		switch info.String(resolver.KeyUserID) {
		case "1":
			if info.String(resolver.KeyUsername) != "stable" || info.String(resolver.KeyDescription) != "Stable "+pad+",,,,stable@example.org" {
				t.Fatalf("a kept answer changed: %v", info)
			}
		case "1000":
			login, desc := info.String(resolver.KeyUsername), info.String(resolver.KeyDescription)
			v, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSuffix(login, "-0000"), "v"))
			if err != nil || desc != fmt.Sprintf("V%d %s,,,,v%d@example.org", v, pad, v) {
				t.Fatalf("a kept answer changed: %s %q", login, desc)
			}
		default:
			t.Fatalf("a kept answer changed: %v", info)
		}
	}
}
