package bolt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/authsrv/authsrv/store"
)

// The write state. Every commit reports to db.health: a refused one
// (Failed) begins a failure, which readiness reports and the server logs
// once; a commit that needed new space (it moved the file's high-water
// mark, or it was the probe) ends it. While a failure lasts, a goroutine
// tries a probe write every ProbeInterval, so that writes are found to work
// again without waiting for a client's write, and ends when they do or at
// Close.
//
// bbolt keeps working after a refused commit: it rolls the transaction
// back and reloads its free page list from the last committed meta page,
// so the next commit that finds space succeeds (store/bolt's tests check
// this against a real file size limit, and the file's consistency after).

// probeKey holds the probe's value in the store's meta bucket while the
// probe runs; the probe deletes it right after.
var probeKey = []byte("bolt_write_probe")

// Probe sizes: the probe writes a value larger than the free pages the
// file holds (so that it needs new space, as the refused commits did),
// within these bounds.
const (
	minProbeBytes = 16 << 10
	maxProbeBytes = 1 << 20
)

var _ store.HealthReporter = (*DB)(nil)

// WriteHealth is the store's write state.
func (db *DB) WriteHealth() *store.WriteHealth { return &db.health }

// commitFailed records a refused commit and returns its error: a
// *store.WriteError, or the closed-store error.
func (db *DB) commitFailed(err error) error {
	err = mapErr(err)
	if errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("commit %s: %w", db.path, err)
	}
	we, first := db.health.Failed(fmt.Errorf("commit %s: %w", db.path, err), time.Now())
	if first {
		db.startProbe()
	}
	return we
}

// committed records a commit that worked; before is the file's data size
// when its transaction began. While writes fail, only a commit that
// needed new space, or the probe, ends the failure.
func (db *DB) committed(before int64, probe bool) {
	if !db.health.State().Failing {
		return
	}
	db.health.Succeeded(probe || db.dataSize() > before)
}

// dataSize is the size of the file's data (its high-water mark).
func (db *DB) dataSize() int64 {
	tx, err := db.bdb.Begin(false)
	if err != nil {
		return 0
	}
	defer func() { _ = tx.Rollback() }()
	return tx.Size()
}

// startProbe starts the probe goroutine unless it runs: every probeEvery
// while writes fail, it calls probe.
func (db *DB) startProbe() {
	db.life.StartProbe(db.probeEvery, func() bool { return db.health.State().Failing }, db.probe)
}

// probe writes a value that needs new space and deletes it again. Its
// commits report to the write state like any other.
func (db *DB) probe(ctx context.Context) {
	size := minProbeBytes
	if st := db.bdb.Stats(); st.FreePageN+st.PendingPageN > 0 {
		size = max(size, (st.FreePageN+st.PendingPageN+2)*db.bdb.Info().PageSize)
	}
	size = min(size, maxProbeBytes)
	value := make([]byte, size)
	err := db.update(ctx, func(tx store.Tx) error {
		return tx.Bucket(store.MetaBucket).Put(probeKey, value)
	}, true)
	if err != nil {
		return
	}
	_ = db.update(ctx, func(tx store.Tx) error {
		return tx.Bucket(store.MetaBucket).Delete(probeKey)
	}, false)
}
