package sql_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/resolver"
	sqlres "github.com/authsrv/authsrv/resolver/sql"
)

func TestPGConfig(t *testing.T) {
	cfg := base()
	cfg["conParams"] = "sslmode=require&application_name=authsrv"
	pc, err := sqlres.PGConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if pc.Host != "db.example.org" || pc.Port != 5432 || pc.Database != "users" || pc.User != "pi" || pc.Password != "s3cret-pw" {
		t.Errorf("config %s:%d/%s user %s", pc.Host, pc.Port, pc.Database, pc.User)
	}
	if pc.ConnectTimeout != 5*time.Second || pc.RuntimeParams["application_name"] != "authsrv" || pc.TLSConfig == nil {
		t.Errorf("timeout %s, params %v, tls %v", pc.ConnectTimeout, pc.RuntimeParams, pc.TLSConfig != nil)
	}
	if strings.Contains(pc.ConnString(), "s3cret-pw") {
		t.Errorf("the connection string holds the password: %s", pc.ConnString())
	}

	cfg = base()
	cfg["Server"] = "/var/run/postgresql"
	cfg["conParams"] = "connect_timeout=2"
	pc, err = sqlres.PGConfig(cfg)
	if err != nil || pc.Host != "/var/run/postgresql" || pc.Port != 5432 || pc.ConnectTimeout != 2*time.Second {
		t.Errorf("socket config %v: %+v", err, pc)
	}

	cfg = base()
	cfg["conParams"] = "%zz"
	if _, err := sqlres.PGConfig(cfg); err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("bad conParams: %v", err)
	}
}

func TestMySQLConfig(t *testing.T) {
	cfg := base()
	cfg["Driver"] = "mysql+pymysql"
	cfg["Port"] = ""
	cfg["conParams"] = "charset=utf8mb4&readTimeout=3s"
	mc, err := sqlres.MySQLConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if mc.Net != "tcp" || mc.Addr != "db.example.org:3306" || mc.DBName != "users" || mc.User != "pi" || mc.Passwd != "s3cret-pw" {
		t.Errorf("config %s %s %s %s", mc.Net, mc.Addr, mc.DBName, mc.User)
	}
	if !mc.ClientFoundRows || mc.Timeout != 5*time.Second || mc.ReadTimeout != 3*time.Second {
		t.Errorf("ClientFoundRows %v Timeout %s ReadTimeout %s", mc.ClientFoundRows, mc.Timeout, mc.ReadTimeout)
	}
	cfg["Server"] = "/run/mysqld/mysqld.sock"
	if mc, err := sqlres.MySQLConfig(cfg); err != nil || mc.Net != "unix" || mc.Addr != "/run/mysqld/mysqld.sock" {
		t.Errorf("socket: %v %+v", err, mc)
	}
}

// TestClosedPort: nothing listens; every driver reports ErrUnavailable
// quickly and Test says it could not connect.
func TestClosedPort(t *testing.T) {
	port := testsvc.FreePort(t)
	for _, driver := range []string{"postgresql", "mysql+pymysql"} {
		t.Run(driver, func(t *testing.T) {
			cfg := base()
			cfg["Driver"], cfg["Server"], cfg["Port"] = driver, "127.0.0.1", strconv.Itoa(port)
			s := open(t, cfg)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := s.UserID(ctx, "alice")
			if !errors.Is(err, resolver.ErrUnavailable) || time.Since(start) > 3*time.Second {
				t.Errorf("UserID = %v after %s", err, time.Since(start))
			}
			if err := s.Ping(ctx); !errors.Is(err, resolver.ErrUnavailable) {
				t.Errorf("Ping = %v", err)
			}
			if v, d := s.Test(ctx); v != -1 || d != "Unable to connect to database." {
				t.Errorf("Test() = %v, %q", v, d)
			}
		})
	}
}

func TestCensor(t *testing.T) {
	cause := fmt.Errorf("dial: password=hunter22 rejected: %w", context.DeadlineExceeded)
	err := sqlres.Censor(cause, "hunter22")
	if strings.Contains(err.Error(), "hunter22") || !strings.Contains(err.Error(), resolver.Censored) {
		t.Errorf("censored text %q", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("the censored error hides its cause from errors.Is")
	}
	if errors.Unwrap(err) != nil {
		t.Error("Unwrap hands out the uncensored error")
	}
}

// TestBlackHole: the server accepts TCP and never answers; calls end at
// poolTimeout (F8 for SQL).
func TestBlackHole(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for _, driver := range []string{"postgresql", "mysql"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			cfg := base()
			cfg["Driver"], cfg["Server"], cfg["Port"] = driver, "127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
			cfg["poolTimeout"] = "1"
			s := open(t, cfg)
			start := time.Now()
			_, err := s.UserID(t.Context(), "alice")
			if took := time.Since(start); !errors.Is(err, resolver.ErrUnavailable) || took > 3*time.Second {
				t.Errorf("UserID = %v after %s", err, took)
			}
			start = time.Now()
			if err := s.Ping(t.Context()); !errors.Is(err, resolver.ErrUnavailable) || time.Since(start) > 3*time.Second {
				t.Errorf("Ping = %v after %s", err, time.Since(start))
			}
		})
	}
}
