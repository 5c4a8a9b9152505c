package ldap_test

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	goldap "github.com/go-ldap/ldap/v3"

	ldapresolver "github.com/authsrv/authsrv/resolver/ldap"
	"github.com/authsrv/authsrv/resolver/resolvertest"
)

func TestSearchFilter(t *testing.T) {
	uid := []string{"uid"}
	cases := []struct {
		attrs []string
		in    string
		want  string // "" when the value puts no condition
	}{
		{uid, "alice", `(uid=alice)`},
		{uid, "", ""},
		{uid, "*", ""},
		{uid, "***", ""},
		{uid, "al*", `(uid=al*)`},
		{uid, "*.smith", `(uid=*.smith)`},
		{uid, "a**b***", `(uid=a*b*)`},
		{uid, ")(uid=*", `(uid=\29\28uid=*)`},
		{uid, "*)(|(objectClass=*", `(uid=*\29\28|\28objectClass=*)`},
		{uid, `\2a`, `(uid=\5c2a)`},
		{uid, "a\x00b", `(uid=a\00b)`},
		{uid, "müller", `(uid=m\c3\bcller)`},
		{[]string{"uid", "mail"}, "a*", `(|(uid=a*)(mail=a*))`},
		{[]string{"uid", "mail"}, "(x)", `(|(uid=\28x\29)(mail=\28x\29))`},
	}
	for _, tc := range cases {
		got, ok := ldapresolver.SearchFilter(tc.attrs, tc.in)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("SearchFilter(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
	if got := ldapresolver.EqualityFilter([]string{"uid"}, "a*)"); got != `(uid=a\2a\29)` {
		t.Errorf("EqualityFilter = %q", got)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, value string
		want           bool
	}{
		{"alice", "alice", true},
		{"ALICE", "alice", true},
		{"alice ", "alice", false},
		{" alice", "alice", false},
		{"al*", "alice", true},
		{"*ice", "alice", true},
		{"*li*", "alice", true},
		{"a*c*e", "alice", true},
		{"a*x*e", "alice", false},
		{"a*e*e", "alice", false},
		{"*", "", true},
		{"al*ce*", "alce", true},
		{"al*lice", "alice", false},
		{"a*a", "a", false},
		{"MÜ*", "müller", true},
	} {
		if got := ldapresolver.GlobMatch(tc.pattern, tc.value); got != tc.want {
			t.Errorf("GlobMatch(%q, %q) = %v", tc.pattern, tc.value, got)
		}
	}
}

func TestGUID(t *testing.T) {
	// The bytes of an objectGUID as Active Directory stores it and the
	// text AD tools show.
	raw := []byte{0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	const text = "00112233-4455-6677-8899-aabbccddeeff"
	if got := ldapresolver.GUIDString(raw); got != text {
		t.Errorf("GUIDString = %q", got)
	}
	for _, s := range []string{text, "{" + text + "}", strings.ToUpper(text)} {
		if b, ok := ldapresolver.GUIDBytes(s); !ok || !bytes.Equal(b, raw) {
			t.Errorf("GUIDBytes(%q) = %x, %v", s, b, ok)
		}
	}
	if got := ldapresolver.GUIDString([]byte("{" + text + "}")); got != text {
		t.Errorf("text GUID = %q", got)
	}
	for _, bad := range []string{"", "x", "00112233-4455-6677-8899-aabbccddeefg", "001122334455667788990aabbccddeeff"} {
		if _, ok := ldapresolver.GUIDBytes(bad); ok {
			t.Errorf("GUIDBytes(%q) accepted", bad)
		}
	}
}

func TestSSHA(t *testing.T) {
	h, err := ldapresolver.SSHAHash("Müller-Pässwort")
	if err != nil || !strings.HasPrefix(h, "{SSHA}") {
		t.Fatalf("%q, %v", h, err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h, "{SSHA}"))
	if err != nil || len(raw) != 28 {
		t.Fatalf("decoded %d bytes, %v", len(raw), err)
	}
	sum := sha1.Sum(append([]byte("Müller-Pässwort"), raw[20:]...))
	if !bytes.Equal(sum[:], raw[:20]) {
		t.Error("hash does not verify")
	}
	if h2, _ := ldapresolver.SSHAHash("Müller-Pässwort"); h2 == h {
		t.Error("same salt twice")
	}
}

func TestADFiletime(t *testing.T) {
	// 2020-01-01T00:00:00Z in Active Directory's 100 ns ticks since 1601.
	if got := ldapresolver.ADFiletime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)); got != 132223104000000000 {
		t.Errorf("ADFiletime = %d", got)
	}
}

// FuzzSearchFilter: any search value gives a filter that compiles, whose
// only parentheses are the builder's own, and whose assertion values are
// exactly the value's pieces.
func FuzzSearchFilter(f *testing.F) {
	for _, s := range resolvertest.Injection {
		f.Add(s)
	}
	f.Add("a*b**c")
	f.Add("*x*")
	f.Fuzz(func(t *testing.T, v string) {
		for _, attrs := range [][]string{{"uid"}, {"uid", "mail"}} {
			flt, ok := ldapresolver.SearchFilter(attrs, v)
			if !ok {
				if strings.Trim(v, "*") != "" {
					t.Fatalf("SearchFilter(%q) put no condition", v)
				}
				continue
			}
			checkFilter(t, flt, attrs, v, true)
			checkFilter(t, ldapresolver.EqualityFilter(attrs, v), attrs, v, false)
		}
	})
}

func checkFilter(t *testing.T, flt string, attrs []string, v string, wild bool) {
	t.Helper()
	parens := len(attrs)
	if len(attrs) > 1 {
		parens++
	}
	if strings.Count(flt, "(") != parens || strings.Count(flt, ")") != parens {
		t.Fatalf("filter %q for %q has parentheses of the value", flt, v)
	}
	if _, err := goldap.CompileFilter("(&(objectClass=*)" + flt + ")"); err != nil {
		t.Fatalf("filter %q for %q: %v", flt, v, err)
	}
	p, err := goldap.CompileFilter(flt)
	if err != nil {
		t.Fatal(err)
	}
	if len(attrs) > 1 {
		p = p.Children[0]
	}
	if !wild || !strings.Contains(v, "*") {
		if p.Tag != goldap.FilterEqualityMatch || p.Children[1].Data.String() != v {
			t.Fatalf("filter %q: assertion %q, want %q", flt, p.Children[1].Data.String(), v)
		}
		return
	}
	if p.Tag != goldap.FilterSubstrings {
		t.Fatalf("filter %q for %q is not a substring filter", flt, v)
	}
	var got []string
	for _, c := range p.Children[1].Children {
		got = append(got, c.Data.String())
	}
	var want []string
	for piece := range strings.SplitSeq(v, "*") {
		if piece != "" {
			want = append(want, piece)
		}
	}
	if strings.Join(got, "\x01") != strings.Join(want, "\x01") {
		t.Fatalf("filter %q: pieces %q, want %q", flt, got, want)
	}
}
