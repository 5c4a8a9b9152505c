package passwd_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/passwd"
	"github.com/authsrv/authsrv/resolver/resolvertest"
)

// fixtures reads testdata/hashes.txt (made by testdata/gen.sh with openssl
// and libxcrypt): login -> hash.
func fixtures(t testing.TB) map[string]string {
	t.Helper()
	f, err := os.Open("testdata/hashes.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		login, hash, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("bad fixture line %q", sc.Text())
		}
		out[login] = hash
	}
	return out
}

// line formats a passwd line for a kit user.
func line(u resolvertest.User, hash string, uid int) string {
	gecos := fmt.Sprintf("%s %s,,%s,%s,%s", u.Givenname, u.Surname, u.Mobile, u.Phone, u.Email)
	return fmt.Sprintf("%s:%s:%d:%d:%s:/home/%s:/bin/sh", u.Login, hash, uid, uid, gecos, u.Login)
}

// seed writes the kit population (plus lines the parser must skip) to a
// passwd file in dir and returns its path.
func seed(t testing.TB, dir string) string {
	t.Helper()
	h := fixtures(t)
	lines := []string{"# authsrv test population", ""}
	for i, u := range resolvertest.Users {
		lines = append(lines, line(u, h[u.Login], 1001+i))
	}
	lines = append(lines,
		"malformed line without colons",
		"short:x:1",
		"toolong:x:1:1:g:/h:/bin/sh:extra",
		"nonnumeric:x:abc:1:g:/h:/bin/sh",
		":x:1200:1:empty login:/h:/bin/sh",
		"+nisentry::::::",
		"alice:x:1300:1:duplicate login:/h:/bin/sh",
		"dupuid:x:1001:1:duplicate uid:/h:/bin/sh",
		"   # indented comment",
	)
	path := filepath.Join(dir, "passwd")
	write(t, path, lines...)
	return path
}

func write(t testing.TB, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func appendLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// clock is a settable Env.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func open(t testing.TB, typ resolver.Type, cfg resolver.Config, env resolver.Env) resolver.Resolver {
	t.Helper()
	if err := typ.Validate(cfg); err != nil {
		t.Fatalf("Validate(%v): %v", cfg, err)
	}
	r, err := typ.New(context.Background(), cfg, env)
	if err != nil {
		t.Fatalf("New(%v): %v", cfg, err)
	}
	passwd.WaitLoaded(r) // the tests below start from a loaded file
	return r
}

func TestConformance(t *testing.T) {
	path := seed(t, t.TempDir())
	resolvertest.Run(t, func(t *testing.T) resolver.Resolver {
		return open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{Log: zerolog.Nop()})
	}, resolvertest.Options{Passwords: true, SearchKeys: []string{resolver.KeyEmail}})
}

func TestConformanceWithRoot(t *testing.T) {
	root := t.TempDir()
	path := seed(t, root)
	resolvertest.Run(t, func(t *testing.T) resolver.Resolver {
		return open(t, passwd.TypeWithRoot(root), resolver.Config{passwd.ParamFileNameCamel: path}, resolver.Env{})
	}, resolvertest.Options{Passwords: true, SearchKeys: []string{resolver.KeyEmail}})
}

