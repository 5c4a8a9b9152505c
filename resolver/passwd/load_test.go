package passwd_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/passwd"
)

// TestLoadingAtCreation: the first load starts when the store is built
// and Loading says so until it is over; a lookup made meanwhile waits for
// it (rather than failing or finding nobody), and one whose context ends
// first gives up with the context's error.
func TestLoadingAtCreation(t *testing.T) {
	path := bigFile(t, 1000)
	release := passwd.HoldFirstLoads()
	r, err := passwd.Type().New(t.Context(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{})
	if err != nil {
		release()
		t.Fatal(err)
	}
	defer r.Close()
	if !r.(resolver.Loader).Loading() {
		t.Error("Loading is false before the first load")
	}
	short, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := r.UserID(short, "user5"); err != context.DeadlineExceeded {
		t.Errorf("a lookup during the load with a short deadline: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		uid, err := r.UserID(t.Context(), "user999")
		if err == nil && uid != "100999" {
			err = fmt.Errorf("uid %s", uid)
		}
		got <- err
	}()
	release()
	if err := <-got; err != nil {
		t.Errorf("the lookup waiting for the load: %v", err)
	}
	if r.(resolver.Loader).Loading() {
		t.Error("Loading is still true after the load")
	}
}

// TestReloadDuringLookups rewrites a file (by rename, as editors and
// useradd do) while lookups run, with reloads in the background: no
// lookup fails, and every search sees exactly one version of the file,
// never a mix or a part of one.
func TestReloadDuringLookups(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "passwd")
	const perVersion = 300
	version := func(v int) string {
		var b strings.Builder
		fmt.Fprintf(&b, "stable:x:1:1:Stable,,,,stable@example.org:/h:/bin/sh\n")
		for i := range perVersion {
			fmt.Fprintf(&b, "v%03d-%03d:x:%d:1:V %d,,,,v%d@example.org:/h:/bin/sh\n", v, i, 1000+v*perVersion+i, v, v)
		}
		return b.String()
	}
	write(t, path, version(0))
	clk := newClock()
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{Now: clk.Now})
	defer r.Close()
	passwd.SetBackgroundSize(r, 0) // every reload in the background
	ctx := t.Context()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var versionsSeen sync.Map
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				if uid, err := r.UserID(ctx, "stable"); err != nil || uid != "1" {
					t.Errorf("UserID(stable) = %q, %v", uid, err)
					return
				}
				list, err := r.Search(ctx, map[string]string{"username": "v*"})
				if err != nil {
					t.Errorf("Search: %v", err)
					return
				}
				if len(list) != perVersion {
					t.Errorf("Search saw %d users, want %d", len(list), perVersion)
					return
				}
				v := list[0].String(resolver.KeyUsername)[:4]
				for _, u := range list {
					if !strings.HasPrefix(u.String(resolver.KeyUsername), v) {
						t.Errorf("Search mixed versions %s and %s", v, u.String(resolver.KeyUsername))
						return
					}
				}
				versionsSeen.Store(v, true)
			}
		})
	}
	for v := 1; v <= 30; v++ {
		tmp := filepath.Join(dir, "passwd.new")
		write(t, tmp, version(v))
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second)
		time.Sleep(2 * time.Millisecond) // let lookups notice and reload
	}
	// The last version shows once its background reload is done.
	deadline := time.Now().Add(30 * time.Second)
	for {
		clk.Advance(2 * time.Second)
		if _, err := r.UserID(ctx, "v030-000"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the last version never showed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	n := 0
	versionsSeen.Range(func(any, any) bool { n++; return true })
	if n < 2 {
		t.Errorf("the lookups saw %d versions; the test did not reload under them", n)
	}
}

// TestProgressLog: loading a file of 32 MiB or more logs its start (with
// the size) and its progress, and then the result.
func TestProgressLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := 0; i < 300_000; i++ {
		fmt.Fprintf(w, "user%d:x:%d:100:Given%d Surname%d,Room %d,+49170%d,+4930%d,user%d@example.org:/home/user%d:/bin/bash\n", i, 100000+i, i, i, i, i, i, i, i)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	var logs logBuf
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{Log: zerolog.New(&logs)})
	defer r.Close()
	out := logs.String()
	for _, want := range []string{`"message":"passwd file loading"`, `"percent":`, `"users":300000`, `"message":"passwd file loaded"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
}
