package postgres

import (
	"context"
	"time"

	"github.com/authsrv/authsrv/store"
)

// The write state. A write the database refuses for a reason of its own
// (disk full, an I/O error, a server that only reads) begins a failure,
// which readiness reports and the server logs once; the next commit that
// writes ends it. While it lasts, a goroutine tries a probe write every
// ProbeInterval, so that a node that the load balancer took out of
// service (and that therefore gets no writes) finds out by itself that
// writes work again. A database that cannot be reached is not a write
// failure: every call fails then, reads too.

// probeKey holds the probe's value in the store's meta bucket; the probe
// deletes it in the same transaction.
var probeKey = []byte("postgres_write_probe")

// WriteHealth is the store's write state.
func (s *Store) WriteHealth() *store.WriteHealth { return &s.health }

// startProbe starts the probe goroutine unless it runs: every
// ProbeInterval while writes fail, it calls probe.
func (s *Store) startProbe() {
	s.life.StartProbe(s.opts.ProbeInterval, func() bool { return s.health.State().Failing }, s.probe)
}

// probe writes and deletes a value in one transaction: a successful commit
// that writes ends the failure (attempt). ctx is cancelled at Close.
func (s *Store) probe(ctx context.Context) {
	_ = s.update(ctx, func(tx store.Tx) error {
		b := tx.Bucket(store.MetaBucket)
		if err := b.Put(probeKey, []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
			return err
		}
		return b.Delete(probeKey)
	})
}
