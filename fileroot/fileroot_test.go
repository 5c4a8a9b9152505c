package fileroot_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/fileroot"
)

// layout is a data directory with its keys and files subfolder, two roots
// and the links an attacker would place (catalogue B7).
type layout struct {
	base, rootA, rootB, data, files  string
	inA, inB, inFiles, enckey, inSub string
	linkOut, linkUp, hardLink        string
}

func newLayout(t *testing.T) layout {
	t.Helper()
	base := t.TempDir()
	l := layout{
		base:  base,
		rootA: filepath.Join(base, "a"),
		rootB: filepath.Join(base, "b"),
		data:  filepath.Join(base, "data"),
	}
	l.files = filepath.Join(l.data, fileroot.FilesDir)
	for _, d := range []string{l.rootA, l.rootB, l.files, filepath.Join(l.data, "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	l.inA = write(t, filepath.Join(l.rootA, "ca.pem"), "in a")
	l.inB = write(t, filepath.Join(l.rootB, "ca.pem"), "in b")
	l.inFiles = write(t, filepath.Join(l.files, "ca.pem"), "in files")
	l.enckey = write(t, filepath.Join(l.data, "enckey"), "the key")
	l.inSub = write(t, filepath.Join(l.data, "sub", "x"), "beneath the data directory")
	l.linkOut = filepath.Join(l.rootA, "out")
	if err := os.Symlink(filepath.Join(base, "outside"), l.linkOut); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(base, "outside"), "outside every root")
	l.linkUp = filepath.Join(l.files, "up")
	if err := os.Symlink("../enckey", l.linkUp); err != nil {
		t.Fatal(err)
	}
	l.hardLink = filepath.Join(l.files, "hard")
	if err := os.Link(l.enckey, l.hardLink); err != nil {
		t.Fatalf("hard link: %v", err)
	}
	return l
}

func write(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRules: every rule refuses at Check, Open and ReadFile alike, with
// its own error; allowed files are read.
func TestRules(t *testing.T) {
	l := newLayout(t)
	two := fileroot.Confinement{Roots: []string{l.rootA, l.rootB}, DataDir: l.data}
	withFiles := fileroot.Confinement{Roots: []string{l.rootA, l.files}, DataDir: l.data}
	everything := fileroot.Confinement{Roots: []string{"/"}, DataDir: l.data}
	unconfined := fileroot.Confinement{DataDir: l.data}
	cases := []struct {
		name string
		c    fileroot.Confinement
		path string
		want error // nil = served
		text string
	}{
		{"first root", two, l.inA, nil, "in a"},
		{"second root", two, l.inB, nil, "in b"},
		{"files subfolder", withFiles, l.inFiles, nil, "in files"},
		{"files subfolder under /", everything, l.inFiles, nil, "in files"},
		{"files subfolder unconfined", unconfined, l.inFiles, nil, "in files"},
		{"zero confinement", fileroot.Confinement{}, l.enckey, nil, "the key"},
		{"relative name", two, "a/ca.pem", fileroot.ErrNotAbsolute, ""},
		{"empty name", two, "", fileroot.ErrNotAbsolute, ""},
		{"NUL in the name", two, l.inA + "\x00x", fileroot.ErrNotAbsolute, ""},
		{"etc shadow", two, "/etc/shadow", fileroot.ErrOutside, ""},
		{"etc shadow under /", everything, "/proc/self/environ", fileroot.ErrSystem, ""},
		{"proc unconfined", fileroot.Confinement{}, "/proc/self/environ", fileroot.ErrSystem, ""},
		{"enckey outside the roots", two, l.enckey, fileroot.ErrDataDir, ""},
		{"enckey under /", everything, l.enckey, fileroot.ErrDataDir, ""},
		{"enckey unconfined", unconfined, l.enckey, fileroot.ErrDataDir, ""},
		{"data subdirectory", everything, l.inSub, fileroot.ErrDataDir, ""},
		{"the data directory", everything, l.data, fileroot.ErrDataDir, ""},
		{"enckey through ..", withFiles, l.files + "/../enckey", fileroot.ErrDataDir, ""},
		{"enckey through a relative symlink in files", withFiles, l.linkUp, fileroot.ErrDataDir, ""},
		{"enckey through a hard link in files", withFiles, l.hardLink, fileroot.ErrDataDir, ""},
		{"symlink pointing outside the roots", two, l.linkOut, fileroot.ErrOutside, ""},
		{"etc passwd through ..", two, l.rootA + "/../../../../../../../etc/passwd", fileroot.ErrOutside, ""},
		{"a root itself", two, l.rootA, fileroot.ErrOutside, ""},
		{"out of a root and into another through ..", two, l.rootA + "/../b/ca.pem", nil, "in b"},
		{"a directory beneath a root", fileroot.Confinement{Roots: []string{l.base}}, l.rootA, fileroot.ErrNotRegular, ""},
		{"a root that does not exist", fileroot.Confinement{Roots: []string{filepath.Join(l.base, "missing"), l.rootB}}, l.inA, fileroot.ErrOutside, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.c.ReadFile(tc.path, 1<<20)
			if tc.want == nil {
				if err != nil || string(b) != tc.text {
					t.Fatalf("ReadFile = %q, %v; want %q", b, err, tc.text)
				}
				if err := tc.c.Check(tc.path); err != nil {
					t.Errorf("Check = %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || b != nil {
				t.Errorf("ReadFile = %q, %v; want %v", b, err, tc.want)
			}
			if f, err := tc.c.Open(tc.path); !errors.Is(err, tc.want) {
				if f != nil {
					_ = f.Close()
				}
				t.Errorf("Open: %v; want %v", err, tc.want)
			}
			if err := tc.c.Check(tc.path); !errors.Is(err, tc.want) || !fileroot.Refused(err) {
				t.Errorf("Check = %v; want %v", err, tc.want)
			}
		})
	}
}

// TestCheckMissing: a file that does not exist yet is accepted at save
// time (the name rules still apply) and reported at the read.
func TestCheckMissing(t *testing.T) {
	l := newLayout(t)
	c := fileroot.Confinement{Roots: []string{l.rootA}, DataDir: l.data}
	missing := filepath.Join(l.rootA, "later.pem")
	if err := c.Check(missing); err != nil {
		t.Errorf("Check(missing) = %v", err)
	}
	if _, err := c.ReadFile(missing, 10); !errors.Is(err, fs.ErrNotExist) || fileroot.Refused(err) {
		t.Errorf("ReadFile(missing) = %v", err)
	}
	if err := c.Check(filepath.Join(l.data, "later")); !errors.Is(err, fileroot.ErrDataDir) {
		t.Errorf("Check(missing in the data directory) = %v", err)
	}
	if err := c.Check(filepath.Join(l.rootB, "later")); !errors.Is(err, fileroot.ErrOutside) {
		t.Errorf("Check(missing outside) = %v", err)
	}
}

// TestReadFileLimit: a file over the limit is refused, one at the limit is
// read.
func TestReadFileLimit(t *testing.T) {
	l := newLayout(t)
	c := fileroot.Confinement{Roots: []string{l.rootA}}
	if b, err := c.ReadFile(l.inA, 4); err != nil || string(b) != "in a" {
		t.Errorf("ReadFile at the limit = %q, %v", b, err)
	}
	if b, err := c.ReadFile(l.inA, 3); !errors.Is(err, fileroot.ErrTooLarge) || b != nil {
		t.Errorf("ReadFile over the limit = %q, %v", b, err)
	}
}

// TestSwapped: a file allowed at save time and then replaced by a link to
// the enckey is refused at the next read.
func TestSwapped(t *testing.T) {
	l := newLayout(t)
	c := fileroot.Confinement{Roots: []string{l.files}, DataDir: l.data}
	if err := c.Check(l.inFiles); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(l.inFiles); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(l.enckey, l.inFiles); err != nil {
		t.Fatal(err)
	}
	if b, err := c.ReadFile(l.inFiles, 1<<20); !errors.Is(err, fileroot.ErrDataDir) {
		t.Errorf("ReadFile after the swap = %q, %v", b, err)
	}
}

// TestNotRegular: a FIFO in a root is refused without being opened (an
// open would block).
func TestNotRegular(t *testing.T) {
	if !haveFIFO {
		t.Skip("no FIFOs on this system")
	}
	l := newLayout(t)
	fifo := filepath.Join(l.rootA, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	for _, c := range []fileroot.Confinement{{Roots: []string{l.rootA}}, {}} {
		if _, err := c.ReadFile(fifo, 10); !errors.Is(err, fileroot.ErrNotRegular) {
			t.Errorf("ReadFile(fifo) with roots %v = %v", c.Roots, err)
		}
	}
}

// TestDescribe: each refusal names its rule; no OS error text shows.
func TestDescribe(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fileroot.ErrNotAbsolute, "must be an absolute path"},
		{fileroot.ErrOutside, "/x/y is outside the allowed directories"},
		{fileroot.ErrDataDir, "/x/y is in the server's data directory"},
		{fileroot.ErrSystem, "/proc, /sys and /dev"},
		{fileroot.ErrNotRegular, "not a regular file"},
		{fileroot.ErrTooLarge, "too large"},
		{&fs.PathError{Op: "open", Path: "/x/y", Err: fs.ErrNotExist}, "does not exist"},
		{&fs.PathError{Op: "open", Path: "/x/y", Err: fs.ErrPermission}, "permission denied"},
		{errors.New("read /x/y: input/output error"), "cannot be read"},
	}
	for _, tc := range cases {
		got := fileroot.Describe(tc.err, "/x/y")
		if !strings.Contains(got, tc.want) || strings.Contains(got, "open ") || strings.Contains(got, "input/output") {
			t.Errorf("Describe(%v) = %q; want it to contain %q", tc.err, got, tc.want)
		}
	}
}
