package secret_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
)

// fixture is one hash made by another tool; see testdata/README.
type fixture struct {
	Name     string `json:"name"`
	Password string `json:"password"`
	Hash     string `json:"hash"`
	Tool     string `json:"tool"`
	How      string `json:"how"`
}

func loadFixtures(t testing.TB) map[string]fixture {
	t.Helper()
	b, err := os.ReadFile("testdata/argon2_fixtures.json")
	if err != nil {
		t.Fatal(err)
	}
	var list []fixture
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	m := make(map[string]fixture, len(list))
	for _, f := range list {
		m[f.Name] = f
	}
	return m
}

func samePHC(a, b secret.PHC) bool {
	return a.Variant == b.Variant && a.Version == b.Version && a.Params == b.Params &&
		bytes.Equal(a.Salt, b.Salt) && bytes.Equal(a.Hash, b.Hash)
}

func TestParsePHC(t *testing.T) {
	fx := loadFixtures(t)
	for _, tc := range []struct {
		name    string
		in      string
		variant string
		version int
		params  secret.Params
	}{
		{"privacyIDEA 64 MiB", fx["privacyidea-64MiB-t9-p4-tag32"].Hash, "argon2id", 19,
			secret.Params{Time: 9, Memory: 65536, Threads: 4, KeyLen: 32, SaltLen: 16}},
		{"privacyIDEA 100 MiB", fx["privacyidea-100MiB-t9-p8-tag16"].Hash, "argon2id", 19,
			secret.Params{Time: 9, Memory: 102400, Threads: 8, KeyLen: 16, SaltLen: 16}},
		{"argon2i", fx["cheap-argon2i"].Hash, "argon2i", 19,
			secret.Params{Time: 2, Memory: 19456, Threads: 1, KeyLen: 32, SaltLen: 16}},
		{"version 16", fx["cheap-argon2id-v16"].Hash, "argon2id", 16,
			secret.Params{Time: 1, Memory: 64, Threads: 1, KeyLen: 16, SaltLen: 16}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := secret.ParsePHC(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if p.Variant != tc.variant || p.Version != tc.version || p.Params != tc.params {
				t.Fatalf("got %s v=%d %+v", p.Variant, p.Version, p.Params)
			}
			if got := p.String(); got != tc.in {
				t.Fatalf("String() = %q, want the input back", got)
			}
		})
	}

	base := fx["cheap-argon2id-default-params"].Hash
	want, err := secret.ParsePHC(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("padded base64", func(t *testing.T) {
		f := strings.Split(base, "$")
		padded := strings.Join(append(f[:4:4], f[4]+"==", f[5]+"="), "$")
		p, err := secret.ParsePHC(padded)
		if err != nil {
			t.Fatal(err)
		}
		if !samePHC(p, want) || p.String() != base {
			t.Fatalf("padded form differs: %s", p)
		}
	})
	t.Run("missing version means 16", func(t *testing.T) {
		p, err := secret.ParsePHC(strings.Replace(base, "$v=19", "", 1))
		if err != nil {
			t.Fatal(err)
		}
		if p.Version != 0x10 {
			t.Fatalf("version %d, want 16", p.Version)
		}
		again, err := secret.ParsePHC(p.String())
		if err != nil || !samePHC(again, p) || !strings.Contains(p.String(), "$v=16$") {
			t.Fatalf("round trip: %v, %s", err, p)
		}
	})
}

func TestParsePHCMalformed(t *testing.T) {
	const salt, hash = "c2FsdHNhbHRzYWx0c2FsdA", "aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
	ok := "$argon2id$v=19$m=65536,t=3,p=4$" + salt + "$" + hash
	if _, err := secret.ParsePHC(ok); err != nil {
		t.Fatalf("base case: %v", err)
	}
	for _, tc := range []struct {
		name string
		in   string
		want string // substring of the error
	}{
		{"empty", "", "does not start"},
		{"no dollar", "argon2id$v=19$m=1,t=1,p=1$" + salt + "$" + hash, "does not start"},
		{"only dollar", "$", "not an argon2"},
		{"bcrypt", "$2b$10$abcdefghijklmnopqrstuv", "not an argon2"},
		{"upper case variant", "$ARGON2ID$v=19$m=65536,t=3,p=4$" + salt + "$" + hash, "not an argon2"},
		{"argon2d", "$argon2d$v=19$m=65536,t=3,p=4$" + salt + "$" + hash, "argon2d is not supported"},
		{"missing hash", "$argon2id$v=19$m=65536,t=3,p=4$" + salt, "want $argon2id"},
		{"missing salt and hash", "$argon2id$v=19$m=65536,t=3,p=4", "want $argon2id"},
		{"trailing dollar", ok + "$", "want $argon2id"},
		{"extra field", ok + "$extra", "want $argon2id"},
		{"empty salt", "$argon2id$v=19$m=65536,t=3,p=4$$" + hash, "salt"},
		{"empty hash", "$argon2id$v=19$m=65536,t=3,p=4$" + salt + "$", "hash"},
		{"bad version key", "$argon2id$x=19$m=65536,t=3,p=4$" + salt + "$" + hash, "v=<version>"},
		{"unknown version", "$argon2id$v=20$m=65536,t=3,p=4$" + salt + "$" + hash, "unknown argon2 version"},
		{"version leading zero", "$argon2id$v=019$m=65536,t=3,p=4$" + salt + "$" + hash, "leading zero"},
		{"params out of order", "$argon2id$v=19$t=3,m=65536,p=4$" + salt + "$" + hash, "m=<KiB>"},
		{"missing p", "$argon2id$v=19$m=65536,t=3$" + salt + "$" + hash, "m=<KiB>"},
		{"extra param", "$argon2id$v=19$m=65536,t=3,p=4,keyid=AA$" + salt + "$" + hash, "m=<KiB>"},
		{"data param", "$argon2id$v=19$m=65536,t=3,p=4,data=AA$" + salt + "$" + hash, "m=<KiB>"},
		{"empty params", "$argon2id$v=19$$" + salt + "$" + hash, "m=<KiB>"},
		{"space", "$argon2id$v=19$m=65536, t=3,p=4$" + salt + "$" + hash, "m=<KiB>"},
		{"m zero", "$argon2id$v=19$m=0,t=3,p=4$" + salt + "$" + hash, "m is zero"},
		{"t zero", "$argon2id$v=19$m=65536,t=0,p=4$" + salt + "$" + hash, "t is zero"},
		{"p zero", "$argon2id$v=19$m=65536,t=3,p=0$" + salt + "$" + hash, "p is zero"},
		{"negative", "$argon2id$v=19$m=65536,t=-3,p=4$" + salt + "$" + hash, "not a decimal"},
		{"plus sign", "$argon2id$v=19$m=+65536,t=3,p=4$" + salt + "$" + hash, "not a decimal"},
		{"hex number", "$argon2id$v=19$m=0x10000,t=3,p=4$" + salt + "$" + hash, "not a decimal"},
		{"leading zero", "$argon2id$v=19$m=065536,t=3,p=4$" + salt + "$" + hash, "leading zero"},
		{"empty number", "$argon2id$v=19$m=,t=3,p=4$" + salt + "$" + hash, "empty number"},
		{"m overflow", "$argon2id$v=19$m=4294967296,t=3,p=4$" + salt + "$" + hash, "out of range"},
		{"t overflow", "$argon2id$v=19$m=65536,t=4294967296,p=4$" + salt + "$" + hash, "out of range"},
		{"p over 255", "$argon2id$v=19$m=65536,t=3,p=256$" + salt + "$" + hash, "out of range"},
		{"huge number", "$argon2id$v=19$m=99999999999999999999999,t=3,p=4$" + salt + "$" + hash, "too long"},
		{"m below 8p", "$argon2id$v=19$m=31,t=3,p=4$" + salt + "$" + hash, "below 8*p"},
		{"bad base64 salt", "$argon2id$v=19$m=65536,t=3,p=4$c2Fsd*Fs$" + hash, "salt: not standard base64"},
		{"urlsafe base64", "$argon2id$v=19$m=65536,t=3,p=4$" + salt + "$aGFza_hh-2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g", "hash: not standard base64"},
		{"newline in base64", "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNh\nbHRzYWx0c2FsdA$" + hash, "salt: not standard base64"},
		{"impossible length", "$argon2id$v=19$m=65536,t=3,p=4$" + salt + "ABC$" + hash, "salt: not standard base64"},
		{"non-zero trailing bits", "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHRzYWx0c2FsdB$" + hash, "salt: not standard base64"},
		{"bad padding", "$argon2id$v=19$m=65536,t=3,p=4$" + salt + "=$" + hash, "salt: not standard base64"},
		{"padding inside", "$argon2id$v=19$m=65536,t=3,p=4$c2Fsd=HNhbHRzYWx0c2FsdA$" + hash, "salt: not standard base64"},
		{"salt too short", "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$" + hash, "salt: 4 bytes"},
		{"hash too short", "$argon2id$v=19$m=65536,t=3,p=4$" + salt + "$aGE", "hash: 2 bytes"},
		{"salt too long", "$argon2id$v=19$m=65536,t=3,p=4$" + strings.Repeat("A", 400) + "$" + hash, "salt: longer"},
		{"string too long", ok + strings.Repeat("A", 2048), "longer than 2048"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := secret.ParsePHC(tc.in)
			if err == nil {
				t.Fatalf("parsed: %s", p)
			}
			if !errors.Is(err, secret.ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if len(tc.in) > 20 && strings.Contains(err.Error(), tc.in) {
				t.Errorf("error repeats the input")
			}
		})
	}
}
