package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SchemaVersion is the version of the tables this release writes.
// Version 2 added the writer lock table: a release before it would write
// without taking the lock, so it must refuse the database.
const SchemaVersion = 2

// ErrSchemaTooNew is wrapped by Open's error when a newer release has
// migrated the database: this one would misread it.
var ErrSchemaTooNew = errors.New("store/postgres: the database schema is newer than this release knows")

// Table names, inside the store's schema.
const (
	versionTable = "authsrv_schema"
	kvTable      = "authsrv_kv"
	seqTable     = "authsrv_seq"
	// writerTable holds no rows: every Update locks it first, so that the
	// writers of all nodes take turns (see savepoints in batch.go).
	writerTable = "authsrv_writer"
)

// migrations[v] takes the tables from version v to v+1. Bucket names are
// compared byte for byte (collation "C"); keys and values are bytea, whose
// order is bytewise, as bbolt's.
var migrations = [SchemaVersion][]string{
	0: {
		`CREATE TABLE {kv} (
			bucket text COLLATE "C" NOT NULL,
			key    bytea NOT NULL,
			value  bytea NOT NULL,
			PRIMARY KEY (bucket, key)
		) WITH (fillfactor = 90)`,
		`CREATE TABLE {seq} (
			bucket text COLLATE "C" NOT NULL PRIMARY KEY,
			seq    bigint NOT NULL
		) WITH (fillfactor = 50)`,
	},
	1: {
		`CREATE TABLE {writer} ()`,
	},
}

// migrate creates the schema and tables or brings them to SchemaVersion,
// in one transaction, holding an advisory lock so that nodes opening the
// same database at once take turns. A store already at SchemaVersion runs
// no DDL, so a role without CREATE rights can use tables an administrator
// made.
func (s *Store) migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.ConnectTimeout+4*s.opts.QueryTimeout)
	defer cancel()
	ptx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer s.rollback(ctx, ptx)
	h := fnv.New64a()
	_, _ = h.Write([]byte("authsrv store schema " + s.opts.Schema))
	if _, err := ptx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(h.Sum64())); err != nil {
		return fmt.Errorf("lock for migration: %w", err)
	}
	versionT := pgx.Identifier{s.opts.Schema, versionTable}.Sanitize()
	var exists bool
	if err := ptx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, versionT).Scan(&exists); err != nil {
		return fmt.Errorf("look for the schema version table: %w", err)
	}
	version := 0
	if !exists {
		var schemaExists bool
		if err := ptx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, s.opts.Schema).Scan(&schemaExists); err != nil {
			return fmt.Errorf("look for schema %q: %w", s.opts.Schema, err)
		}
		if !schemaExists {
			if _, err := ptx.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{s.opts.Schema}.Sanitize()); err != nil {
				return fmt.Errorf("create schema %q: %w", s.opts.Schema, err)
			}
		}
		if _, err := ptx.Exec(ctx, `CREATE TABLE `+versionT+` (version integer NOT NULL)`); err != nil {
			return fmt.Errorf("create the schema version table: %w", err)
		}
		if _, err := ptx.Exec(ctx, `INSERT INTO `+versionT+` (version) VALUES (0)`); err != nil {
			return fmt.Errorf("create the schema version table: %w", err)
		}
	} else {
		var v *int
		if err := ptx.QueryRow(ctx, `SELECT max(version) FROM `+versionT).Scan(&v); err != nil {
			return fmt.Errorf("read the schema version: %w", err)
		}
		if v != nil {
			version = *v
		} else if _, err := ptx.Exec(ctx, `INSERT INTO `+versionT+` (version) VALUES (0)`); err != nil {
			return fmt.Errorf("write the schema version: %w", err)
		}
	}
	switch {
	case version > SchemaVersion:
		return fmt.Errorf("%w: the database is at version %d, this release knows up to %d (upgrade authsrv on this node)",
			ErrSchemaTooNew, version, SchemaVersion)
	case version == SchemaVersion:
		return nil // nothing to write; the deferred rollback ends the transaction
	case version < 0:
		return fmt.Errorf("the database's schema version %d is not valid", version)
	}
	for v := version; v < SchemaVersion; v++ {
		for _, stmt := range migrations[v] {
			if _, err := ptx.Exec(ctx, s.q.expand(stmt)); err != nil {
				return fmt.Errorf("migrate from version %d to %d: %w", v, v+1, err)
			}
		}
	}
	if _, err := ptx.Exec(ctx, `UPDATE `+versionT+` SET version = $1`, SchemaVersion); err != nil {
		return fmt.Errorf("write the schema version: %w", err)
	}
	if err := ptx.Commit(ctx); err != nil {
		return fmt.Errorf("commit the migration: %w", err)
	}
	return nil
}

