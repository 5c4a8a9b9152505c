package resolvertest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// PasswdFile writes n users user0.. as a typical passwd file (shadowed
// passwords, a full gecos with room, phones and e-mail) in a temporary
// directory of tb, for benchmarks at scale, and returns its path and size.
func PasswdFile(tb testing.TB, n int) (string, int64) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "passwd")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	for i := range n {
		fmt.Fprintf(w, "user%d:x:%d:100:Given%d Surname%d,Room %d,+49170%d,+4930%d,user%d@example.org:/home/user%d:/bin/bash\n",
			i, 100000+i, i, i, i, i, i, i, i)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	return path, fi.Size()
}