func TestUserInfo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	write(t, path,
		"alice:x:1001:100:Alice Liddell,Room 4,+49170111,+4930111,not an address,alice@example.org,second@example.org:/home/alice:/bin/sh",
		"root:x:0:0:root:/root:/bin/bash",
		"mary:x:1002:100:Mary Ann Smith:/home/mary:/bin/sh",
		"crlf:x:1003:100:Cr Lf,,1,2,crlf@example.org:/h:/bin/sh\r",
	)
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{})
	defer r.Close()
	cases := []struct {
		uid  string
		want resolver.Info
	}{
		{"1001", resolver.Info{"username": "alice", "userid": "1001", "givenname": "Alice", "surname": "Liddell",
			"mobile": "+49170111", "phone": "+4930111", "email": "alice@example.org",
			"description": "Alice Liddell,Room 4,+49170111,+4930111,not an address,alice@example.org,second@example.org"}},
		{"0", resolver.Info{"username": "root", "userid": "0", "givenname": "root", "surname": "", "mobile": "", "phone": "", "email": "", "description": "root"}},
		{"1002", resolver.Info{"username": "mary", "userid": "1002", "givenname": "Mary", "surname": "Ann Smith", "mobile": "", "phone": "", "email": "", "description": "Mary Ann Smith"}},
		{"1003", resolver.Info{"username": "crlf", "userid": "1003", "givenname": "Cr", "surname": "Lf", "mobile": "1", "phone": "2", "email": "crlf@example.org", "description": "Cr Lf,,1,2,crlf@example.org"}},
	}
	for _, tc := range cases {
		t.Run(tc.uid, func(t *testing.T) {
			got, err := r.User(t.Context(), tc.uid)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("User(%s) = %v\nwant %v", tc.uid, got, tc.want)
			}
		})
	}
	if f, ok := r.(resolver.Fielder); !ok || !slices.Equal(f.Fields(), []string{"username", "userid", "description", "email"}) {
		t.Error("the store does not list its search keys")
	}
}

