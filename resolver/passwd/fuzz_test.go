package passwd_test

import (
	"strings"
	"testing"

	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/passwd"
)

// FuzzParseLine: no panic; a line that parses gives back its fields
// (joined with colons it is the line without a trailing CR), the info
// repeats them, and parsing is stable.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"alice:$6$salt$hash:1001:100:Alice Liddell,,+49170111,+4930111,alice@example.org:/home/alice:/bin/sh",
		"root:x:0:0:root:/root:/bin/bash",
		"crlf:x:1:1:a,b,c,d,e@f:/h:/s\r",
		"# comment",
		"",
		"a:b:c",
		"a::4294967295::::",
		"a::4294967296::::",
		"+::::::",
		"müller:x:7:7:Hans Müller,Raum 1,,,x@y,z@w:/h:/s",
		"a b:x:1:1::/h:/s",
		"a:x:01:1:,,,,,,,,@,a@:/h:/s",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fields, info, ok := passwd.ParseLine(line)
		if !ok {
			if info != nil {
				t.Fatal("info for a rejected line")
			}
			return
		}
		if got := strings.Join(fields[:], ":"); got != strings.TrimSuffix(line, "\r") {
			t.Fatalf("fields %q do not rebuild %q", fields, line)
		}
		if info.String(resolver.KeyUsername) != fields[0] || info.String(resolver.KeyUserID) != fields[2] || info.String(resolver.KeyDescription) != fields[4] {
			t.Fatalf("info %v does not match fields %q", info, fields)
		}
		if _, ok := info[resolver.KeyPassword]; ok {
			t.Fatal("info has a password")
		}
		for _, k := range []string{resolver.KeyGivenname, resolver.KeySurname, resolver.KeyMobile, resolver.KeyPhone, resolver.KeyEmail} {
			if v := info.String(k); !strings.Contains(fields[4], v) {
				t.Fatalf("%s %q is not from the gecos %q", k, v, fields[4])
			}
		}
		if e := info.String(resolver.KeyEmail); e != "" && strings.Count(e, "@") != 1 {
			t.Fatalf("email %q", e)
		}
		again, info2, ok := passwd.ParseLine(strings.Join(fields[:], ":"))
		if !ok || again != fields || len(info2) != len(info) {
			t.Fatalf("reparse of %q: %q %v", line, again, ok)
		}
		for k, v := range info {
			if info2[k] != v {
				t.Fatalf("reparse changed %s", k)
			}
		}
	})
}
