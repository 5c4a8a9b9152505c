package passwd

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/resolver"
)

// linear is the store's former semantics, kept as the reference: lines
// parsed in order into entries (the first line of a login or uid wins),
// lookups by exact login and uid, searches by testing every entry.
type linear struct {
	users  []entry
	logins map[string]int
	uids   map[string]int
}

func parseLinear(data string) *linear {
	l := &linear{logins: map[string]int{}, uids: map[string]int{}}
	for line := range strings.Lines(data) {
		e, ok := parseLine(strings.TrimSuffix(line, "\n"))
		if !ok {
			continue
		}
		if _, dup := l.logins[e.login]; dup {
			continue
		}
		if _, dup := l.uids[e.uid]; dup {
			continue
		}
		l.logins[e.login], l.uids[e.uid] = len(l.users), len(l.users)
		l.users = append(l.users, e)
	}
	return l
}

func (l *linear) search(filter map[string]string) ([]string, error) {
	m, err := compileFilter(filter)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := range l.users {
		if m.match(&l.users[i]) {
			out = append(out, l.users[i].login)
		}
	}
	return out, nil
}

// genFile makes a passwd file from a small alphabet so that logins share
// prefixes, differ only in case, repeat (duplicates), run past the 16
// bytes of the sort keys, and use letters whose lower case has another
// length in UTF-8 (İ, ẞ); with malformed lines, CRLF ends, duplicate
// uids and uids with leading zeros.
func genFile(rng *rand.Rand, n int) (string, []string) {
	alphabet := []string{"a", "A", "b", "B", "l", "L", "ü", "Ü", "İ", "ẞ", "ß", ".", "-", "1"}
	word := func(max int) string {
		var b strings.Builder
		for range 1 + rng.IntN(max) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	var b strings.Builder
	var logins []string
	for i := range n {
		login := word(4)
		if rng.IntN(5) == 0 {
			login = strings.Repeat("Long-Login-Prefix", 1+rng.IntN(2)) + word(3)
		}
		if len(logins) > 0 && rng.IntN(15) == 0 {
			login = logins[rng.IntN(len(logins))] // a duplicate login
		}
		logins = append(logins, login)
		uid := fmt.Sprint(rng.IntN(2*n + 10))
		if rng.IntN(20) == 0 {
			uid = "0" + uid
		}
		gecos := word(3) + " " + word(3) + ",room," + word(2) + ",+49" + fmt.Sprint(i)
		if rng.IntN(2) == 0 {
			gecos += "," + word(3) + "@" + word(2) + ".org"
		}
		end := "\n"
		if rng.IntN(10) == 0 {
			end = "\r\n"
		}
		switch rng.IntN(25) {
		case 0:
			b.WriteString("# comment\n")
		case 1:
			b.WriteString("broken:line\n")
		}
		fmt.Fprintf(&b, "%s:x:%s:100:%s:/home/x:/bin/sh%s", login, uid, gecos, end)
	}
	return b.String(), logins
}

func TestIndexEqualsLinear(t *testing.T) {
	t.Run("OneWorker", testIndexEqualsLinear)
	t.Run("ParallelBitmap", func(t *testing.T) {
		old, oldSort := parallelMin, sortMax
		parallelMin, sortMax = 0, 0
		defer func() { parallelMin, sortMax = old, oldSort }()
		testIndexEqualsLinear(t)
	})
}

func testIndexEqualsLinear(t *testing.T) {
	nonTrivial := 0
	defer func() {
		// The generated searches must mostly select some users but not
		// all, or the comparison proves little.
		if nonTrivial < 20*30 {
			t.Errorf("only %d searches selected some but not all users", nonTrivial)
		}
	}()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 17))
		data, logins := genFile(rng, 50+rng.IntN(400))
		snap, err := parse(context.Background(), data, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref := parseLinear(data)
		if snap.count() != len(ref.users) {
			t.Fatalf("seed %d: %d users, linear %d", seed, snap.count(), len(ref.users))
		}
		// Exact lookups: every login and uid, their case variants and
		// strangers.
		probes := slices.Clone(logins)
		for _, l := range logins[:min(len(logins), 40)] {
			probes = append(probes, strings.ToUpper(l), strings.ToLower(l), l+"x", l[:len(l)-1])
		}
		for _, login := range probes {
			id, ok := snap.byLoginExact(login)
			i, refOK := ref.logins[login]
			if ok != refOK || ok && snap.uid(id) != ref.users[i].uid {
				t.Fatalf("seed %d: login %q: %v, linear %v", seed, login, ok, refOK)
			}
		}
		for _, e := range ref.users {
			for _, uid := range []string{e.uid, "0" + e.uid, e.uid + "0"} {
				id, ok := snap.byUIDExact(uid)
				i, refOK := ref.uids[uid]
				if ok != refOK || ok && snap.login(id) != ref.users[i].login {
					t.Fatalf("seed %d: uid %q: %v, linear %v", seed, uid, ok, refOK)
				}
			}
		}
		// Searches: exact, prefix, suffix and infix values in any case,
		// uid ranges, and combinations.
		var filters []map[string]string
		for range 120 {
			e := ref.users[rng.IntN(len(ref.users))]
			src := []string{e.login, e.gecos, e.email, e.login}[rng.IntN(4)]
			key := []string{resolver.KeyUsername, resolver.KeyDescription, resolver.KeyEmail, resolver.KeyUsername}[rng.IntN(4)]
			v := src
			if r := []rune(v); len(r) > 1 {
				v = string(r[:1+rng.IntN(len(r)-1)])
			}
			switch rng.IntN(6) {
			case 0:
				v += "*"
			case 1:
				v = "*" + v
			case 2:
				v = "*" + v + "*"
			case 3:
				v = strings.ToUpper(v) + "*"
			case 4:
				v = strings.ToLower(v)
			}
			f := map[string]string{key: v}
			switch rng.IntN(4) {
			case 0:
				f[resolver.KeyUserID] = []string{">10", "<=50", "between 5,90", "=" + e.uid, "x"}[rng.IntN(5)]
			case 1:
				f[resolver.KeyEmail] = "*@*"
			}
			filters = append(filters, f)
		}
		filters = append(filters, map[string]string{}, map[string]string{resolver.KeyUsername: "*"},
			map[string]string{resolver.KeyUserID: ">=0"}, map[string]string{resolver.KeyUserID: "between 3,3"},
			map[string]string{resolver.KeyEmail: ""}, map[string]string{resolver.KeyUsername: "a*b"})
		for _, f := range filters {
			want, err := ref.search(f)
			if err != nil {
				t.Fatal(err)
			}
			m, _ := compileFilter(f)
			p, err := m.page(context.Background(), snap, 0, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, u := range p.Users {
				got = append(got, u.String(resolver.KeyUsername))
			}
			if len(want) > 0 && len(want) < len(ref.users) {
				nonTrivial++
			}
			if !slices.Equal(got, want) || p.Total != len(want) {
				t.Fatalf("seed %d: search %q: %q (total %d), linear %q", seed, f, got, p.Total, want)
			}
			// A middle page equals the slice of the whole result.
			if len(want) > 3 {
				off := rng.IntN(len(want) - 2)
				p, _ := m.page(context.Background(), snap, off, 2)
				if len(p.Users) != 2 || p.Users[0].String(resolver.KeyUsername) != want[off] || p.More != (off+2 < len(want)) {
					t.Fatalf("seed %d: search %q page at %d: %v more %v", seed, f, off, p.Users, p.More)
				}
			}
		}
	}
}
