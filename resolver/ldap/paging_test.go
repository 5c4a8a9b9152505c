package ldap_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/resolver"
)

// TestPagedSearch pages 250 users (more than one page of the directory's
// paged results, at a SIZELIMIT of 50 that an unpaged search stops at):
// every user comes once, in one order whatever the page size, More until
// the last page, the total at the end; a prefix search pages too.
func TestPagedSearch(t *testing.T) {
	t.Parallel()
	s := directory(t)
	var b strings.Builder
	for i := range 250 {
		fmt.Fprintf(&b, "dn: uid=pg%03d,%s\nobjectClass: inetOrgPerson\nuid: pg%03d\ncn: P %d\nsn: Paged\n\n", i, peopleDN, i, i)
	}
	s.AddLDIF(t, b.String())
	r := open(t, config(s, "SIZELIMIT", "50"))
	ctx := t.Context()
	if list, err := r.Search(ctx, map[string]string{"username": "pg*"}); err != nil || len(list) != 50 {
		t.Fatalf("unpaged Search: %d users, %v; want the SIZELIMIT of 50", len(list), err)
	}
	walk := func(filter map[string]string, size int) []string {
		var got []string
		for offset := 0; ; offset += size {
			p, err := resolver.SearchPage(ctx, r, filter, offset, size)
			if err != nil {
				t.Fatalf("SearchPage(%d, %d): %v", offset, size, err)
			}
			for _, u := range p.Users {
				got = append(got, u.String(resolver.KeyUsername))
			}
			if !p.More {
				if p.Total != len(got) {
					t.Errorf("Total %d at the end, listed %d", p.Total, len(got))
				}
				return got
			}
			if len(p.Users) != size {
				t.Fatalf("SearchPage(%d, %d): %d users with More", offset, size, len(p.Users))
			}
		}
	}
	filter := map[string]string{"username": "pg*"}
	first := walk(filter, 7)
	if len(first) != 250 {
		t.Fatalf("pages of 7 list %d users, want 250", len(first))
	}
	sorted := slices.Clone(first)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != 250 {
		t.Error("a user is listed twice")
	}
	if got := walk(filter, 120); !slices.Equal(got, first) {
		t.Error("pages of 120 list another order than pages of 7")
	}
	all := walk(map[string]string{}, 100)
	if len(all) != 250+4 {
		t.Errorf("all users: %d, want 254", len(all))
	}
	deep, err := resolver.SearchPage(ctx, r, filter, 245, 10)
	if err != nil || len(deep.Users) != 5 || deep.More || deep.Total != 250 {
		t.Errorf("the last page: %d users, More %v, Total %d, %v", len(deep.Users), deep.More, deep.Total, err)
	}
}
