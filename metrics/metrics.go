// Package metrics is the small interface the library reports its
// measurements through: validate decisions, HTTP requests per route, the
// wait of key derivations for the memory budget and the store's commit
// latency. The library knows no metrics system; a program adapts Sink to
// one (cmd/authsrv adapts it to Prometheus). Nop is the default and Memory
// counts in memory for tests.
//
// Label values are small fixed sets (the Endpoint and Result constants, a
// route's registered pattern, an HTTP method and status code): never a
// user name, serial, realm or address, so neither a secret nor a high
// cardinality reaches a metrics system through this package.
//
// Package metrics sits on floor 1: it imports nothing of authsrv.
package metrics

import "time"

// Endpoint is the kind of a validate request.
type Endpoint uint8

// The validate endpoints.
const (
	Check Endpoint = iota
	SAMLCheck
	RadiusCheck
	TriggerChallenge
	PollTransaction
	// NumEndpoints is the number of endpoints (for arrays indexed by
	// Endpoint).
	NumEndpoints
)

var endpointNames = [NumEndpoints]string{"check", "samlcheck", "radiuscheck", "triggerchallenge", "polltransaction"}

// String is the endpoint's label value ("check", "samlcheck", ...).
func (e Endpoint) String() string {
	if e < NumEndpoints {
		return endpointNames[e]
	}
	return "unknown"
}

// Endpoints lists every endpoint.
func Endpoints() []Endpoint {
	out := make([]Endpoint, NumEndpoints)
	for i := range out {
		out[i] = Endpoint(i)
	}
	return out
}

// Result is the outcome of a validate request.
type Result uint8

// The validate results.
const (
	Accept Result = iota
	Reject
	Challenge
	// Error is a request answered with an error (bad parameters, a user
	// store that is down, a policy that denies).
	Error
	// NumResults is the number of results (for arrays indexed by
	// Result).
	NumResults
)

var resultNames = [NumResults]string{"accept", "reject", "challenge", "error"}

// String is the result's label value ("accept", "reject", ...).
func (r Result) String() string {
	if r < NumResults {
		return resultNames[r]
	}
	return "unknown"
}

// Results lists every result.
func Results() []Result {
	out := make([]Result, NumResults)
	for i := range out {
		out[i] = Result(i)
	}
	return out
}

// Sink receives the library's measurements. Its methods are called on hot
// paths, concurrently: an implementation resolves its series ahead (per
// endpoint and result, per route) and never blocks.
type Sink interface {
	// ValidateRequest counts one validate decision, whoever asked (the
	// HTTP API, a RADIUS gateway, a Go program).
	ValidateRequest(e Endpoint, r Result)
	// Route is called once per registered HTTP route, with its pattern
	// ("/token/:serial") and method; the handler reports every request
	// of that route to the returned RouteObserver.
	Route(pattern, method string) RouteObserver
	// KDFQueueWait reports how long a key derivation (a PIN or password
	// hash) waited for the memory budget and a CPU lane (0 when it did
	// not wait).
	KDFQueueWait(d time.Duration)
	// StoreCommit reports how long a store commit took (its write and
	// fsync).
	StoreCommit(d time.Duration)
}

// RouteObserver receives the requests of one HTTP route.
type RouteObserver interface {
	// Observe reports one request answered with HTTP status code after d.
	Observe(code int, d time.Duration)
}

// Nop is the Sink that drops everything.
type Nop struct{}

var _ Sink = Nop{}

// ValidateRequest does nothing.
func (Nop) ValidateRequest(Endpoint, Result) {}

// Route returns an observer that does nothing.
func (Nop) Route(string, string) RouteObserver { return nopRoute{} }

// KDFQueueWait does nothing.
func (Nop) KDFQueueWait(time.Duration) {}

// StoreCommit does nothing.
func (Nop) StoreCommit(time.Duration) {}

type nopRoute struct{}

func (nopRoute) Observe(int, time.Duration) {}

// IsNop reports whether s drops everything (nil or Nop), so that a caller
// can leave the measuring out of its path altogether.
func IsNop(s Sink) bool {
	switch s.(type) {
	case nil, Nop, *Nop:
		return true
	}
	return false
}
