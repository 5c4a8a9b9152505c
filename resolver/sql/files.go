package sql

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/authsrv/authsrv/fileroot"
	"github.com/authsrv/authsrv/resolver"
)

// TypeConfined returns the sqlresolver type whose files are confined by
// files: the SQLite database file and the files PostgreSQL connection
// parameters name (sslrootcert, sslcert, sslkey, passfile, servicefile)
// must keep the rules of package fileroot when the configuration is
// saved and whenever a store is built, so that a resolver cannot read the
// server's keys or the system's files. SQLite opens its file itself, so a
// swap after the store is built is not seen until the next build.
func TypeConfined(files fileroot.Confinement) resolver.Type {
	files = files.Copy()
	return resolver.Type{
		Name:   TypeName,
		Params: params(),
		Validate: func(cfg resolver.Config) error {
			c, err := parseConfig(cfg)
			if err != nil {
				return err
			}
			return checkFiles(c, files)
		},
		New: resolver.Constructor(func(ctx context.Context, cfg resolver.Config, env resolver.Env) (*Store, error) {
			c, err := parseConfig(cfg)
			if err != nil {
				return nil, err
			}
			if err := checkFiles(c, files); err != nil {
				return nil, err
			}
			return New(ctx, cfg, env)
		}),
		Editable:     editable,
		CacheTimeout: cacheTimeout,
	}
}

// pgFileParams are the libpq connection parameters that name a file the
// client reads.
var pgFileParams = []string{"sslrootcert", "sslcert", "sslkey", "passfile", "servicefile"}

// checkFiles refuses the files c names that break a rule of files (a
// confinement without roots and data directory checks nothing, as Type
// does).
func checkFiles(c *config, files fileroot.Confinement) error {
	if len(files.Roots) == 0 && files.DataDir == "" {
		return nil
	}
	check := func(what, path string) error {
		if err := files.Check(path); err != nil {
			return configError(fmt.Sprintf("%s is refused: %s", what, fileroot.Describe(err, path)))
		}
		return nil
	}
	switch c.dialect {
	case dialectSQLite:
		return check("Database", c.database)
	case dialectPostgres:
		q, err := url.ParseQuery(c.conParams)
		if err != nil {
			return nil // parseConfig's and openDB's to report
		}
		for _, k := range pgFileParams {
			v := q.Get(k)
			if v == "" || (k == "sslrootcert" && v == "system") {
				continue
			}
			if err := check("conParams "+k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// allowsAllFiles reports whether MySQL conParams set allowAllFiles, which
// lets the database server ask for any file of this host (LOAD DATA LOCAL
// INFILE).
func allowsAllFiles(conParams string) bool {
	q, err := url.ParseQuery(conParams)
	if err != nil {
		return false
	}
	for k, vs := range q {
		if strings.EqualFold(k, "allowAllFiles") {
			for _, v := range vs {
				if !strings.EqualFold(v, "false") && v != "0" {
					return true
				}
			}
		}
	}
	return false
}
