package scim_test

import (
	"encoding/json"
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/resolver/resolvertest"
	"github.com/authsrv/authsrv/resolver/scim"
)

// FuzzUserURL: any id gives either no URL or one whose path is the base
// path, /Users/ and exactly one segment that unescapes to the id, with no
// query or fragment, on the same host, and that stays there after dot
// segment removal. Filter quoting round-trips through a JSON decoder.
func FuzzUserURL(f *testing.F) {
	for _, s := range resolvertest.Injection {
		f.Add(s)
	}
	for _, s := range []string{"alice", "2819c223-7f76-453a-919d-413861904646", "..", ".", "a/b", "a%2Fb", "%2e%2e", "é", "a b", "a+b", "a;b=c", "a:b", "@", "~"} {
		f.Add(s)
	}
	bases := []string{"https://scim.example.org/scim/v2", "http://127.0.0.1:8080", "https://h/a%20b/c"}
	f.Fuzz(func(t *testing.T, id string) {
		for _, base := range bases {
			u, ok, err := scim.UserURL(base, id)
			if err != nil {
				t.Fatal(err)
			}
			if ok != scim.ValidID(id) {
				t.Fatalf("ok %v for id %q", ok, id)
			}
			if !ok {
				continue
			}
			b, _ := url.Parse(base)
			prefix := b.EscapedPath() + "/Users/"
			back, err := url.Parse(u.String())
			if err != nil {
				t.Fatalf("%q does not parse: %v", u.String(), err)
			}
			if back.Host != b.Host || back.Scheme != b.Scheme || back.RawQuery != "" || back.Fragment != "" || back.User != nil {
				t.Fatalf("id %q gives %q", id, u.String())
			}
			ep := back.EscapedPath()
			seg, found := strings.CutPrefix(ep, prefix)
			if !found || seg == "" || strings.Contains(seg, "/") || seg == "." || seg == ".." {
				t.Fatalf("id %q gives path %q", id, ep)
			}
			if got, err := url.PathUnescape(seg); err != nil || got != id {
				t.Fatalf("id %q gives segment %q (%q, %v)", id, seg, got, err)
			}
			if c := path.Clean(ep); !strings.HasPrefix(c, prefix) {
				t.Fatalf("id %q: %q cleans to %q", id, ep, c)
			}
		}
		var back string
		if err := json.Unmarshal([]byte(scim.Quote(id)), &back); err != nil || (back != id && strings.ToValidUTF8(id, "\uFFFD") == id) {
			t.Fatalf("quote(%q) = %s, back %q, %v", id, scim.Quote(id), back, err)
		}
	})
}
