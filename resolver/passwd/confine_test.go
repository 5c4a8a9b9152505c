package passwd_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/passwd"
)

// TestConfined: with several roots a file beneath any of them is served;
// the data directory's own files are refused whatever the roots (a root
// that holds the data directory, a symlink or hard link placed in a root,
// a path through ..), except beneath its files subfolder.
func TestConfined(t *testing.T) {
	base := t.TempDir()
	rootA := filepath.Join(base, "a")
	rootB := filepath.Join(base, "b")
	data := filepath.Join(base, "data")
	files := filepath.Join(data, "files")
	for _, d := range []string{rootA, rootB, files, filepath.Join(data, "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	inA := seed(t, rootA)
	inB := seed(t, rootB)
	inFiles := seed(t, files)
	enckey := filepath.Join(data, "enckey")
	seed(t, data) // a valid passwd file named passwd in the data directory
	if err := os.Rename(filepath.Join(data, "passwd"), enckey); err != nil {
		t.Fatal(err)
	}
	inSub := seed(t, filepath.Join(data, "sub"))
	symlinkToKey := filepath.Join(rootA, "key-link")
	if err := os.Symlink(enckey, symlinkToKey); err != nil {
		t.Fatal(err)
	}
	filesLink := filepath.Join(files, "up")
	if err := os.Symlink("../enckey", filesLink); err != nil {
		t.Fatal(err)
	}
	hardLink := filepath.Join(files, "hard")
	if err := os.Link(enckey, hardLink); err != nil {
		t.Fatalf("hard link: %v", err)
	}
	outsideMsg := func(p string) string {
		return "The file " + p + " is outside the allowed directories (the server's file roots)."
	}
	dataMsg := func(p string) string {
		return "The file " + p + " is in the server's data directory, whose files are never readable as a user list."
	}
	two := passwd.Confinement{Roots: []string{rootA, rootB}, DataDir: data}
	withFiles := passwd.Confinement{Roots: []string{rootA, files}, DataDir: data}
	everything := passwd.Confinement{Roots: []string{"/"}, DataDir: data}
	unconfined := passwd.Confinement{DataDir: data}
	cases := []struct {
		name string
		c    passwd.Confinement
		path string
		want string // "" = served
	}{
		{"first root", two, inA, ""},
		{"second root", two, inB, ""},
		{"files subfolder", withFiles, inFiles, ""},
		{"files subfolder under /", everything, inFiles, ""},
		{"files subfolder unconfined", unconfined, inFiles, ""},
		{"etc shadow", two, "/etc/shadow", outsideMsg("/etc/shadow")},
		{"enckey outside the roots", two, enckey, dataMsg(enckey)},
		{"enckey under /", everything, enckey, dataMsg(enckey)},
		{"enckey unconfined", unconfined, enckey, dataMsg(enckey)},
		{"data subdirectory", everything, inSub, dataMsg(inSub)},
		{"the data directory", everything, data, dataMsg(data)},
		{"enckey through ..", withFiles, files + "/../enckey", dataMsg(files + "/../enckey")},
		{"enckey through a symlink in a root", withFiles, symlinkToKey, dataMsg(symlinkToKey)},
		{"enckey through a relative symlink in files", withFiles, filesLink, dataMsg(filesLink)},
		{"enckey through a hard link in files", withFiles, hardLink, dataMsg(hardLink)},
		{"etc passwd through ..", two, rootA + "/../../../../../../../etc/passwd", outsideMsg(rootA + "/../../../../../../../etc/passwd")},
		{"a root that does not exist", passwd.Confinement{Roots: []string{filepath.Join(base, "missing"), rootB}}, inA, outsideMsg(inA)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			typ := passwd.TypeConfined(tc.c)
			cfg := resolver.Config{passwd.ParamFileNameLower: tc.path}
			checkOpened(t, typ, cfg, tc.want, true)
		})
	}

	// A file saved while allowed and swapped for a link to the enckey is
	// checked again at the reload: the last good copy stays.
	t.Run("swapped for a link to the enckey", func(t *testing.T) {
		path := filepath.Join(files, "swap")
		write(t, path, "alice:x:4711:1::/h:/bin/sh")
		clk := newClock()
		r := open(t, passwd.TypeConfined(withFiles), resolver.Config{passwd.ParamFilename: path}, resolver.Env{Now: clk.Now})
		defer r.Close()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(enckey, path); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second)
		if uid, err := r.UserID(t.Context(), "alice"); err != nil || uid != "4711" {
			t.Errorf("UserID = %q, %v; want the last good copy", uid, err)
		}
		if v, desc := r.(resolver.Tester).Test(t.Context()); v != false || desc != dataMsg(path) {
			t.Errorf("Test() = %v, %q", v, desc)
		}
	})
}
