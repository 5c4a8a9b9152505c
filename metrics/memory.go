package metrics

import (
	"sync"
	"sync/atomic"
	"time"
)

// Memory is a Sink that keeps its counts in memory, for tests and for a
// program that reads them itself. It is safe for concurrent use; the zero
// value is ready.
type Memory struct {
	validate [NumEndpoints][NumResults]atomic.Uint64

	mu      sync.Mutex
	routes  map[RouteKey]*memRoute
	kdf     Durations
	commits Durations
}

// Durations sums the durations of one measurement.
type Durations struct {
	// Count is how many were recorded, Total their sum and Max the
	// longest.
	Count      int
	Total, Max time.Duration
}

func (s *Durations) add(d time.Duration) {
	s.Count++
	s.Total += d
	s.Max = max(s.Max, d)
}

var _ Sink = (*Memory)(nil)

// RouteKey names one route's series.
type RouteKey struct {
	Pattern, Method string
}

type memRoute struct {
	m     *Memory
	codes map[int]uint64
	times Durations
}

// ValidateRequest counts the decision.
func (m *Memory) ValidateRequest(e Endpoint, r Result) {
	if e < NumEndpoints && r < NumResults {
		m.validate[e][r].Add(1)
	}
}

// Validate returns how many decisions of endpoint e had result r.
func (m *Memory) Validate(e Endpoint, r Result) uint64 {
	if e >= NumEndpoints || r >= NumResults {
		return 0
	}
	return m.validate[e][r].Load()
}

// Route registers the route.
func (m *Memory) Route(pattern, method string) RouteObserver {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.routes == nil {
		m.routes = map[RouteKey]*memRoute{}
	}
	k := RouteKey{pattern, method}
	r := m.routes[k]
	if r == nil {
		r = &memRoute{m: m, codes: map[int]uint64{}}
		m.routes[k] = r
	}
	return r
}

func (r *memRoute) Observe(code int, d time.Duration) {
	r.m.mu.Lock()
	r.codes[code]++
	r.times.add(d)
	r.m.mu.Unlock()
}

// Requests returns how many requests of the route (pattern, method) were
// answered with code.
func (m *Memory) Requests(pattern, method string, code int) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.routes[RouteKey{pattern, method}]; r != nil {
		return r.codes[code]
	}
	return 0
}

// RouteTimes sums the durations of the requests of the route (pattern,
// method).
func (m *Memory) RouteTimes(pattern, method string) Durations {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.routes[RouteKey{pattern, method}]; r != nil {
		return r.times
	}
	return Durations{}
}

// Routes lists the registered routes.
func (m *Memory) Routes() []RouteKey {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]RouteKey, 0, len(m.routes))
	for k := range m.routes {
		out = append(out, k)
	}
	return out
}

// KDFQueueWait records the wait.
func (m *Memory) KDFQueueWait(d time.Duration) {
	m.mu.Lock()
	m.kdf.add(d)
	m.mu.Unlock()
}

// KDFWaits sums the waits recorded so far.
func (m *Memory) KDFWaits() Durations {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kdf
}

// StoreCommit records the commit.
func (m *Memory) StoreCommit(d time.Duration) {
	m.mu.Lock()
	m.commits.add(d)
	m.mu.Unlock()
}

// StoreCommits sums the commit latencies recorded so far.
func (m *Memory) StoreCommits() Durations {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commits
}
