package authsrv_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/authsrv/authsrv"

// floors is ARCHITECTURE.md's table: a package may import only packages on
// a lower floor. Implementations of an interface package (store/bolt,
// resolver/ldap) import that package, so they sit a quarter floor above it;
// test kits (packages named xxxtest) sit half a floor above the package they
// test. A package missing here fails the test: give every new package its
// floor.
var floors = map[string]float64{
	"cmd/authsrv":        7,
	"cmd/authbench":      7,
	"examples/*":         7,
	"server":             6,
	"radius":             6, // the RADIUS listener: beside server, a caller of the library
	"piimport":           6, // authsrv import privacyidea: beside server, a caller of the library
	"":                   5, // the root package authsrv
	"validate":           4,
	"machine":            4,
	"eventing":           4,
	"token":              3,
	"realm":              3,
	"policy":             2,
	"resolver":           2,
	"resolver/*":         2.25,
	"resolver/builtin":   2.5, // imports every resolver/* implementation
	"notify":             2,
	"audit":              2,
	"monitoring":         2,
	"sysconfig":          2,
	"subscription":       2,
	"caconnector":        2,
	"metrics":            1,
	"user":               2,
	"admin":              2,
	"apierr":             1,
	"caller":             1,
	"store":              1,
	"store/bolt":         1.25,
	"store/postgres":     1.25,
	"internal/secret":    1,
	"fileroot":           1,
	"internal/radclient": 1,
	"netguard":           1,
	"otp":                1,
	"internal/otp":       1.25, // re-exports the public otp package
	"internal/tokenfile": 1,
	"internal/offheap":   0,
	// Test helpers: imported by tests only.
	"internal/testsvc": 1,
}

// floorOf returns the floor of a package path relative to the module.
func floorOf(rel string) (float64, bool) {
	if strings.HasPrefix(rel, "/") || strings.HasSuffix(rel, "/") || strings.Contains(rel, "//") {
		return 0, false
	}
	if f, ok := floors[rel]; ok {
		return f, true
	}
	if i := strings.LastIndex(rel, "/"); i >= 0 {
		parent, last := rel[:i], rel[i+1:]
		if f, ok := floors[parent+"/*"]; ok {
			return f, true
		}
		if strings.HasSuffix(last, "test") {
			if f, ok := floorOf(parent); ok {
				return f + 0.5, true
			}
		}
	}
	return 0, false
}

type listed struct {
	ImportPath string
	Dir        string
	Imports    []string
	GoFiles    []string
}

// checkFloors returns one line per violation among pkgs.
func checkFloors(pkgs []listed) []string {
	var bad []string
	for _, p := range pkgs {
		rel, ok := relPath(p.ImportPath)
		if !ok {
			continue
		}
		from, known := floorOf(rel)
		if !known {
			bad = append(bad, p.ImportPath+": has no floor in the table")
			continue
		}
		for _, imp := range p.Imports {
			if imp == "go.etcd.io/bbolt" && rel != "store/bolt" {
				bad = append(bad, p.ImportPath+": only store/bolt may import bbolt")
			}
			if imp == "github.com/julienschmidt/httprouter" && from < 6 {
				bad = append(bad, p.ImportPath+": only the server may import httprouter")
			}
			irel, ok := relPath(imp)
			if !ok {
				continue
			}
			to, known := floorOf(irel)
			if !known {
				continue // reported on its own
			}
			if to >= from {
				bad = append(bad, p.ImportPath+" (floor "+ftoa(from)+") imports "+imp+" (floor "+ftoa(to)+")")
			}
		}
	}
	return bad
}

func ftoa(f float64) string { b, _ := json.Marshal(f); return string(b) }

func relPath(path string) (string, bool) {
	switch {
	case path == module:
		return "", true
	case strings.HasPrefix(path, module+"/"):
		return strings.TrimPrefix(path, module+"/"), true
	}
	return "", false
}

