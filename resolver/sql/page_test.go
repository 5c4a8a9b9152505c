package sql_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/resolver"
	sqlres "github.com/authsrv/authsrv/resolver/sql"
)

// manyRows is the number of users the paging tests seed: more than the
// Limit (10) an unpaged search stops at.
const manyRows = 250

// checkManyPages walks a store holding manyRows users pg000.. (and
// nothing else matching pg*) in pages of 7 and of 120: each user once, in
// userid order, More until the last page, the total at the end; an empty
// page past the end counts the rows.
func checkManyPages(t *testing.T, r resolver.Resolver) {
	t.Helper()
	ctx := t.Context()
	filter := map[string]string{"username": "pg*"}
	if list, err := r.Search(ctx, filter); err != nil || len(list) != 10 {
		t.Fatalf("unpaged Search: %d users, %v; want the Limit of 10", len(list), err)
	}
	for _, size := range []int{7, 120} {
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
				if p.Total != manyRows {
					t.Errorf("size %d: Total %d", size, p.Total)
				}
				break
			}
			if len(p.Users) != size {
				t.Fatalf("size %d offset %d: %d users with More", size, offset, len(p.Users))
			}
		}
		if len(got) != manyRows || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != manyRows {
			t.Errorf("size %d: %d users, sorted %v", size, len(got), slices.IsSorted(got))
		}
	}
	past, err := resolver.SearchPage(ctx, r, filter, manyRows+50, 5)
	if err != nil || len(past.Users) != 0 || past.More || past.Total != manyRows {
		t.Errorf("past the end: %d users, More %v, Total %d, %v", len(past.Users), past.More, past.Total, err)
	}
	none, err := resolver.SearchPage(ctx, r, map[string]string{"username": "pg%"}, 0, 5)
	if err != nil || len(none.Users) != 0 || none.Total != 0 {
		t.Errorf("a literal %%: %v, %v", none, err)
	}
}

func TestSQLitePages(t *testing.T) {
	path := seedSQLite(t)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	for i := range manyRows {
		if _, err := db.Exec(`INSERT INTO users (login, givenName, active) VALUES (?, 'P', 1)`, fmt.Sprintf("pg%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	cfg := sqliteConfig(path, false)
	cfg["Limit"] = "10"
	checkManyPages(t, open(t, cfg))
}

func TestPostgresPages(t *testing.T) {
	t.Parallel()
	pg, db := seedPostgres(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for i := range manyRows {
		if _, err := db.ExecContext(ctx, `INSERT INTO authsrv.users (login, "givenName", active) VALUES ($1, 'P', 1)`, "pg"+strconv.Itoa(1000 + i)[1:]); err != nil {
			t.Fatal(err)
		}
	}
	cfg := pgConfig(pg)
	cfg["Limit"] = "10"
	s, err := sqlres.New(t.Context(), cfg, resolver.Env{Log: zerolog.Nop(), Now: time.Now, Dial: loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	checkManyPages(t, s)
}