func TestSearch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	write(t, path,
		"root:x:0:0:root:/root:/bin/bash",
		"alice:x:1000:100:Alice Liddell,,,,Alice@Example.ORG:/home/alice:/bin/sh",
		"albert:x:1500:100:Albert Einstein,,,,albert@physics.example:/home/albert:/bin/sh",
		"bob:x:2000:100:Bob Builder,,,,bob@example.org:/home/bob:/bin/sh",
		"star*name:x:2500:100:Literal Star:/h:/bin/sh",
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
		"max:x:4294967295:1:max uid:/h:/bin/sh",
	)
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{})
	defer r.Close()
	cases := []struct {
		filter map[string]string
		want   []string
	}{
		{nil, []string{"root", "alice", "albert", "bob", "star*name", "nobody", "max"}},
		{map[string]string{"username": ""}, []string{"root", "alice", "albert", "bob", "star*name", "nobody", "max"}},
		{map[string]string{"username": "**"}, []string{"root", "alice", "albert", "bob", "star*name", "nobody", "max"}},
		{map[string]string{"username": "al*"}, []string{"alice", "albert"}},
		{map[string]string{"username": "AL*"}, []string{"alice", "albert"}},
		{map[string]string{"username": "*ob*"}, []string{"bob", "nobody"}},
		{map[string]string{"username": "*ce"}, []string{"alice"}},
		{map[string]string{"username": "ALICE"}, []string{"alice"}},
		{map[string]string{"username": "a*e"}, nil},
		{map[string]string{"username": "star*name"}, []string{"star*name"}},
		{map[string]string{"username": "STAR*NAME"}, []string{"star*name"}},
		{map[string]string{"username": "alic"}, nil},
		{map[string]string{"username": "?lice"}, nil},
		{map[string]string{"email": "alice@example.org"}, []string{"alice"}},
		{map[string]string{"email": "*@example.org"}, []string{"alice", "bob"}},
		{map[string]string{"email": "*example*"}, []string{"alice", "albert", "bob"}},
		{map[string]string{"description": "*builder*"}, []string{"bob"}},
		{map[string]string{"description": "root"}, []string{"root"}},
		{map[string]string{"userid": "=1000"}, []string{"alice"}},
		{map[string]string{"userid": "1000"}, []string{"alice"}},
		{map[string]string{"userid": ">1500"}, []string{"bob", "star*name", "nobody", "max"}},
		{map[string]string{"userid": ">=1500"}, []string{"albert", "bob", "star*name", "nobody", "max"}},
		{map[string]string{"userid": "<1500"}, []string{"root", "alice"}},
		{map[string]string{"userid": "<=1500"}, []string{"root", "alice", "albert"}},
		{map[string]string{"userid": "< 1"}, []string{"root"}},
		{map[string]string{"userid": "<0"}, nil},
		{map[string]string{"userid": ">4294967295"}, nil},
		{map[string]string{"userid": "between 1000,2000"}, []string{"alice", "albert", "bob"}},
		{map[string]string{"userid": "Between 1001, 2000"}, []string{"albert", "bob"}},
		{map[string]string{"userid": "between 2000,1000"}, nil},
		{map[string]string{"userid": "between 1000"}, nil},
		{map[string]string{"userid": "*"}, []string{"root", "alice", "albert", "bob", "star*name", "nobody", "max"}},
		{map[string]string{"userid": ">abc"}, nil},
		{map[string]string{"userid": "=-1"}, nil},
		{map[string]string{"userid": "1000 OR 1=1"}, nil},
		{map[string]string{"username": "al*", "userid": ">1000"}, []string{"albert"}},
		{map[string]string{"username": "b*", "email": "*@physics.example"}, nil},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.filter), func(t *testing.T) {
			list, err := r.Search(t.Context(), tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, i := range list {
				got = append(got, i.String(resolver.KeyUsername))
				if _, ok := i[resolver.KeyPassword]; ok {
					t.Error("a password field")
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	for _, key := range []string{"givenname", "phone", "Username", "password", "cryptpass", ""} {
		if _, err := r.Search(t.Context(), map[string]string{key: "*"}); !errors.Is(err, resolver.ErrSearchKey) {
			t.Errorf("Search by %q: %v, want ErrSearchKey", key, err)
		}
	}
}

func TestCheckPassword(t *testing.T) {
	h := fixtures(t)
	genBcrypt, err := bcrypt.GenerateFromPassword([]byte("alice-Pw1"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, hash string
		want       bool
	}{
		{"sha512 openssl", h["alice"], true},
		{"sha256 openssl", "", false}, // filled below with bob's hash and alice's password
		{"sha256 rounds libxcrypt", h["sha256-rounds"], true},
		{"bcrypt 2y libxcrypt", h["bcrypt-2y"], true},
		{"bcrypt 2a libxcrypt", h["bcrypt-2a"], true},
		{"bcrypt x/crypto", string(genBcrypt), true},
		{"shadow x", "x", false},
		{"shadow star", "*", false},
		{"locked", "!" + h["alice"], false},
		{"empty hash", "", false},
		{"plain text", "alice-Pw1", false},
		{"md5crypt", "$1$saltsalt$0Tb4ZBCzsHXb7HKPXq/Df.", false},
		{"bcrypt 2x", "$2x$04" + h["bcrypt-2y"][6:], false},
		{"sha512 truncated", h["alice"][:len(h["alice"])-1], false},
		{"sha512 trailing", h["alice"] + "x", false},
		{"sha512 rounds too high", "$6$rounds=999999999$Q9xTt3nW2eYcLrAb" + h["alice"][strings.LastIndex(h["alice"], "$"):], false},
		{"sha512 rounds too low", "$6$rounds=999$Q9xTt3nW2eYcLrAb" + h["alice"][strings.LastIndex(h["alice"], "$"):], false},
		{"sha512 rounds leading zero", "$6$rounds=05000$Q9xTt3nW2eYcLrAb" + h["alice"][strings.LastIndex(h["alice"], "$"):], false},
		{"bcrypt cost 31", "$2b$31" + h["bcrypt-2y"][6:], false},
		{"yescrypt", "$y$j9T$F5Jx5fExrKuPp53xLKQ..1$X3DX6M94c7o.9agCG9G317fhZg9SqC.5i5rd.RhAtQ7", false},
	}
	cases[1].hash = h["bob"]
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			if got := passwd.Verify(tc.hash, "alice-Pw1"); got != tc.want {
				t.Errorf("Verify(%q) = %v, want %v", tc.hash, got, tc.want)
			}
			// A hash refused for its cost would take hours to run; 15 s
			// tells that apart from a real verification on a busy
			// machine under -race.
			if d := time.Since(start); d > 15*time.Second {
				t.Errorf("took %v", d)
			}
			if tc.want && passwd.Verify(tc.hash, "alice-Pw2") {
				t.Error("a wrong password verifies")
			}
		})
	}
	if !passwd.Verify(h["bob"], "b0b p w%+&=ä") || !passwd.Verify(h["müller"], "Müller-Pässwort") || !passwd.Verify(h["carol.smith"], "c4rol") {
		t.Error("a kit fixture does not verify")
	}
	if passwd.Verify(passwd.DummyHash, "") {
		t.Error("the dummy hash accepts the empty password")
	}
}

func TestReload(t *testing.T) {
	h := fixtures(t)
	alice, bob, carol := resolvertest.Users[0], resolvertest.Users[1], resolvertest.Users[3]
	dir := t.TempDir()
	path := filepath.Join(dir, "passwd")
	write(t, path, line(alice, h["alice"], 1001))
	clk := newClock()
	var logs logBuf
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{Log: zerolog.New(&logs), Now: clk.Now})
	defer r.Close()
	ctx := t.Context()
	has := func(login string) bool {
		_, err := r.UserID(ctx, login)
		if err != nil && !errors.Is(err, resolver.ErrNoUser) {
			t.Fatalf("UserID(%s): %v", login, err)
		}
		return err == nil
	}

	t.Run("Append", func(t *testing.T) {
		appendLines(t, path, line(bob, h["bob"], 1002))
		if has("bob") {
			t.Error("the file was read again within a second")
		}
		clk.Advance(1100 * time.Millisecond)
		if !has("bob") || !has("alice") {
			t.Error("the appended user is not visible after a second")
		}
	})
	t.Run("Shorter", func(t *testing.T) {
		write(t, path, line(bob, h["bob"], 1002))
		clk.Advance(1100 * time.Millisecond)
		if has("alice") || !has("bob") {
			t.Error("the rewritten file is not served")
		}
	})
	t.Run("ReplacedSameSize", func(t *testing.T) {
		// A rename over the file with the same size and mtime: only the
		// inode tells.
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "passwd.new")
		write(t, tmp, strings.Replace(line(bob, h["bob"], 1002), "bob:", "bib:", 1))
		if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		clk.Advance(1100 * time.Millisecond)
		if has("bob") || !has("bib") {
			t.Error("the replaced file is not served")
		}
	})
	t.Run("Deleted", func(t *testing.T) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			clk.Advance(1100 * time.Millisecond)
			if !has("bib") {
				t.Fatal("the last good copy is not served after the file was deleted")
			}
		}
		if n := strings.Count(logs.String(), "serving the last good copy"); n != 1 {
			t.Errorf("the failure was logged %d times, want once:\n%s", n, logs.String())
		}
		if tr, ok := r.(resolver.Tester); ok {
			if v, desc := tr.Test(ctx); v != false || desc != "The file does not exist." {
				t.Errorf("Test() = %v, %q", v, desc)
			}
		}
	})
	t.Run("Recreated", func(t *testing.T) {
		write(t, path, line(carol, h["carol.smith"], 1004), "broken line")
		clk.Advance(1100 * time.Millisecond)
		if !has("carol.smith") || has("bib") {
			t.Error("the recreated file is not served")
		}
		if !strings.Contains(logs.String(), `"skipped_lines":1`) {
			t.Errorf("the skipped line is not logged:\n%s", logs.String())
		}
	})
	t.Run("BecomesDirectory", func(t *testing.T) {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		clk.Advance(1100 * time.Millisecond)
		if !has("carol.smith") {
			t.Error("the last good copy is not served")
		}
	})
	for _, hash := range h {
		if strings.Contains(logs.String(), hash) {
			t.Error("a hash was logged")
		}
	}
}

