package authsrv

import (
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
