package sql_test

import (
	"testing"

	sqlres "github.com/authsrv/authsrv/resolver/sql"
)

// FuzzWhere: the Where parser never panics, and whatever it accepts has
// only valid identifiers and known operators.
func FuzzWhere(f *testing.F) {
	for _, s := range []string{
		"active == 1", "mail like %@example.org and uid > 1000", "1=1 OR x=y", "a == 1 AND b < 2 and c > 3",
		"x == ' OR '1'='1", "likes like like", "a >= 1", "and", " and a == 1", "a\x00 == 1", "é == 1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		conds, err := sqlres.ParseWhere(s)
		if err != nil {
			return
		}
		for _, c := range conds {
			if !sqlres.ValidIdent(c.Column) {
				t.Errorf("ParseWhere(%q) yielded column %q", s, c.Column)
			}
			switch c.Op {
			case "=", "LIKE", ">", "<":
			default:
				t.Errorf("ParseWhere(%q) yielded operator %q", s, c.Op)
			}
		}
	})
}

// FuzzVerifyPassword: no stored hash or password makes the check panic
// or succeed with an empty password. The cost caps are lowered so that
// no input takes long.
func FuzzVerifyPassword(f *testing.F) {
	sqlres.SetCostCaps(f, 10, 5000, 6)
	for _, fx := range fixtures(f) {
		f.Add(fx.Hash, fx.Password)
	}
	for _, s := range []string{
		"", "{SSHA}", "{ssha256}QUJD", "{SHA}====", "$P$", "$S$CCCCCCCC", "$1$$", "$2y$04$", "$5$rounds=$x$y",
		"$6$rounds=1$$", "1|", "1|1|abc", "{", "}", "{}", "$", "$$$$", "$2b$99$" + "................................................................",
	} {
		f.Add(s, "x")
	}
	f.Fuzz(func(t *testing.T, stored, password string) {
		ok, _ := sqlres.VerifyPassword(stored, password)
		if ok && password == "" {
			t.Errorf("VerifyPassword(%q, \"\") = true", stored)
		}
	})
}
