package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUserNames(t *testing.T) {
	cases := []struct {
		prefix        string
		i             int
		login, serial string
	}{
		{"bench", 1, "benchuser0001", "bench0001"},
		{"bench", 200, "benchuser0200", "bench0200"},
		{"x-1", 12345, "x-1user12345", "x-112345"},
	}
	for _, tc := range cases {
		t.Run(tc.login, func(t *testing.T) {
			login, serial := userNames(tc.prefix, tc.i)
			if login != tc.login || serial != tc.serial {
				t.Errorf("userNames(%q, %d) = %s, %s; want %s, %s", tc.prefix, tc.i, login, serial, tc.login, tc.serial)
			}
		})
	}
}

func TestNewUsers(t *testing.T) {
	users, err := newUsers("bench", 3, bytes.NewReader(bytes.Repeat([]byte{7}, 3*keySize)))
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 3 || users[2].Login != "benchuser0003" || users[2].Serial != "bench0003" || users[2].UID != 10003 ||
		len(users[0].Key) != keySize || users[0].Counter != 0 {
		t.Errorf("users: %v %+v", users, *users[2])
	}
	if _, err := newUsers("bench", 2, bytes.NewReader(make([]byte, keySize+1))); err == nil {
		t.Error("short random source: no error")
	}
	if s := users[0].String(); strings.Contains(s, hex.EncodeToString(users[0].Key)) || s != "benchuser0001/bench0001" {
		t.Errorf("String() = %q", s)
	}
}

func TestPasswdLine(t *testing.T) {
	u := &benchUser{Login: "benchuser0001", UID: 10001}
	if got, want := passwdLine(u), "benchuser0001:x:10001:10001:Bench User,,,:/home/b:/bin/false"; got != want {
		t.Errorf("passwdLine = %q, want %q", got, want)
	}
}

func TestWritePasswd(t *testing.T) {
	users, err := newUsers("bench", 3, bytes.NewReader(make([]byte, 3*keySize)))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("given directory", func(t *testing.T) {
		dir := t.TempDir()
		path, err := writePasswd(dir, users)
		if err != nil {
			t.Fatal(err)
		}
		if path != filepath.Join(dir, "passwd") || !filepath.IsAbs(path) {
			t.Errorf("path %s", path)
		}
		checkPasswd(t, path, users)
		// A second write replaces the file (the server may be reading it).
		if _, err := writePasswd(dir, users[:1]); err != nil {
			t.Fatal(err)
		}
		checkPasswd(t, path, users[:1])
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("directory holds %d entries, want only passwd (no temp files)", len(entries))
		}
	})
	t.Run("relative directory becomes absolute", func(t *testing.T) {
		dir := t.TempDir()
		t.Chdir(dir)
		if err := os.Mkdir("sub", 0o755); err != nil {
			t.Fatal(err)
		}
		path, err := writePasswd("sub", users)
		if err != nil {
			t.Fatal(err)
		}
		if !filepath.IsAbs(path) {
			t.Errorf("path %s is relative", path)
		}
		checkPasswd(t, path, users)
	})
	t.Run("temporary directory", func(t *testing.T) {
		t.Setenv("TMPDIR", t.TempDir())
		path, err := writePasswd("", users)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Dir(path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("directory mode %v, want 0755 (a server under another uid reads it)", fi.Mode().Perm())
		}
		checkPasswd(t, path, users)
	})
	t.Run("missing directory", func(t *testing.T) {
		if _, err := writePasswd(filepath.Join(t.TempDir(), "nope"), users); err == nil {
			t.Error("no error")
		}
	})
}

// checkPasswd reads path back as a passwd file: one well-formed line per
// user, in order, world-readable, no key material.
func checkPasswd(t *testing.T, path string, users []*benchUser) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v, want 0644", fi.Mode().Perm())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for ; sc.Scan(); n++ {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) != 7 {
			t.Fatalf("line %d %q: %d fields, want 7", n+1, sc.Text(), len(fields))
		}
		if n >= len(users) {
			t.Fatalf("more lines than users")
		}
		u := users[n]
		if fields[0] != u.Login || fields[1] != "x" || fields[2] != fields[3] || fields[4] != "Bench User,,," {
			t.Errorf("line %d: %q", n+1, sc.Text())
		}
	}
	if n != len(users) {
		t.Errorf("%d lines, want %d", n, len(users))
	}
}

func TestStateRoundTrip(t *testing.T) {
	users, err := newUsers("p", 2, bytes.NewReader(bytes.Repeat([]byte{0xab}, 2*keySize)))
	if err != nil {
		t.Fatal(err)
	}
	users[1].Counter = 42
	path := filepath.Join(t.TempDir(), "state.json")
	if err := saveState(path, newState("r", "p", true, users)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state mode %v, want 0600 (it holds keys)", fi.Mode().Perm())
	}
	st, back, err := loadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Realm != "r" || st.Prefix != "p" || !st.PIN || len(back) != 2 {
		t.Fatalf("state %+v", st)
	}
	if back[1].Login != users[1].Login || back[1].Serial != users[1].Serial || back[1].Counter != 42 ||
		!bytes.Equal(back[1].Key, users[1].Key) || back[1].UID != users[1].UID {
		t.Errorf("user back %+v, want %+v", *back[1], *users[1])
	}

	for name, content := range map[string]string{
		"not json":    "hello",
		"old version": `{"version":0,"users":[{"login":"a","key":"00"}]}`,
		"no users":    `{"version":1,"users":[]}`,
		"bad key":     `{"version":1,"users":[{"login":"a","key":"zz"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "s")
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, _, err := loadState(p); err == nil {
				t.Error("no error")
			}
		})
	}
}
