package server_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/api")

// normalize replaces the volatile parts of an answer.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			switch k {
			case "time":
				x[k] = "<time>"
			case "token":
				x[k] = "<jwt>"
			case "threadid":
				x[k] = "<threadid>"
			default:
				x[k] = normalize(c)
			}
		}
	case []any:
		for i := range x {
			x[i] = normalize(x[i])
		}
	}
	return v
}

// TestGolden pins the exact wire shape of answers privacyIDEA clients read.
func TestGolden(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, method, path, ctype, body string
		hdr                             map[string]string
	}{
		{"auth_success", "POST", "/auth", formType, form("username", "admin", "password", adminPass), nil},
		{"auth_wrong_password", "POST", "/auth", formType, form("username", "admin", "password", "x"), nil},
		{"auth_missing_username", "POST", "/auth", formType, form("password", "x"), nil},
		{"auth_unknown_realm", "POST", "/auth", formType, form("username", "admin", "password", "x", "realm", "r9"), nil},
		{"healthz_readyz", "GET", "/healthz/readyz", "", "", nil},
		{"healthz_livez", "GET", "/healthz/livez", "", "", nil},
		{"healthz_startupz", "GET", "/healthz/startupz", "", "", nil},
		{"not_found", "GET", "/nothing/here", "", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, tc.method, tc.path, tc.ctype, tc.body, tc.hdr)
			var v any
			if err := json.Unmarshal(r.body, &v); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(map[string]any{"status": r.status, "body": normalize(v)}); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			path := filepath.Join("testdata", "api", tc.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the golden file:\n%s\nwant:\n%s", tc.name, got, want)
			}
		})
	}
}