// TestReloadRealClock checks the default clock: an appended user shows up
// (after about a second; the bound is generous for a loaded machine).
func TestReloadRealClock(t *testing.T) {
	t.Parallel()
	h := fixtures(t)
	path := filepath.Join(t.TempDir(), "passwd")
	write(t, path, line(resolvertest.Users[0], h["alice"], 1001))
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{})
	defer r.Close()
	appendLines(t, path, line(resolvertest.Users[1], h["bob"], 1002))
	// The store looks every second; the deadline leaves a loaded machine
	// room (the loop ends as soon as bob shows).
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := r.UserID(t.Context(), "bob"); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the appended user did not show up within 15 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestMissingAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	clk := newClock()
	var logs logBuf
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{Log: zerolog.New(&logs), Now: clk.Now})
	defer r.Close()
	if _, err := r.UserID(t.Context(), "alice"); !errors.Is(err, resolver.ErrUnavailable) {
		t.Errorf("UserID with no file: %v, want ErrUnavailable", err)
	}
	if _, err := r.Search(t.Context(), nil); !errors.Is(err, resolver.ErrUnavailable) {
		t.Errorf("Search with no file: %v, want ErrUnavailable", err)
	}
	if !strings.Contains(logs.String(), "no users until it can") {
		t.Errorf("not logged: %s", logs.String())
	}
	write(t, path, line(resolvertest.Users[0], "x", 1001))
	if _, err := r.UserID(t.Context(), "alice"); err != nil {
		t.Errorf("UserID after the file appeared: %v", err)
	}
}

