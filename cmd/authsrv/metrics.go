package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/metrics"
)

// The Prometheus side of the library's metrics.Sink. The library knows
// nothing of Prometheus: it reports through metrics.Sink, and this file
// turns those reports into the authsrv_* series that -metrics-listen
// serves.

// Histogram buckets, in seconds.
var (
	requestBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	kdfBuckets     = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	commitBuckets  = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}
)

// promSink adapts metrics.Sink to Prometheus. Every series of the hot
// paths is resolved ahead: the validate counters per (endpoint, result)
// at construction, a route's histogram when the route is registered, and
// its counter per status code at the code's first request.
type promSink struct {
	validate [metrics.NumEndpoints][metrics.NumResults]prometheus.Counter
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	kdfWait  prometheus.Histogram
	commit   prometheus.Histogram
}

var _ metrics.Sink = (*promSink)(nil)

func newPromSink(reg prometheus.Registerer) (*promSink, error) {
	validate := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "authsrv_validate_requests_total",
		Help: "Validate requests (check, samlcheck, radiuscheck, triggerchallenge, polltransaction) by endpoint and result, whoever asked (HTTP, RADIUS, a Go program).",
	}, []string{"endpoint", "result"})
	p := &promSink{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authsrv_http_requests_total",
			Help: "HTTP API requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "authsrv_http_request_duration_seconds",
			Help:    "How long HTTP API requests took, by route pattern and method.",
			Buckets: requestBuckets,
		}, []string{"route", "method"}),
		kdfWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "authsrv_kdf_queue_wait_seconds",
			Help:    "How long PIN and password hashes waited for the KDF memory budget and a CPU lane.",
			Buckets: kdfBuckets,
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "authsrv_store_commit_seconds",
			Help:    "How long store commits (write and fsync of one batch) took.",
			Buckets: commitBuckets,
		}),
	}
	for _, e := range metrics.Endpoints() {
		for _, r := range metrics.Results() {
			// Every pair exists from the start (at 0), so that rate()
			// sees the first request of each.
			p.validate[e][r] = validate.WithLabelValues(e.String(), r.String())
		}
	}
	for _, c := range []prometheus.Collector{validate, p.requests, p.duration, p.kdfWait, p.commit} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *promSink) ValidateRequest(e metrics.Endpoint, r metrics.Result) {
	if e < metrics.NumEndpoints && r < metrics.NumResults {
		p.validate[e][r].Inc()
	}
}

func (p *promSink) KDFQueueWait(d time.Duration) { p.kdfWait.Observe(d.Seconds()) }

func (p *promSink) StoreCommit(d time.Duration) { p.commit.Observe(d.Seconds()) }

func (p *promSink) Route(pattern, method string) metrics.RouteObserver {
	return &promRoute{p: p, pattern: pattern, method: method, duration: p.duration.WithLabelValues(pattern, method)}
}

// commonCodes are the status codes a route keeps its counters of at hand;
// others are looked up in the vector.
var commonCodes = [...]int{200, 204, 400, 401, 403, 404, 405, 413, 429, 500, 503}

// promRoute is one route's series.
type promRoute struct {
	p               *promSink
	pattern, method string
	duration        prometheus.Observer
	codes           [len(commonCodes)]atomic.Pointer[prometheus.Counter]
}

func (r *promRoute) Observe(code int, d time.Duration) {
	r.duration.Observe(d.Seconds())
	r.counter(code).Inc()
}

// counter is the route's counter of code, made at its first use so that
// only the codes a route answers with become series.
func (r *promRoute) counter(code int) prometheus.Counter {
	i := -1
	for j, c := range commonCodes {
		if c == code {
			i = j
			break
		}
	}
	if i < 0 {
		return r.p.requests.WithLabelValues(r.pattern, r.method, strconv.Itoa(code))
	}
	if c := r.codes[i].Load(); c != nil {
		return *c
	}
	c := r.p.requests.WithLabelValues(r.pattern, r.method, strconv.Itoa(code))
	r.codes[i].Store(&c)
	return c
}

// tokenGauge is authsrv_tokens: the token count, read from the token
// indexes' counter when scraped, at most once per interval (a scrape in
// between gets the last value), and within a timeout.
type tokenGauge struct {
	count    func(ctx context.Context) (n int, known bool, err error)
	interval time.Duration
	timeout  time.Duration
	now      func() time.Time

	mu   sync.Mutex
	at   time.Time
	last float64
}

func (g *tokenGauge) value() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if !g.at.IsZero() && now.Sub(g.at) < g.interval {
		return g.last
	}
	g.at = now
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	if n, known, err := g.count(ctx); err == nil && known {
		g.last = float64(n)
	}
	return g.last
}

// promMetrics is the binary's Prometheus registry and the listener that
// serves it (-metrics-listen).
type promMetrics struct {
	reg  *prometheus.Registry
	sink *promSink
	ln   net.Listener
	srv  *http.Server

	closeOnce sync.Once
}

// listenMetrics binds addr for /metrics and builds the registry: the
// authsrv_* series and the Go runtime and process collectors. Binding
// before the server opens its store reports a bad address at once.
func listenMetrics(addr string) (*promMetrics, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	sink, err := newPromSink(reg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &promMetrics{reg: reg, sink: sink, ln: ln}, nil
}

// option makes the server report to the registry.
func (m *promMetrics) option() authsrv.Option { return authsrv.WithMetrics(m.sink) }

// handler serves the registry at /metrics (and nothing else): at most a
// few scrapes at once, each within a timeout.
func (m *promMetrics) handler(log zerolog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            promLogger{log},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	return mux
}

// serve adds the token gauge of s and serves the registry until close.
func (m *promMetrics) serve(s *authsrv.Server, log zerolog.Logger) error {
	g := &tokenGauge{count: s.Tokens().Count, interval: 5 * time.Second, timeout: 2 * time.Second, now: time.Now}
	if err := m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "authsrv_tokens",
		Help: "Tokens in the store (read at most every 5 seconds).",
	}, g.value)); err != nil {
		return err
	}
	m.srv = &http.Server{
		Handler:           m.handler(log),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
	go func() {
		if err := m.srv.Serve(m.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("component", "metrics").Msg("the metrics listener stopped")
		}
	}()
	return nil
}

// close stops the listener, letting scrapes in flight finish within ctx.
// Only the first call does anything.
func (m *promMetrics) close(ctx context.Context) {
	m.closeOnce.Do(func() {
		if m.srv == nil {
			_ = m.ln.Close()
			return
		}
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
		}
		if err := m.srv.Shutdown(ctx); err != nil {
			_ = m.srv.Close()
		}
	})
}

// promLogger sends promhttp's errors to the server's log.
type promLogger struct{ log zerolog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Error().Str("component", "metrics").Msg(fmt.Sprint(v...))
}
