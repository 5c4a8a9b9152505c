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

// startProbe starts the probe goroutine unless it runs.
func (s *Store) startProbe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.probing || s.closed {
		return
	}
	s.probing = true
	s.probeWG.Add(1)
	go s.probe()
}

// probe writes every ProbeInterval until a write works or the store
// closes.
func (s *Store) probe() {
	defer s.probeWG.Done()
	defer func() {
		s.mu.Lock()
		s.probing = false
		s.mu.Unlock()
		// A failure that began after the loop's last look gets a probe.
		if s.health.State().Failing {
			s.startProbe()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(s.opts.ProbeInterval)
	defer tick.Stop()
	for s.health.State().Failing {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// A successful commit that writes ends the failure (attempt).
		_ = s.update(ctx, func(tx store.Tx) error {
			b := tx.Bucket(store.MetaBucket)
			if err := b.Put(probeKey, []byte(time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
				return err
			}
			return b.Delete(probeKey)
		})
	}
}