func TestTester(t *testing.T) {
	dir := t.TempDir()
	path := seed(t, dir)
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{})
	defer r.Close()
	tr, ok := r.(resolver.Tester)
	if !ok {
		t.Fatal("not a Tester")
	}
	if v, desc := tr.Test(t.Context()); v != true || desc != "The file contains 4 users." {
		t.Errorf("Test() = %v, %q", v, desc)
	}
	if _, ok := r.(resolver.Editor); ok {
		t.Error("the store claims to be an Editor")
	}
	typ := passwd.Type()
	if typ.Editable(resolver.Config{}) || typ.CacheTimeout(resolver.Config{}) != 0 || typ.Name != "passwdresolver" {
		t.Error("type flags")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if v, _ := tr.Test(t.Context()); v != false {
		t.Error("Test after Close is true")
	}
	if _, err := r.UserID(t.Context(), "alice"); err == nil {
		t.Error("UserID after Close works")
	}
}

func TestKeySpellings(t *testing.T) {
	path := seed(t, t.TempDir())
	for _, key := range []string{passwd.ParamFilename, passwd.ParamFileNameCamel, passwd.ParamFileNameLower} {
		t.Run(key, func(t *testing.T) {
			r := open(t, passwd.Type(), resolver.Config{key: path}, resolver.Env{})
			defer r.Close()
			if uid, err := r.UserID(t.Context(), "alice"); err != nil || uid != "1001" {
				t.Errorf("UserID = %q, %v", uid, err)
			}
		})
	}
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path, passwd.ParamFileNameLower: path}, resolver.Env{})
	_ = r.Close()
	var names []string
	for _, p := range passwd.Type().Params {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"Filename", "fileName", "filename", "MaxFileSize"}) {
		t.Errorf("Params = %v", names)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	path := seed(t, dir)
	cases := []struct {
		name string
		cfg  resolver.Config
		want string // "" = valid
	}{
		{"missing", resolver.Config{}, "Missing parameter: Filename"},
		{"empty", resolver.Config{passwd.ParamFilename: ""}, "Missing parameter: Filename"},
		{"other keys only", resolver.Config{"FILENAME": path}, "Missing parameter: Filename"},
		{"relative", resolver.Config{passwd.ParamFilename: "etc/passwd"}, "The file name must be an absolute path."},
		{"dot relative", resolver.Config{passwd.ParamFilename: "../../etc/shadow"}, "The file name must be an absolute path."},
		{"NUL", resolver.Config{passwd.ParamFilename: path + "\x00x"}, "The file name must be an absolute path."},
		{"conflict", resolver.Config{passwd.ParamFilename: path, passwd.ParamFileNameCamel: "/etc/passwd"}, "The parameters Filename and fileName name different files; set only one."},
		{"directory", resolver.Config{passwd.ParamFilename: dir}, "The file is not a regular file."},
		{"proc", resolver.Config{passwd.ParamFileNameLower: "/proc/self/environ"}, "Files under /proc, /sys and /dev are not allowed."},
		{"dev", resolver.Config{passwd.ParamFilename: "/dev/zero"}, "Files under /proc, /sys and /dev are not allowed."},
		{"not yet there", resolver.Config{passwd.ParamFilename: filepath.Join(dir, "later")}, ""},
		{"valid", resolver.Config{passwd.ParamFilename: path}, ""},
		{"same twice", resolver.Config{passwd.ParamFilename: path, passwd.ParamFileNameCamel: path}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := passwd.Type().Validate(tc.cfg)
			checkConfigErr(t, err, tc.want)
			if tc.want != "" {
				if _, err := passwd.Type().New(t.Context(), tc.cfg, resolver.Env{}); err == nil && !strings.Contains(tc.want, "regular") {
					t.Error("New accepts the configuration")
				}
			}
		})
	}
}

