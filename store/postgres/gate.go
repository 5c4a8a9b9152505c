package postgres

import (
	"context"
	"sync"
)

// gate is a read-write lock whose waits end with their context. Update
// attempts take it shared; a call that lost a serialization conflict takes
// it exclusively for the rest of its attempts, so that on this node it
// competes with no other writer (only with other nodes). While it waits
// for the shared holders to finish, no new one enters. The zero value is
// ready to use.
type gate struct {
	mu      sync.Mutex
	readers int
	writer  bool          // held or claimed exclusively
	changed chan struct{} // closed and replaced on every release
}

// wait returns the channel that the next release closes; g.mu is held.
func (g *gate) wait() chan struct{} {
	if g.changed == nil {
		g.changed = make(chan struct{})
	}
	return g.changed
}

// broadcast wakes the waiters; g.mu is held.
func (g *gate) broadcast() {
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// rlock takes the gate shared, waiting while it is held or claimed
// exclusively.
func (g *gate) rlock(ctx context.Context) error {
	g.mu.Lock()
	for g.writer {
		ch := g.wait()
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		g.mu.Lock()
	}
	g.readers++
	g.mu.Unlock()
	return nil
}

func (g *gate) runlock() {
	g.mu.Lock()
	g.readers--
	if g.readers == 0 {
		g.broadcast()
	}
	g.mu.Unlock()
}

// lock takes the gate exclusively: it claims it (one claimant at a time),
// then waits for the shared holders to finish.
func (g *gate) lock(ctx context.Context) error {
	g.mu.Lock()
	for g.writer {
		ch := g.wait()
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		g.mu.Lock()
	}
	g.writer = true
	for g.readers > 0 {
		ch := g.wait()
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			g.unlock()
			return ctx.Err()
		}
		g.mu.Lock()
	}
	g.mu.Unlock()
	return nil
}

func (g *gate) unlock() {
	g.mu.Lock()
	g.writer = false
	g.broadcast()
	g.mu.Unlock()
}
