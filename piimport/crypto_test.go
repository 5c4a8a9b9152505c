package piimport_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/piimport"
)

func TestParseEncKey(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(fixtureDir, "enckey"))
	if err != nil {
		t.Skipf("fixture missing: %v", err)
	}
	k, err := piimport.ParseEncKey(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%s", "%+v", "%#v", "%x", "%d", "%q"} {
		s := fmt.Sprintf(verb, k)
		if strings.Contains(s, hex.EncodeToString(good[:8])) || bytes.Contains([]byte(s), good[:8]) || !strings.Contains(s, "redacted") {
			t.Errorf("%s prints %q", verb, s)
		}
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"95 bytes", good[:95], "exactly 96"},
		{"97 bytes", append(append([]byte(nil), good...), 0), "exactly 96"},
		{"empty", nil, "exactly 96"},
		{"hex dump", []byte(hex.EncodeToString(good) + "\n"), "xxd -r -p"},
		{"encrypted", []byte(strings.Repeat("ab", 16) + ":" + strings.Repeat("cd", 208)), "encrypt_enckey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := piimport.ParseEncKey(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func FuzzParseEncKey(f *testing.F) {
	f.Add(make([]byte, 96))
	f.Add([]byte(strings.Repeat("ab", 96)))
	f.Add([]byte(strings.Repeat("ab", 16) + ":" + strings.Repeat("cd", 48)))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := piimport.ParseEncKey(b)
		if (err == nil) != (len(b) == piimport.EncKeySize) {
			t.Fatalf("%d bytes: %v", len(b), err)
		}
		if k != nil && strings.Contains(fmt.Sprintf("%v%+v%#v", k, k, k), fmt.Sprint(b)) {
			t.Fatal("key printed")
		}
	})
}
