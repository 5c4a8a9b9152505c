package radius_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/radius"
)

func TestLoadClients(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("nas.secret", "from-a-file\n", 0o600)
	write("open.secret", "readable", 0o644)
	good := write("clients", "# NASes\n127.0.0.1 s3cret realm=corp\n\n10.1.0.0/16 secret_file=nas.secret legacy\n::ffff:192.0.2.7 x\n", 0o600)
	cs, err := radius.LoadClients(good)
	if err != nil {
		t.Fatal(err)
	}
	want := []radius.Client{
		{Network: netip.MustParsePrefix("127.0.0.1/32"), Secret: []byte("s3cret"), Realm: "corp"},
		{Network: netip.MustParsePrefix("10.1.0.0/16"), Secret: []byte("from-a-file"), Legacy: true},
		{Network: netip.MustParsePrefix("192.0.2.7/32"), Secret: []byte("x")},
	}
	if !slices.EqualFunc(cs, want, func(a, b radius.Client) bool {
		return a.Network == b.Network && string(a.Secret) == string(b.Secret) && a.Realm == b.Realm && a.Legacy == b.Legacy
	}) {
		t.Errorf("clients %v, want %v", cs, want)
	}
	// Only file references: the clients file may be world-readable.
	if _, err := radius.LoadClients(write("public", "10.0.0.0/8 secret_file="+filepath.Join(dir, "nas.secret")+"\n", 0o644)); err != nil {
		t.Errorf("a clients file without secrets: %v", err)
	}
	for _, tc := range []struct{ name, data string }{
		{"Readable", "127.0.0.1 s3cret\n"},
		{"ReadableSecretFile", "127.0.0.1 secret_file=open.secret\n"},
		{"MissingSecretFile", "127.0.0.1 secret_file=none\n"},
		{"NoSecret", "127.0.0.1\n"},
		{"BadAddress", "127.0.0.300 x\n"},
		{"Twice", "127.0.0.1 x\n127.0.0.1/32 y\n"},
		{"UnknownOption", "127.0.0.1 x realm=a fast\n"},
		{"EmptyRealm", "127.0.0.1 x realm=\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mode := os.FileMode(0o600)
			if tc.name == "Readable" {
				mode = 0o640
			}
			_, err := radius.LoadClients(write(tc.name, tc.data, mode))
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}

func TestParseMapping(t *testing.T) {
	ms, err := radius.ParseMapping([]byte("# plugin's [Mapping]\nserial = Class\nuser.groups = filter-id\n"))
	if err != nil || len(ms) != 2 || ms[0] != (radius.Mapping{Key: "serial", Attribute: "Class"}) || ms[1].Key != "user.groups" {
		t.Errorf("mapping %v %v", ms, err)
	}
	for _, bad := range []string{"serial Class", "serial = Nonsense", " = Class", "user. = Class"} {
		if _, err := radius.ParseMapping([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