// checkOpened validates cfg with typ and opens it. With want set, the
// file is refused (at Validate and, when strictNew, at New with want; or
// when read: UserID gives ErrUnavailable and Test gives want); without,
// alice (uid 1001) is found. It reports with Errorf, so it may run in a
// goroutine.
func checkOpened(t *testing.T, typ resolver.Type, cfg resolver.Config, want string, strictNew bool) {
	t.Helper()
	checkConfigErr(t, typ.Validate(cfg), want)
	r, err := typ.New(t.Context(), cfg, resolver.Env{})
	if err != nil {
		if want == "" {
			t.Errorf("New: %v", err)
		} else if strictNew {
			checkConfigErr(t, err, want)
		}
		return
	}
	defer r.Close()
	uid, err := r.UserID(t.Context(), "alice")
	if want == "" {
		if err != nil || uid != "1001" {
			t.Errorf("UserID = %q, %v", uid, err)
		}
		return
	}
	if !errors.Is(err, resolver.ErrUnavailable) {
		t.Errorf("UserID = %q, %v; want ErrUnavailable", uid, err)
	}
	if v, desc := r.(resolver.Tester).Test(t.Context()); v != false || desc != want {
		t.Errorf("Test() = %v, %q; want false, %q", v, desc, want)
	}
}

func checkConfigErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("error %v, want none", err)
		}
		return
	}
	if err == nil {
		t.Errorf("no error, want %q", want)
		return
	}
	if !errors.Is(err, resolver.ErrConfig) || !apierr.Is(err, apierr.Resolver) {
		t.Errorf("%v is not a resolver configuration error", err)
	}
	if _, _, msg, _, _ := apierr.Wire(err); msg != "ERR907: "+want {
		t.Errorf("wire message %q, want %q", msg, "ERR907: "+want)
	}
}

