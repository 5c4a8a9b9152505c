package sql_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/netguard"
	"github.com/authsrv/authsrv/resolver"
	sqlres "github.com/authsrv/authsrv/resolver/sql"
)

// loopback is the dial policy of the tests that reach a database server
// on a loopback address (open uses it).
var loopback = netguard.MustParse("127.0.0.0/8", "::1/128")

// S8: under the default dial policy (Env.Dial nil) a PostgreSQL or MySQL
// server on a loopback address, or behind a Unix socket path, is refused
// before any connection; the resolver test names the address and the
// rule, and the listener sees no connection.
func TestDialPolicy(t *testing.T) {
	ln := testsvc.NewCountingListener(t)
	port := strconv.Itoa(ln.Port())
	cases := []struct {
		name, driver, server, want string
	}{
		{"postgres", "postgresql", "127.0.0.1", "(loopback); allow it with -allow-dial."},
		{"postgres localhost", "postgresql", "localhost", "(loopback); allow it with -allow-dial."},
		{"mysql", "mysql+pymysql", "127.0.0.1", "(loopback); allow it with -allow-dial."},
		{"postgres socket", "postgresql", t.TempDir(), "(unix socket); allow it with -allow-dial unix."},
		{"mysql socket", "mysql", t.TempDir() + "/mysql.sock", "(unix socket); allow it with -allow-dial unix."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqlres.New(t.Context(), resolver.Config{
				"Driver": tc.driver, "Server": tc.server, "Port": port, "Database": "users", "User": "u", "Password": "pw-7781",
				"Table": "users", "Map": `{"username": "name", "userid": "id"}`,
			}, resolver.Env{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			n, desc := s.Test(t.Context())
			if n != -1 || !strings.HasPrefix(desc, "Unable to connect to database: connection to ") || !strings.HasSuffix(desc, tc.want) {
				t.Errorf("Test = %v, %q", n, desc)
			}
			if err := s.Ping(t.Context()); !errors.Is(err, netguard.ErrRefused) {
				t.Errorf("Ping: %v", err)
			}
			if strings.Contains(desc, "pw-7781") {
				t.Error("the password is in the message")
			}
		})
	}
	if n := ln.Accepted(); n != 0 {
		t.Errorf("the listener saw %d connections", n)
	}
}
