package authsrv

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
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

// ErrStoreUnreachable is wrapped by Ready's error while the store's
// database (store/postgres) does not answer a ping. The error's text names
// the database as user@host:port/name, never the password; readiness
// answers only that the database is unreachable.
var ErrStoreUnreachable = errors.New("authsrv: the store's database does not answer")

// Readiness pings a database store at most once per storePingEvery (a
// probe storm from load balancers costs the database one ping a second),
// each ping bounded by storePingTimeout.
const (
	storePingEvery   = time.Second
	storePingTimeout = time.Second
)

// storePing is the last ping's result, shared by the probes of the next
// storePingEvery.
type storePing struct {
	mu   sync.Mutex
	at   time.Time // when the cached result was taken; zero: none
	err  error
	down bool // the last ping failed (for logging each change once)
}

// pingStore checks that a store on a database server (a store.Pinger)
// answers; other stores pass. Probes that come while a ping runs wait for
// it and share its result, and so do those of the next storePingEvery.
// Readiness thus fails within a second of the database going away and
// comes back by itself within a second of its return. The change each way
// is logged once.
//
// With fresh set it pings whatever the cache holds: Ready does so when a
// read failed after a cached ping had succeeded.
func (s *Server) pingStore(ctx context.Context, fresh bool) error {
	p, ok := s.st.(store.Pinger)
	if !ok {
		return nil
	}
	sp := &s.ping
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !fresh && !sp.at.IsZero() && time.Since(sp.at) < storePingEvery {
		return sp.err
	}
	pctx, cancel := context.WithTimeout(ctx, storePingTimeout)
	defer cancel()
	err := p.Ping(pctx)
	if err != nil && ctx.Err() != nil {
		return ctx.Err() // the caller gave up: no verdict on the database
	}
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrStoreUnreachable, err)
	}
	sp.at, sp.err = time.Now(), err
	lg := s.cfg.log.With().Str("component", "store").Logger()
	switch {
	case err != nil && !sp.down:
		lg.Error().Err(err).Msg("the store's database does not answer: readyz reports not ready until it does")
	case err == nil && sp.down:
		lg.Warn().Msg("the store's database answers again")
	}
	sp.down = err != nil
	return err
}

// ErrWarmingUp is what Ready returns while the start-up work other than
// the resolvers' loads is still running: the build of the token lists'
// in-memory set, and the release of the memory the start used.
var ErrWarmingUp = errors.New("authsrv: starting: building the token list set")

// syncWarmTokens is the number of tokens up to which New builds the token
// list set itself (a few milliseconds); a larger store builds it in the
// background while Ready reports ErrWarmingUp.
var syncWarmTokens = 50_000

// beforeWarm, when set (by tests), runs before the list set's build.
var beforeWarm func()

// startUp runs the start-up work: the resolvers whose data loads up front
// (passwd files), so that the first lookup does not pay for the load, and
// the token lists' in-memory set (token.Service.WarmListSet), so that the
// first wildcard or combined-filter list answers as fast as the later
// ones. Then it returns the memory that work used but no longer needs
// (releaseStartMemory). Ready reports not ready until all of it is done:
// a *resolver.LoadingError while resolvers load, ErrWarmingUp after. A
// small store's list set is built before New returns.
func (s *Server) startUp() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.resolvers.Preload(ctx); err != nil {
		s.cfg.log.Error().Err(err).Str("component", "resolver").Msg("listing the resolvers to load at start failed")
	}
	hook := beforeWarm
	if n, known, err := s.tokens.Count(ctx); err == nil && known && n <= syncWarmTokens && s.resolvers.Loading() == nil {
		s.warmLists(ctx, hook)
		s.settled.Store(true)
		return
	}
	go func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-s.done:
				cancel()
			case <-ctx.Done():
			}
		}()
		s.warmLists(ctx, hook)
		if s.waitLoads() {
			s.releaseStartMemory()
			s.settled.Store(true)
		}
	}()
}

// warmLists builds the token list set; a failure leaves the build to the
// first list that needs it.
func (s *Server) warmLists(ctx context.Context, hook func()) {
	if hook != nil {
		hook()
	}
	if err := s.tokens.WarmListSet(ctx); err != nil && ctx.Err() == nil {
		s.cfg.log.Warn().Err(err).Str("component", "token").Msg("building the token list set failed; the first list builds it")
	}
}

// waitLoads waits until no resolver is loading; false when the server
// closed first.
func (s *Server) waitLoads() bool {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for s.resolvers.Loading() != nil {
		select {
		case <-s.done:
			return false
		case <-tick.C:
		}
	}
	return true
}

// releaseStartMemory returns what the start-up work left resident but
// does not use: it runs only after work in the background (a big passwd
// file or token store). The heap is collected and handed back to the
// operating system: a big passwd file's load peaks well above what its
// index keeps, and with a collector that starts late (the binary's heap
// floor) the garbage would otherwise stay, and the runtime's scavenger
// returns freed pages only gradually; until then it all counts in the
// process's RSS as if in use. The store's pages that the list set's build
// mapped (it walks an index of every token) are unmapped; they stay in
// the page cache.
func (s *Server) releaseStartMemory() {
	if d, ok := s.st.(interface{ DropResident() error }); ok {
		_ = d.DropResident()
	}
	debug.FreeOSMemory()
}