// TestPaths is reliability B7 with a root: nothing outside it is read.
func TestPaths(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "sub")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	inside := seed(t, root)
	secretFile := seed(t, outside) // a valid passwd file, so reading it would show
	enckey := filepath.Join(outside, "enckey")
	write(t, enckey, "0123456789abcdef")
	link := func(name, target string) string {
		p := filepath.Join(root, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	linkOut := link("out", secretFile)
	linkOutRel := link("outrel", "../outside/passwd")
	linkDirOut := link("dirout", outside)
	linkIn := link("in", inside)
	linkInRel := link("inrel", "passwd")
	rootLink := filepath.Join(base, "rootlink")
	if err := os.Symlink(root, rootLink); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(root, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skipf("cannot make a FIFO: %v", err)
	}

	const refusedOutside = "OUTSIDE" // the outside text, which names the file
	cases := []struct {
		name, root, path string
		want             string // "" = served
	}{
		{"inside", root, inside, ""},
		{"symlink inside absolute", root, linkIn, ""},
		{"symlink inside relative", root, linkInRel, ""},
		{"root given through a symlink", rootLink, filepath.Join(rootLink, "passwd"), ""},
		{"relative traversal", root, "../../etc/shadow", "The file name must be an absolute path."},
		{"absolute traversal", root, filepath.Join(root, "../../etc/shadow"), refusedOutside},
		{"traversal to a real file", root, filepath.Join(root, "sub/../../outside/passwd"), refusedOutside},
		{"etc shadow", root, "/etc/shadow", refusedOutside},
		{"enckey", root, enckey, refusedOutside},
		{"symlink out", root, linkOut, refusedOutside},
		{"relative symlink out", root, linkOutRel, refusedOutside},
		{"symlinked dir out", root, filepath.Join(linkDirOut, "passwd"), refusedOutside},
		{"proc environ", root, "/proc/self/environ", "Files under /proc, /sys and /dev are not allowed."},
		{"proc environ without root", "", "/proc/self/environ", "Files under /proc, /sys and /dev are not allowed."},
		{"symlink to proc without root", "", link("proc", "/proc/self/environ"), "Files under /proc, /sys and /dev are not allowed."},
		{"fifo", root, fifo, "The file is not a regular file."},
		{"fifo without root", "", fifo, "The file is not a regular file."},
		{"the root itself", root, root, refusedOutside},
		{"directory", root, filepath.Join(root, "sub"), "The file is not a regular file."},
	}
	for _, tc := range cases {
		if tc.want == refusedOutside {
			tc.want = "The file " + tc.path + " is outside the allowed directories (the server's file roots)."
		}
		t.Run(tc.name, func(t *testing.T) {
			typ := passwd.TypeWithRoot(tc.root)
			cfg := resolver.Config{passwd.ParamFilename: tc.path}
			done := make(chan struct{})
			go func() {
				defer close(done)
				checkOpened(t, typ, cfg, tc.want, false)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("hung (a FIFO was opened?)")
			}
		})
	}

	// A file that becomes a symlink out of the root after the store was
	// built keeps the last good copy and never serves the outside file.
	t.Run("swapped for a symlink", func(t *testing.T) {
		path := filepath.Join(root, "swap")
		write(t, path, line(resolvertest.Users[0], "x", 4711))
		clk := newClock()
		r := open(t, passwd.TypeWithRoot(root), resolver.Config{passwd.ParamFilename: path}, resolver.Env{Now: clk.Now})
		defer r.Close()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secretFile, path); err != nil {
			t.Fatal(err)
		}
		clk.Advance(2 * time.Second)
		if uid, err := r.UserID(t.Context(), "alice"); err != nil || uid != "4711" {
			t.Errorf("UserID = %q, %v; want the last good copy", uid, err)
		}
	})
}

func TestConcurrentReload(t *testing.T) {
	h := fixtures(t)
	path := seed(t, t.TempDir())
	clk := newClock()
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{Now: clk.Now})
	defer r.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				if g == 0 && i%20 == 0 {
					f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = f.WriteString(line(resolvertest.User{Login: fmt.Sprintf("u%d", i)}, h["alice"], 5000+i) + "\n")
					_ = f.Close()
					clk.Advance(time.Second)
				}
				if _, err := r.UserID(t.Context(), "alice"); err != nil {
					t.Errorf("UserID: %v", err)
					return
				}
				if _, err := r.Search(t.Context(), map[string]string{"username": "u*"}); err != nil {
					t.Errorf("Search: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	clk.Advance(time.Second)
	list, err := r.Search(t.Context(), map[string]string{"username": "u*"})
	if err != nil || len(list) != 10 {
		t.Errorf("after the appends: %d users, %v", len(list), err)
	}
}

// TestLarge loads a 100,000-user file and checks the load time.
func TestLarge(t *testing.T) {
	path := bigFile(t, 100_000)
	start := time.Now()
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{})
	d := time.Since(start)
	defer r.Close()
	if v, desc := r.(resolver.Tester).Test(t.Context()); v != true || desc != "The file contains 100000 users." {
		t.Errorf("Test() = %v, %q", v, desc)
	}
	limit := time.Second
	if raceEnabled {
		limit = 5 * time.Second
	}
	if d > limit {
		t.Errorf("loading 100,000 users took %v", d)
	}
	t.Logf("loaded 100,000 users in %v", d)
	if info, err := r.User(t.Context(), "199999"); err != nil || info.String(resolver.KeyUsername) != "user99999" {
		t.Errorf("last user: %v, %v", info, err)
	}
}

