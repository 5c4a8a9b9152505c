package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/bolt"
	"github.com/authsrv/authsrv/store/postgres"
)

// storeUsage is the -store flag's help.
const storeUsage = "where the data lives: empty for the bbolt file in the data directory, or a postgres:// (postgresql://) URL for a PostgreSQL database that several nodes share (the keys stay in the data directory; give the password in the URL, in PGPASSWORD or a passfile, or with store_file: in -config)"

// storeTimeoutUsage is the -store-connect-timeout flag's help.
const storeTimeoutUsage = "with a PostgreSQL -store: how long one connection attempt may take (TCP, TLS, authentication); an unreachable database fails the start after it"

// isPostgresURL reports whether v names a PostgreSQL database.
func isPostgresURL(v string) bool {
	l := strings.ToLower(v)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// onPostgres reports whether the command works on a PostgreSQL store.
func (c *common) onPostgres() bool { return c.storeURL != "" }

// checkStoreFlag refuses a -store that is neither empty nor a PostgreSQL
// URL, without repeating its value (it may hold a password).
func (c *common) checkStoreFlag() error {
	if c.storeURL == "" || isPostgresURL(c.storeURL) {
		return nil
	}
	scheme, _, ok := strings.Cut(c.storeURL, "://")
	if !ok {
		scheme = "no scheme"
	}
	return fmt.Errorf("-store: want empty (the bbolt file in the data directory) or a postgres:// URL, got %s", scheme)
}

// openStore opens the -store database, or returns nil for the data
// directory's own bbolt file (authsrv.New opens that). It fails within
// the connect timeout when the database is unreachable, and its errors
// never show the password.
func (e *env) openStore(c *common) (store.Store, error) {
	if err := c.checkStoreFlag(); err != nil {
		return nil, err
	}
	if c.storeURL == "" {
		return nil, nil
	}
	if c.storeTimeout <= 0 {
		return nil, fmt.Errorf("-store-connect-timeout %s: want more than 0", c.storeTimeout)
	}
	return postgres.Open(e.ctx, c.storeURL, postgres.Options{ConnectTimeout: c.storeTimeout})
}

// keyFiles are the data directory's key files: what nodes on one
// PostgreSQL store share.
var keyFiles = []string{authsrv.EncKeyFile, authsrv.JWTKeyFile, authsrv.JWTKeysFile, authsrv.AuditKeyFile}

// newServer builds the server on the data directory and, when st is not
// nil, on st (a PostgreSQL store). A node whose enckey is not the one the
// database was written with is refused (authsrv.ErrWrongKey); when the
// data directory had no enckey before, the key files this start made up
// are removed again, and the error says to copy the other nodes' keys.
func (e *env) newServer(c *common, st store.Store, opts []authsrv.Option) (*authsrv.Server, error) {
	if st == nil {
		return authsrv.New(opts...)
	}
	had := map[string]bool{}
	for _, f := range keyFiles {
		if _, err := os.Stat(filepath.Join(c.dataDir, f)); err == nil {
			had[f] = true
		}
	}
	s, err := authsrv.New(append(opts, authsrv.WithStore(st))...)
	if err == nil || !errors.Is(err, authsrv.ErrWrongKey) {
		return s, err
	}
	if had[authsrv.EncKeyFile] {
		return nil, fmt.Errorf("%w; the database was written by nodes with another enckey: give this node their key files (%s) in %s",
			err, strings.Join(keyFiles, ", "), c.dataDir)
	}
	for _, f := range keyFiles {
		if !had[f] {
			_ = os.Remove(filepath.Join(c.dataDir, f))
		}
	}
	return nil, fmt.Errorf("%w; %s had no enckey and the database holds data: copy the key files (%s) of a node that runs on this database into it",
		err, c.dataDir, strings.Join(keyFiles, ", "))
}

// closeStores closes the stores the command opened, after its server.
func (e *env) closeStores() {
	for _, st := range e.stores {
		_ = st.Close()
	}
	e.stores = nil
}

// notOnPostgres refuses a command that only works on the data directory's
// bbolt file.
func (c *common) notOnPostgres(cmd, instead string) error {
	if !c.onPostgres() {
		return nil
	}
	return fmt.Errorf("%s works on the data directory's bbolt file, not on a PostgreSQL -store: %s", cmd, instead)
}

// storeCmd is "authsrv store copy".
func (e *env) storeCmd(args []string) error {
	if len(args) == 0 || args[0] != "copy" {
		fmt.Fprint(e.stderr, "usage: authsrv store copy -from SRC -to DST [-force]\n")
		return errUsage
	}
	fs := flag.NewFlagSet("authsrv store copy", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	from := fs.String("from", "", "the store to read: a bbolt file (a data directory's "+authsrv.DBFile+") or a postgres:// URL")
	to := fs.String("to", "", "the store to write, as -from; a bbolt file is created when missing")
	force := fs.Bool("force", false, "delete what the destination holds first, instead of refusing a destination with data")
	openTimeout := fs.Duration("open-timeout", time.Second, "how long to wait for a bbolt file's lock (a running server holds it)")
	connTimeout := fs.Duration("store-connect-timeout", postgres.DefaultConnectTimeout, storeTimeoutUsage)
	batch := fs.Int("batch-keys", store.DefaultCopyBatchKeys, "keys per write transaction on the destination")
	logLevel := fs.String("log-level", "info", "progress on standard error: info, or disabled")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *from == "" || *to == "" {
		return errors.New("give -from and -to: each a bbolt file or a postgres:// URL")
	}
	if *from == *to {
		return errors.New("-from and -to name the same store")
	}
	if *batch <= 0 {
		return fmt.Errorf("-batch-keys %d: want more than 0", *batch)
	}
	open := func(which, v string, create bool) (store.Store, string, error) {
		if isPostgresURL(v) {
			st, err := postgres.Open(e.ctx, v, postgres.Options{ConnectTimeout: *connTimeout})
			if err != nil {
				return nil, "", fmt.Errorf("%s: %w", which, err)
			}
			return st, "PostgreSQL", nil
		}
		if strings.Contains(v, "://") {
			return nil, "", fmt.Errorf("%s: want a bbolt file or a postgres:// URL", which)
		}
		if fi, err := os.Stat(v); err == nil && fi.IsDir() {
			v = filepath.Join(v, authsrv.DBFile) // a data directory
		} else if errors.Is(err, os.ErrNotExist) && !create {
			return nil, "", fmt.Errorf("%s %s: no such file", which, v)
		}
		db, err := bolt.Open(v, bolt.Options{Timeout: *openTimeout})
		if errors.Is(err, store.ErrLocked) {
			return nil, "", fmt.Errorf("%s: %w; stop the server that uses it first", which, err)
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", which, err)
		}
		return db, v, nil
	}
	src, srcName, err := open("-from", *from, false)
	if err != nil {
		return err
	}
	defer func() { _ = src.Close() }()
	dst, dstName, err := open("-to", *to, true)
	if err != nil {
		return err
	}
	defer func() { _ = dst.Close() }()
	quiet := *logLevel == "disabled"
	var last time.Time
	start := time.Now()
	res, err := store.Copy(e.ctx, dst, src, store.CopyOptions{Force: *force, BatchKeys: *batch,
		Progress: func(bucket string, keys int64) {
			if !quiet && time.Since(last) >= 5*time.Second {
				last = time.Now()
				fmt.Fprintf(e.stderr, "copying bucket %s: %d keys\n", bucket, keys)
			}
		}})
	if errors.Is(err, store.ErrNotEmpty) {
		return fmt.Errorf("%w; give -force to replace it", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "copied %d keys (%d bytes) in %d buckets from %s to %s in %d commits, %.1f s; verified: every bucket's keys, values and sequence match\n",
		res.Keys, res.Bytes, len(res.Buckets), srcName, dstName, res.Commits, time.Since(start).Seconds())
	if res.Cleared > 0 {
		fmt.Fprintf(e.stdout, "deleted %d buckets the destination held first (-force)\n", res.Cleared)
	}
	fmt.Fprintln(e.stdout, "the data is sealed with the source's enckey: start the servers on the destination with the source's key files (enckey, jwtkeys or jwtkey, auditkey)")
	return nil
}
