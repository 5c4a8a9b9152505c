package sql_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
	sqlres "github.com/authsrv/authsrv/resolver/sql"
)

func TestType(t *testing.T) {
	typ := sqlres.Type()
	if typ.Name != "sqlresolver" {
		t.Errorf("Name = %q", typ.Name)
	}
	types := map[string]resolver.ParamType{}
	for _, p := range typ.Params {
		types[p.Name] = p.Type
	}
	for name, want := range map[string]resolver.ParamType{
		"Driver": resolver.String, "Server": resolver.String, "Port": resolver.Int, "Database": resolver.String,
		"User": resolver.String, "Password": resolver.Password, "conParams": resolver.String, "Table": resolver.String,
		"Map": resolver.String, "Where": resolver.String, "Encoding": resolver.String, "Limit": resolver.Int,
		"Editable": resolver.Bool, "Password_Hash_Type": resolver.String, "poolSize": resolver.Int,
		"poolTimeout": resolver.Int, "poolRecycle": resolver.Int, "CACHE_TIMEOUT": resolver.Int,
	} {
		if types[name] != want {
			t.Errorf("param %s has type %q, want %q", name, types[name], want)
		}
	}
	if typ.Editable(resolver.Config{}) || !typ.Editable(resolver.Config{"Editable": "True"}) || !typ.Editable(resolver.Config{"EDITABLE": "1"}) {
		t.Error("Editable does not read Editable/EDITABLE")
	}
	for v, want := range map[string]time.Duration{"": 0, "0": 0, "300": 300 * time.Second, "x": 0, "-1": 0} {
		if got := typ.CacheTimeout(resolver.Config{"CACHE_TIMEOUT": v}); got != want {
			t.Errorf("CacheTimeout(%q) = %s, want %s", v, got, want)
		}
	}
	r, err := typ.New(t.Context(), sqliteConfig(seedSQLite(t), false), resolver.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	for _, ok := range []bool{
		is[resolver.Editor](r), is[resolver.Tester](r), is[resolver.Pinger](r), is[resolver.Fielder](r),
	} {
		if !ok {
			t.Error("the store misses one of Editor, Tester, Pinger, Fielder")
		}
	}
}

func is[T any](v any) bool { _, ok := v.(T); return ok }

func base() resolver.Config {
	return resolver.Config{
		"Driver": "postgresql", "Server": "db.example.org", "Port": "5432", "Database": "users",
		"User": "pi", "Password": "s3cret-pw", "Table": "users", "Map": userMap,
	}
}

func TestValidate(t *testing.T) {
	good := []struct {
		name string
		set  map[string]string
	}{
		{"base", nil},
		{"schema.table", map[string]string{"Table": "auth.users"}},
		{"sqlite", map[string]string{"Driver": "sqlite", "Database": "/var/lib/users.db", "Server": ""}},
		{"sqlite+pysqlite", map[string]string{"Driver": "sqlite+pysqlite", "Database": "users.db"}},
		{"postgres", map[string]string{"Driver": "postgres"}},
		{"postgresql+psycopg2", map[string]string{"Driver": "postgresql+psycopg2"}},
		{"mysql", map[string]string{"Driver": "mysql"}},
		{"mysql+pymysql", map[string]string{"Driver": "mysql+pymysql", "conParams": "charset=utf8mb4"}},
		{"mysql+mysqldb", map[string]string{"Driver": "mysql+mysqldb"}},
		{"mariadb", map[string]string{"Driver": "mariadb"}},
		{"where", map[string]string{"Where": "active == 1 and mail like %@example.org AND uid > 1000 and uid < 5000"}},
		{"single-quoted map", map[string]string{"Map": `{'userid': 'id', 'username': 'login'}`}},
		{"numbers", map[string]string{"Limit": "5", "poolSize": "2", "poolTimeout": "3", "poolRecycle": "60", "CACHE_TIMEOUT": "0"}},
		{"hash type lower case", map[string]string{"Password_Hash_Type": "sha512crypt"}},
		{"encoding", map[string]string{"Encoding": "utf-8"}},
	}
	for _, tc := range good {
		t.Run("good/"+tc.name, func(t *testing.T) {
			cfg := base()
			for k, v := range tc.set {
				cfg[k] = v
			}
			if err := sqlres.Validate(cfg); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}

	bad := []struct {
		name, key, value, want string
	}{
		// B4.
		{"table injection", "Table", "users; DROP TABLE x", "Table"},
		{"map column injection", "Map", `{"userid":"id","username":"login","password":"password FROM users--"}`, "password FROM users--"},
		{"where injection", "Where", "1=1 OR x=y", "operator"},
		{"unknown driver", "Driver", "oracle", "sqlite, postgresql"},
		{"map without userid", "Map", `{"username":"login"}`, "userid"},
		{"map without username", "Map", `{"userid":"id"}`, "username"},
		// More.
		{"table quote", "Table", `users"`, "Table"},
		{"schema injection", "Table", "a;b.users", "Table"},
		{"empty table", "Table", "", "Table"},
		{"three-part table", "Table", "a.b.c", "Table"},
		{"map not json", "Map", "userid=id", "JSON"},
		{"map value not string", "Map", `{"userid":1,"username":"login"}`, "userid"},
		{"map column with space", "Map", `{"userid":"id","username":"lo gin"}`, "lo gin"},
		{"map column backtick", "Map", "{\"userid\":\"id\",\"username\":\"x`\"}", "username"},
		{"where bad column", "Where", "a-b == 1", "a-b"},
		{"where subquery column", "Where", "(select 1) == 1", "select"},
		{"where >=", "Where", "uid >= 1", "operator"},
		{"where <>", "Where", "uid <> 1", "operator"},
		{"where !=", "Where", "uid != 1", "operator"},
		{"where single =", "Where", "uid = 1", "operator"},
		{"where empty term", "Where", "a == 1 and  and b == 2", ""},
		{"port", "Port", "http", "Port"},
		{"limit", "Limit", "0", "Limit"},
		{"pool size", "poolSize", "-1", "poolSize"},
		{"cache timeout", "CACHE_TIMEOUT", "soon", "CACHE_TIMEOUT"},
		{"hash type", "Password_Hash_Type", "ARGON2", "Password_Hash_Type"},
		{"encoding", "Encoding", "ebcdic", "Encoding"},
		{"no database", "Database", "", "Database"},
	}
	for _, tc := range bad {
		t.Run("bad/"+tc.name, func(t *testing.T) {
			cfg := base()
			cfg[tc.key] = tc.value
			err := sqlres.Validate(cfg)
			if err == nil {
				t.Fatalf("Validate accepted %s = %q", tc.key, tc.value)
			}
			t.Log(err)
			if !errors.Is(err, resolver.ErrConfig) || !apierr.Is(err, apierr.Resolver) {
				t.Errorf("error %v is not an ErrConfig-kind resolver error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret-pw") {
				t.Errorf("error %q shows the password", err)
			}
			if _, err := sqlres.New(t.Context(), cfg, resolver.Env{}); err == nil {
				t.Error("New accepted the configuration")
			}
		})
	}
}

func TestParseWhere(t *testing.T) {
	cases := []struct {
		in   string
		want []sqlres.Cond
	}{
		{"", nil},
		{"active == 1", []sqlres.Cond{{"active", "=", "1"}}},
		{"  active==1  ", []sqlres.Cond{{"active", "=", "1"}}},
		{"mail like %@example.org", []sqlres.Cond{{"mail", "LIKE", "%@example.org"}}},
		{"mail LIKE a==b", []sqlres.Cond{{"mail", "LIKE", "a==b"}}},
		{"likes == 2", []sqlres.Cond{{"likes", "=", "2"}}},
		{"uid > 1000 AND uid < 2000", []sqlres.Cond{{"uid", ">", "1000"}, {"uid", "<", "2000"}}},
		{"name == O'Brien and x == 1 OR 1==1", []sqlres.Cond{{"name", "=", "O'Brien"}, {"x", "=", "1 OR 1==1"}}},
		{"status == 'active'", []sqlres.Cond{{"status", "=", "'active'"}}},
		{"a ==", []sqlres.Cond{{"a", "=", ""}}},
	}
	for _, tc := range cases {
		got, err := sqlres.ParseWhere(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseWhere(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestLikePattern(t *testing.T) {
	for in, want := range map[string]string{
		"alice": "alice", "al*": "al%", "**a***": "%a%", "%": "!%", "_lice": "!_lice", "%_%": "!%!_!%",
		`\`: `\`, "a!b": "a!!b", "": "",
	} {
		if got := sqlres.LikePattern(in); got != want {
			t.Errorf("LikePattern(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestInjectionValues runs the B4 values (and the kit's) through every
// lookup and search key on SQLite: none finds a user, none changes the
// table.
func TestInjectionValues(t *testing.T) {
	path := seedSQLite(t)
	s := open(t, sqliteConfig(path, true))
	checkInjection(t, s, func() string { return sqliteSnapshot(t, path) })
}

var b4Values = []string{`' OR '1'='1`, `admin'--`, `"; DROP TABLE users;--`, `%`, `_`, `\`, `%_%`, `alice' OR 'a'='a`, `1 OR 1=1`, `1; DELETE FROM users`, `!`, `!%`}

func checkInjection(t *testing.T, s *sqlres.Store, snapshot func() string) {
	t.Helper()
	ctx := t.Context()
	before := snapshot()
	values := append(slices.Clone(b4Values), resolvertest.Injection...)
	for _, v := range values {
		if uid, err := s.UserID(ctx, v); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("UserID(%q) = %q, %v; want ErrNoUser", v, uid, err)
		}
		if info, err := s.User(ctx, v); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("User(%q) = %v, %v; want ErrNoUser", v, info, err)
		}
		if ok, err := s.CheckPassword(ctx, v, v); ok || err != nil {
			t.Errorf("CheckPassword(%q) = %v, %v", v, ok, err)
		}
		for _, k := range s.Fields() {
			list, err := s.Search(ctx, map[string]string{k: v})
			if err != nil {
				t.Errorf("Search(%s=%q): %v", k, v, err)
			}
			if len(list) > 0 && !strings.Contains(v, "*") {
				t.Errorf("Search(%s=%q) found %d users", k, v, len(list))
			}
		}
		if err := s.Update(ctx, v, map[string]string{resolver.KeySurname: "pwned"}); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("Update(%q) = %v", v, err)
		}
		if err := s.Delete(ctx, v); !errors.Is(err, resolver.ErrNoUser) {
			t.Errorf("Delete(%q) = %v", v, err)
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("the table changed:\nbefore %s\nafter  %s", before, after)
	}
}

// dump renders every row of table in id order.
func dump(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT id, login, pw, sn FROM `+table+` ORDER BY id`)
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	defer func() { _ = rows.Close() }()
	var b strings.Builder
	for rows.Next() {
		var id, login, pw, sn any
		if err := rows.Scan(&id, &login, &pw, &sn); err != nil {
			t.Fatal(err)
		}
		b.WriteString(strings.Join([]string{str(id), str(login), str(pw), str(sn)}, "|") + ";")
	}
	return b.String()
}

func str(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return strings.TrimSpace(strings.ReplaceAll(fmtAny(v), "\n", " "))
}

func sqliteSnapshot(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	return dump(t, db, "users")
}
