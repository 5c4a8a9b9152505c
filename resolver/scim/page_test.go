package scim_test

import (
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/authsrv/authsrv/resolver"
)

// TestSearchPage pages 250 users with startIndex/count (the test server
// cuts pages at 100, so a page of 150 takes two requests): every user
// once, More until the last page, totalResults at the end, deep pages
// without the pages before them; a server that ignores the filter falls
// back to cutting Search's list, never widening the result.
func TestSearchPage(t *testing.T) {
	s := newServer(t)
	s.set(func(s *scimServer) {
		for i := range 250 {
			s.users = append(s.users, map[string]any{"id": fmt.Sprintf("p%03d", i), "userName": fmt.Sprintf("pg%03d", i)})
		}
	})
	r := open(t, config(s), resolver.Env{})
	defer r.Close()
	ctx := t.Context()
	filter := map[string]string{"username": "pg*"}
	for _, size := range []int{7, 150} {
		var got []string
		for offset := 0; ; offset += size {
			p, err := resolver.SearchPage(ctx, r, filter, offset, size)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range p.Users {
				got = append(got, u.String(resolver.KeyUsername))
			}
			if !p.More {
				if p.Total != 250 {
					t.Errorf("size %d: Total %d", size, p.Total)
				}
				break
			}
			if len(p.Users) != size {
				t.Fatalf("size %d offset %d: %d users with More", size, offset, len(p.Users))
			}
		}
		if len(got) != 250 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != 250 {
			t.Errorf("size %d: %d users listed", size, len(got))
		}
	}
	s.reset()
	p, err := resolver.SearchPage(ctx, r, filter, 240, 5)
	if err != nil || len(p.Users) != 5 || p.Users[0].String(resolver.KeyUsername) != "pg240" || !p.More {
		t.Errorf("a deep page: %v, More %v, %v", p.Users, p.More, err)
	}
	for _, q := range s.seen() {
		if v, _ := url.ParseQuery(q.query); v.Get("startIndex") == "1" {
			t.Error("a deep page read the pages before it")
		}
	}
	past, err := resolver.SearchPage(ctx, r, filter, 400, 5)
	if err != nil || len(past.Users) != 0 || past.More || past.Total != 250 {
		t.Errorf("past the end: %d users, More %v, Total %d, %v", len(past.Users), past.More, past.Total, err)
	}

	s.set(func(s *scimServer) { s.ignoreFilter = true })
	p, err = resolver.SearchPage(ctx, r, map[string]string{"username": "pg1*"}, 10, 5)
	if err != nil || len(p.Users) != 5 || p.Users[0].String(resolver.KeyUsername) != "pg110" || !p.More {
		t.Errorf("a server ignoring the filter: %v, More %v, %v", p.Users, p.More, err)
	}
}