func goList(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(&out)
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func TestImportFloors(t *testing.T) {
	for _, line := range checkFloors(goList(t)) {
		t.Error(line)
	}
}

// httpServerTypes are what only the server package and the binaries may
// use: subsystems do not handle HTTP requests (outgoing clients are fine).
var httpServerTypes = regexp.MustCompile(`\bhttp\.(ResponseWriter|Handler|HandlerFunc|Server|ServeMux)\b|net/http/httptest`)

func TestNoHTTPBelowServer(t *testing.T) {
	for _, p := range goList(t) {
		rel, _ := relPath(p.ImportPath)
		if f, ok := floorOf(rel); !ok || f >= 6 {
			continue
		}
		for _, name := range p.GoFiles {
			src, err := os.ReadFile(filepath.Join(p.Dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if loc := httpServerTypes.Find(src); loc != nil {
				t.Errorf("%s/%s uses %s: HTTP serving belongs in package server", p.ImportPath, name, loc)
			}
		}
	}
}

// TestFloorCheckCatches proves the check fails on bad imports.
func TestFloorCheckCatches(t *testing.T) {
	cases := []struct {
		name string
		pkg  listed
		bad  bool
	}{
		{"down is fine", listed{ImportPath: module + "/admin", Imports: []string{module + "/store", module + "/apierr"}}, false},
		{"same floor", listed{ImportPath: module + "/store", Imports: []string{module + "/apierr"}}, true},
		{"upward", listed{ImportPath: module + "/admin", Imports: []string{module}}, true},
		{"server from root", listed{ImportPath: module, Imports: []string{module + "/server"}}, true},
		{"bbolt outside store/bolt", listed{ImportPath: module + "/admin", Imports: []string{"go.etcd.io/bbolt"}}, true},
		{"bbolt in store/bolt", listed{ImportPath: module + "/store/bolt", Imports: []string{"go.etcd.io/bbolt"}}, false},
		{"httprouter in a subsystem", listed{ImportPath: module + "/token", Imports: []string{"github.com/julienschmidt/httprouter"}}, true},
		{"unknown package", listed{ImportPath: module + "/misc"}, true},
		{"kit imports its parent's backend", listed{ImportPath: module + "/store/storetest", Imports: []string{module + "/store/bolt"}}, false},
		{"kit imports upward", listed{ImportPath: module + "/store/storetest", Imports: []string{module + "/admin"}}, true},
		{"resolver implementation", listed{ImportPath: module + "/resolver/ldap", Imports: []string{module + "/resolver", module + "/store"}}, false},
		{"implementation imports its interface", listed{ImportPath: module + "/store/bolt", Imports: []string{module + "/store"}}, false},
		{"interface imports its implementation", listed{ImportPath: module + "/store", Imports: []string{module + "/store/bolt"}}, true},
		{"kit imports the root", listed{ImportPath: module + "/store/storetest", Imports: []string{module}}, true},
		{"example imports server", listed{ImportPath: module + "/examples/gw", Imports: []string{module + "/server"}}, false},
		{"outside the module", listed{ImportPath: "example.com/x", Imports: []string{module}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := checkFloors([]listed{tc.pkg})
			if (len(got) > 0) != tc.bad {
				t.Errorf("violations = %v, want bad=%v", got, tc.bad)
			}
		})
	}
}

// FuzzCheckFloors: any package path and import list is judged without a
// panic, and a package never passes when it imports itself or the root.
func FuzzCheckFloors(f *testing.F) {
	f.Add("admin", "store")
	f.Add("store/storetest", "store/bolt")
	f.Add("resolver/ldap/ldaptest", "resolver/ldap")
	f.Add("", "server")
	f.Add("a/b/ctest", "")
	f.Fuzz(func(t *testing.T, from, to string) {
		pkg := listed{ImportPath: module + "/" + from, Imports: []string{module + "/" + to, module}}
		if from == "" {
			pkg.ImportPath = module
		}
		bad := checkFloors([]listed{pkg})
		if len(bad) == 0 {
			t.Fatalf("%q importing the root package passed the check", from)
		}
	})
}