func bigFile(t testing.TB, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "user%d:$6$dummysaltdummysa$ly0KGculPEMIByyOtknKbWvS28pV6Iz8DzBw06zu.duN9WaL9yoQiZYCAOO9yVvTSOBTNBpcpZMN7Q7M1GNy71:%d:100:Given%d Surname%d,Room %d,+49170%d,+4930%d,user%d@example.org:/home/user%d:/bin/bash\n",
			i, 100000+i, i, i, i, i, i, i, i)
	}
	path := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func BenchmarkPasswdLookup100k(b *testing.B) {
	path := bigFile(b, 100_000)
	r := open(b, passwd.Type(), resolver.Config{passwd.ParamFilename: path}, resolver.Env{})
	defer r.Close()
	logins := make([]string, 1024)
	for i := range logins {
		logins[i] = fmt.Sprintf("user%d", (i*7919)%100_000)
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		uid, err := r.UserID(ctx, logins[i&1023])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.User(ctx, uid); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkPasswdLoad100k(b *testing.B) {
	path := bigFile(b, 100_000)
	typ := passwd.Type()
	cfg := resolver.Config{passwd.ParamFilename: path}
	b.ReportAllocs()
	for b.Loop() {
		r, err := typ.New(context.Background(), cfg, resolver.Env{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.UserID(context.Background(), "user99999"); err != nil {
			b.Fatal(err)
		}
		_ = r.Close()
	}
}

// TestTooLarge: a file above the limit is a configuration error at save
// time and when the store is built (a sparse file, so the test writes
// nothing); a file that grows past it after a good load is refused at the
// reload, never read in part, and the last good copy stays.
func TestTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passwd")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(DefaultMaxPlusOne); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	cfg := resolver.Config{passwd.ParamFilename: path}
	want := fmt.Sprintf("The file has %d bytes, more than the limit of %d bytes (parameter MaxFileSize).", DefaultMaxPlusOne, passwd.DefaultMaxFileSize)
	if err := passwd.Type().Validate(cfg); !errors.Is(err, resolver.ErrConfig) || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate: %v", err)
	}
	if r, err := passwd.Type().New(t.Context(), cfg, resolver.Env{}); !errors.Is(err, resolver.ErrConfig) || !strings.Contains(err.Error(), want) || r != nil {
		t.Errorf("New: %v, %v", r, err)
	}
	for _, bad := range []string{"0", "-1", "x", "4294967296"} {
		if err := passwd.Type().Validate(resolver.Config{passwd.ParamFilename: path, passwd.ParamMaxFileSize: bad}); !errors.Is(err, resolver.ErrConfig) {
			t.Errorf("MaxFileSize %q: %v", bad, err)
		}
	}

	// Grows past a small limit after a good load.
	small := seed(t, t.TempDir())
	fi, err := os.Stat(small)
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	limit := fi.Size() + 10
	r := open(t, passwd.Type(), resolver.Config{passwd.ParamFilename: small, passwd.ParamMaxFileSize: strconv.FormatInt(limit, 10)}, resolver.Env{Now: clk.Now})
	defer r.Close()
	appendLines(t, small, "zed:x:9999:1::/h:/bin/sh")
	clk.Advance(2 * time.Second)
	if _, err := r.UserID(t.Context(), "zed"); !errors.Is(err, resolver.ErrNoUser) {
		t.Errorf("a user past the limit is served: %v", err)
	}
	if uid, err := r.UserID(t.Context(), "alice"); err != nil || uid != "1001" {
		t.Errorf("the last good copy is not served: %q, %v", uid, err)
	}
	wantGrown := fmt.Sprintf("The file has %d bytes, more than the limit of %d bytes (parameter MaxFileSize).", fi.Size()+25, limit)
	if v, desc := r.(resolver.Tester).Test(t.Context()); v != false || desc != wantGrown {
		t.Errorf("Test() = %v, %q", v, desc)
	}
}

// DefaultMaxPlusOne is one byte over the default limit.
const DefaultMaxPlusOne = passwd.DefaultMaxFileSize + 1
