package postgres

import (
	"fmt"
	"math"

	"github.com/authsrv/authsrv/store"
)

var (
	_ store.BucketLister   = (*tx)(nil)
	_ store.SequenceSetter = (*bucket)(nil)
	_ store.Pinger         = (*Store)(nil)
)

// listBuckets finds the distinct bucket names of the key table with one
// index probe per bucket (a loose index scan over the primary key), not a
// walk of every row, and adds the buckets that only hold a sequence.
const listBuckets = `WITH RECURSIVE b(bucket) AS (
		(SELECT bucket FROM {kv} ORDER BY bucket LIMIT 1)
		UNION ALL
		SELECT (SELECT k.bucket FROM {kv} k WHERE k.bucket > b.bucket ORDER BY k.bucket LIMIT 1)
		FROM b WHERE b.bucket IS NOT NULL
	)
	SELECT bucket FROM b WHERE bucket IS NOT NULL
	UNION
	SELECT bucket FROM {seq} WHERE seq > 0
	ORDER BY 1`

// setSequence upserts a bucket's sequence.
const setSequence = `INSERT INTO {seq} (bucket, seq) VALUES ($1, $2)
	ON CONFLICT (bucket) DO UPDATE SET seq = EXCLUDED.seq`

// BucketNames returns the names of the buckets that hold a key or a
// sequence above 0, in byte order (the column's collation is "C").
func (t *tx) BucketNames() ([]string, error) {
	if t.err != nil {
		return nil, t.err
	}
	ctx, cancel := t.stmtCtx()
	defer cancel()
	rows, err := t.ptx.Query(ctx, t.s.q.expand(listBuckets))
	if err != nil {
		return nil, t.failed("list buckets", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, t.failed("list buckets", err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		return nil, t.failed("list buckets", err)
	}
	return names, nil
}

// SetSequence sets the bucket's sequence. PostgreSQL's bigint holds
// sequences up to 1<<63-1.
func (b *bucket) SetSequence(n uint64) error {
	if err := b.writeCheck("set sequence"); err != nil {
		return err
	}
	if n > math.MaxInt64 {
		return fmt.Errorf("bucket %q: set sequence %d: above PostgreSQL's bigint", b.name, n)
	}
	ctx, cancel := b.t.stmtCtx()
	defer cancel()
	if _, err := b.t.ptx.Exec(ctx, b.t.s.q.expand(setSequence), b.name, int64(n)); err != nil {
		return b.t.failed(fmt.Sprintf("bucket %q: set sequence", b.name), err)
	}
	b.t.mods++
	return nil
}
