package authsrv

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/authsrv/authsrv/store"
)

// watchStore logs the store's write failures once each way: when writes
// begin to fail (a full disk: ENOSPC, a file size limit: EFBIG, a quota,
// an I/O error, a read-only file system), with the operating system's
// error, and when they work again, with what the failure cost. Requests in
// between log nothing of it: they answer apierr.StoreWrite (changes) or
// still answer (reads), and readiness reports not ready.
func (s *Server) watchStore() {
	lg := s.cfg.log.With().Str("component", "store").Logger()
	var unwritten atomic.Uint64 // the audit's count when the failure began
	store.WatchWrites(s.st, func(st store.WriteState) {
		if st.Failing {
			unwritten.Store(s.audit.Unwritten())
			lg.Error().Err(st.Err).Str("reason", st.Err.Reason()).
				Msg("store writes failing: changes are refused, reads go on, readyz reports not ready until a write succeeds")
			return
		}
		lg.Warn().Uint64("refused_writes", st.Failed).Uint64("unwritten_audit_entries", s.audit.Unwritten()-unwritten.Load()).
			Int64("failing_for_ms", time.Since(st.Since).Milliseconds()).Msg("store writes work again")
	})
}

// preloadResolvers builds the resolvers whose data loads up front (passwd
// files), so that the first lookup does not pay for the load; Ready
// reports not ready (a *resolver.LoadingError) until they are loaded.
func (s *Server) preloadResolvers() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.resolvers.Preload(ctx); err != nil {
		s.cfg.log.Error().Err(err).Str("component", "resolver").Msg("listing the resolvers to load at start failed")
	}
	go s.releaseLoadMemory()
}

// loadSlack is the heap the start-up loads may leave unused but resident
// before it is handed back to the operating system at once.
const loadSlack = 16 << 20

// releaseLoadMemory waits for the start-up loads (they run in the
// background; Ready reports them) and then, when they left at least
// loadSlack of heap unused (a big passwd file's load peaks well above
// what its index keeps), returns that memory to the operating system.
// Otherwise the load's transient heap stays resident for minutes: the
// runtime's scavenger returns it only gradually, and until then it counts
// in the process's RSS as if still in use.
func (s *Server) releaseLoadMemory() {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for s.resolvers.Loading() != nil {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if m.HeapIdle-m.HeapReleased >= loadSlack {
		debug.FreeOSMemory()
	}
}