// queries are the statements of the store, with the schema's table names.
type queries struct {
	kv, seq, writer string // quoted, schema-qualified table names

	get, put, del     string
	scanGE, scanGEUpp string // key >= $2 [AND key < $3] ORDER BY key LIMIT $n
	scanGT, scanGTUpp string // key > $2 [AND key < $3] ORDER BY key LIMIT $n
	last, prev        string // descending: the last key, the last key < $2
	seq1, nextSeq     string
	delBucket         string
	lockWriters       string
}

func newQueries(schema string) queries {
	q := queries{
		kv:     pgx.Identifier{schema, kvTable}.Sanitize(),
		seq:    pgx.Identifier{schema, seqTable}.Sanitize(),
		writer: pgx.Identifier{schema, writerTable}.Sanitize(),
	}
	q.get = q.expand(`SELECT value FROM {kv} WHERE bucket = $1 AND key = $2`)
	q.put = q.expand(`INSERT INTO {kv} (bucket, key, value) VALUES ($1, $2, $3)
		ON CONFLICT (bucket, key) DO UPDATE SET value = EXCLUDED.value`)
	q.del = q.expand(`DELETE FROM {kv} WHERE bucket = $1 AND key = $2`)
	q.scanGE = q.expand(`SELECT key, value FROM {kv} WHERE bucket = $1 AND key >= $2 ORDER BY key LIMIT $3`)
	q.scanGEUpp = q.expand(`SELECT key, value FROM {kv} WHERE bucket = $1 AND key >= $2 AND key < $3 ORDER BY key LIMIT $4`)
	q.scanGT = q.expand(`SELECT key, value FROM {kv} WHERE bucket = $1 AND key > $2 ORDER BY key LIMIT $3`)
	q.scanGTUpp = q.expand(`SELECT key, value FROM {kv} WHERE bucket = $1 AND key > $2 AND key < $3 ORDER BY key LIMIT $4`)
	q.last = q.expand(`SELECT key, value FROM {kv} WHERE bucket = $1 ORDER BY key DESC LIMIT 1`)
	q.prev = q.expand(`SELECT key, value FROM {kv} WHERE bucket = $1 AND key < $2 ORDER BY key DESC LIMIT 1`)
	q.seq1 = q.expand(`SELECT seq FROM {seq} WHERE bucket = $1`)
	q.nextSeq = q.expand(`INSERT INTO {seq} AS s (bucket, seq) VALUES ($1, 1)
		ON CONFLICT (bucket) DO UPDATE SET seq = s.seq + 1 RETURNING seq`)
	q.delBucket = q.expand(`WITH d AS (DELETE FROM {kv} WHERE bucket = $1) DELETE FROM {seq} WHERE bucket = $1`)
	// EXCLUSIVE conflicts with itself and not with the ACCESS SHARE of
	// readers.
	q.lockWriters = q.expand(`LOCK TABLE {writer} IN EXCLUSIVE MODE`)
	return q
}

// prepare prepares the store's statements on a new connection, each under
// its own text as name, so that pgx uses them without parsing them again.
// This matters for the writer lock (see savepoints in batch.go): a
// transaction's first statement goes in one round trip after the LOCK,
// and a statement parsed there would be parsed before the LOCK ran,
// fixing the transaction's snapshot before the wait. Tables that do not
// exist yet (a database Open is about to migrate) are no error: Open
// makes new connections after the migration.
func (q queries) prepare(ctx context.Context, c *pgx.Conn) error {
	for _, sql := range []string{q.lockWriters, q.get, q.put, q.del, q.scanGE, q.scanGEUpp, q.scanGT, q.scanGTUpp,
		q.last, q.prev, q.seq1, q.nextSeq, q.delBucket} {
		if _, err := c.Prepare(ctx, sql, sql); err != nil {
			// undefined_table, invalid_schema_name
			if pe, ok := errors.AsType[*pgconn.PgError](err); ok && (pe.Code == "42P01" || pe.Code == "3F000") {
				return nil
			}
			return fmt.Errorf("prepare the store's statements: %w", err)
		}
	}
	return nil
}

// expand puts the table names into a statement.
func (q queries) expand(stmt string) string {
	return strings.NewReplacer("{kv}", q.kv, "{seq}", q.seq, "{writer}", q.writer).Replace(stmt)
}
