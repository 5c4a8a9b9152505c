package authsrv_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
)

// TestSMSScriptDirChecked: the SMS script directory must exist, be a
// directory, and keep the data directory's files out of reach (the data
// directory itself, a directory holding it, one inside it, also through a
// symbolic link); a directory outside it or beneath its files subfolder
// is accepted. (Script names that leave the directory through .. or a
// symbolic link are refused by package notify: notify TestSMSScript.)
func TestSMSScriptDirChecked(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	scripts := filepath.Join(base, "scripts")
	for _, d := range []string{filepath.Join(data, "files", "sms"), filepath.Join(data, "sub"), scripts} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	plain := filepath.Join(base, "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "datalink")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	overlaps := "overlaps the data directory"
	cases := []struct{ name, dir, want string }{
		{"outside", scripts, ""},
		{"beneath files", filepath.Join(data, "files", "sms"), ""},
		{"missing", filepath.Join(base, "missing"), "the directory does not exist"},
		{"a file", plain, "not a directory"},
		{"the data directory", data, overlaps},
		{"the data directory through a symlink", link, overlaps},
		{"holds the data directory", base, overlaps},
		{"inside the data directory", filepath.Join(data, "sub"), overlaps},
		{"inside through ..", data + "/files/../sub", overlaps},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := authsrv.New(authsrv.WithDataDir(data), cheapKDF, authsrv.WithSMSScriptDir(tc.dir))
			if err == nil {
				_ = s.Close()
			}
			if tc.want == "" {
				if err != nil {
					t.Errorf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "sms script directory "+tc.dir+": "+tc.want) {
				t.Errorf("New = %v; want %q", err, tc.want)
			}
		})
	}
}
