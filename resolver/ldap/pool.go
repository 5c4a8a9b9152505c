package ldap

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	goldap "github.com/go-ldap/ldap/v3"
	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/netguard"
)

// Pool sizes and ages. Service connections are few and long-lived; user
// binds use their own short-lived connections.
const (
	maxOpen     = 10
	maxIdle     = 4
	maxIdleTime = 60 * time.Second
	maxLifetime = 10 * time.Minute
)

var (
	errClosed     = errors.New("the resolver is closed")
	errConnClosed = errors.New("the connection was closed")
	errBusy       = errors.New("all LDAP connections stayed busy until the deadline")
	longAgo       = time.Unix(1, 0)
)

// conn is one LDAP connection and the socket under it. Deadlines go on
// the socket: go-ldap's own timeout covers neither the TLS handshake nor
// a context, while a socket deadline ends every read and write at once.
type conn struct {
	lc      *goldap.Conn
	raw     net.Conn
	srv     int // index in config.servers
	created time.Time
	idle    time.Time
	broken  bool
}

func (c *conn) close() { _ = c.lc.Close() }

// run calls fn on the connection, ending it at deadline or when ctx is
// done. A connection that failed below LDAP (network, timeout,
// cancellation) is marked broken and must not be reused.
func (c *conn) run(ctx context.Context, deadline time.Time, fn func(*goldap.Conn) error) error {
	if c.lc.IsClosing() {
		c.broken = true
		return errConnClosed
	}
	_ = c.raw.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.raw.SetDeadline(longAgo) })
	err := fn(c.lc)
	if !stop() {
		c.broken = true
	}
	if err != nil && connBroken(err) {
		c.broken = true
	}
	if !c.broken {
		_ = c.raw.SetDeadline(time.Time{})
	}
	return err
}

// connBroken reports whether err came from the connection rather than
// from the directory's answer: go-ldap's client-side codes (200 and up),
// or plain errors such as "unable to read LDAP response packet".
func connBroken(err error) bool {
	var le *goldap.Error
	if errors.As(err, &le) {
		return le.ResultCode >= goldap.ErrorNetwork &&
			le.ResultCode != goldap.ErrorFilterCompile && le.ResultCode != goldap.ErrorEmptyPassword
	}
	return true
}

// resultCode is the LDAP result code of err, or -1.
func resultCode(err error) int {
	var le *goldap.Error
	if errors.As(err, &le) {
		return int(le.ResultCode)
	}
	return -1
}

// pool holds the bound service connections and the server list with each
// server's health.
type pool struct {
	cfg   *config
	tls   []*tls.Config // per server, nil for plain ones
	log   zerolog.Logger
	guard *netguard.Policy
	sem   chan struct{}
	mu    sync.Mutex
	idle  []*conn
	done  bool
	next  int
	down  []time.Time // when each server last failed; zero when healthy
}

func newPool(cfg *config, tc *tls.Config, log zerolog.Logger, dial *netguard.Policy) *pool {
	p := &pool{
		cfg:   cfg,
		log:   log,
		guard: dial,
		sem:   make(chan struct{}, maxOpen),
		down:  make([]time.Time, len(cfg.servers)),
		tls:   make([]*tls.Config, len(cfg.servers)),
	}
	for i, s := range cfg.servers {
		if tc != nil && (s.scheme == "ldaps" || cfg.startTLS) {
			c := tc.Clone()
			c.ServerName = s.host
			p.tls[i] = c
		}
	}
	return p
}

// do runs fn on a bound service connection. A pooled connection that
// turns out dead is replaced once by a new one. Errors are either the
// directory's answer (an *ldap.Error below 200) or connection failures.
func (p *pool) do(ctx context.Context, deadline time.Time, fn func(*goldap.Conn) error) error {
	fresh := false
	for {
		c, isNew, err := p.get(ctx, deadline, fresh)
		if err != nil {
			return err
		}
		err = c.run(ctx, deadline, fn)
		broken := c.broken
		if broken && isNew && ctx.Err() == nil {
			p.mark(c.srv, err)
		}
		p.put(c)
		if err == nil || !broken || isNew || ctx.Err() != nil || !time.Now().Before(deadline) {
			return err
		}
		fresh = true
	}
}

// get returns a bound connection: an idle one unless fresh, else a new
// one. The caller must put it back.
func (p *pool) get(ctx context.Context, deadline time.Time, fresh bool) (*conn, bool, error) {
	if err := p.acquire(ctx, deadline); err != nil {
		return nil, false, err
	}
	var stale []*conn
	var c *conn
	now := time.Now()
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		p.release()
		return nil, false, errClosed
	}
	if fresh {
		stale, p.idle = p.idle, nil
	}
	for len(p.idle) > 0 && c == nil {
		c = p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if c.lc.IsClosing() || now.Sub(c.idle) > maxIdleTime || now.Sub(c.created) > maxLifetime {
			stale = append(stale, c)
			c = nil
		}
	}
	p.mu.Unlock()
	for _, s := range stale {
		s.close()
	}
	if c != nil {
		return c, false, nil
	}
	c, err := p.connect(ctx, deadline, p.serviceAuth)
	if err != nil {
		p.release()
		return nil, false, err
	}
	return c, true, nil
}

// put returns c to the idle list, or closes it.
func (p *pool) put(c *conn) {
	p.mu.Lock()
	keep := !c.broken && !p.done && len(p.idle) < maxIdle && !c.lc.IsClosing()
	if keep {
		c.idle = time.Now()
		p.idle = append(p.idle, c)
	}
	p.mu.Unlock()
	if !keep {
		c.close()
	}
	p.release()
}

func (p *pool) acquire(ctx context.Context, deadline time.Time) error {
	select {
	case p.sem <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case p.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return errBusy
	}
}

func (p *pool) release() { <-p.sem }

// close closes the idle connections; connections in use are closed when
// they come back.
func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.done = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// order returns the servers to try, by strategy, with the ones that
// failed within SERVERPOOL_SKIP moved to the end (oldest failure first).
func (p *pool) order() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.cfg.servers)
	idx := make([]int, n)
	switch p.cfg.strategy {
	case random:
		idx = rand.Perm(n)
	case roundRobin:
		for i := range idx {
			idx[i] = (p.next + i) % n
		}
		p.next = (p.next + 1) % n
	default:
		for i := range idx {
			idx[i] = i
		}
	}
	now := time.Now()
	isDown := func(i int) bool { return !p.down[i].IsZero() && now.Sub(p.down[i]) < p.cfg.skip }
	slices.SortStableFunc(idx, func(a, b int) int {
		da, db := isDown(a), isDown(b)
		switch {
		case !da && !db:
			return 0
		case !da:
			return -1
		case !db:
			return 1
		}
		return p.down[a].Compare(p.down[b])
	})
	return idx
}

func (p *pool) mark(i int, err error) {
	p.mu.Lock()
	wasDown := !p.down[i].IsZero()
	if err != nil {
		p.down[i] = time.Now()
	} else {
		p.down[i] = time.Time{}
	}
	p.mu.Unlock()
	switch {
	case err != nil && !wasDown:
		p.log.Warn().Str("server", p.cfg.servers[i].url).Err(err).Msg("LDAP server failed")
	case err == nil && wasDown:
		p.log.Info().Str("server", p.cfg.servers[i].url).Msg("LDAP server answers again")
	}
}

// refusedError is the directory's refusal of a bind (wrong password,
// locked account): the other servers hold the same directory, so there
// is no failover.
type refusedError struct {
	url string
	err error
}

func (e *refusedError) Error() string { return "bind on " + e.url + ": " + e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// connect opens a connection and runs auth on it (a bind, or a probe),
// trying the servers in order. Each attempt gets an equal share of the
// time left, so that a server that accepts but never answers leaves time
// for the next one. A refused auth is a *refusedError.
func (p *pool) connect(ctx context.Context, deadline time.Time, auth func(*goldap.Conn) error) (*conn, error) {
	order := p.order()
	var errs []error
	for k, i := range order {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		attempt := time.Now().Add(left / time.Duration(len(order)-k))
		srv := &p.cfg.servers[i]
		c, err := p.dial(ctx, i, attempt)
		if err == nil && auth != nil {
			err = c.run(ctx, attempt, auth)
			if err != nil && !c.broken {
				c.close()
				p.mark(i, nil)
				return nil, &refusedError{url: srv.url, err: err}
			}
		}
		if err == nil {
			p.mark(i, nil)
			return c, nil
		}
		if c != nil {
			c.close()
		}
		p.mark(i, err)
		errs = append(errs, fmt.Errorf("%s: %w", srv.url, err))
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	} else if len(errs) == 0 {
		errs = append(errs, context.DeadlineExceeded)
	}
	return nil, errors.Join(errs...)
}

// serviceAuth binds as BINDDN; anonymous connections read the root DSE
// instead, so that a server that does not answer is noticed here too.
func (p *pool) serviceAuth(l *goldap.Conn) error {
	if p.cfg.anonymous {
		_, err := l.Search(&goldap.SearchRequest{Scope: goldap.ScopeBaseObject, SizeLimit: 1,
			Filter: "(objectClass=*)", Attributes: []string{"1.1"}})
		if err != nil && !connBroken(err) {
			return nil // the server answered; the root DSE is just not readable
		}
		return err
	}
	return l.Bind(p.cfg.bindDN, p.cfg.bindPW)
}

// dial connects to server i: TCP, then TLS for ldaps or StartTLS when
// configured, all before deadline.
func (p *pool) dial(ctx context.Context, i int, deadline time.Time) (*conn, error) {
	srv := &p.cfg.servers[i]
	d := net.Dialer{Deadline: deadline, ControlContext: p.guard.ControlContext}
	raw, err := d.DialContext(ctx, "tcp", srv.addr)
	if err != nil {
		return nil, err
	}
	nc, isTLS := raw, false
	if srv.scheme == "ldaps" {
		tc := tls.Client(raw, p.tls[i])
		_ = raw.SetDeadline(deadline)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("TLS: %w", err)
		}
		_ = raw.SetDeadline(time.Time{})
		nc, isTLS = tc, true
	}
	lc := goldap.NewConn(nc, isTLS)
	lc.Start()
	lc.SetTimeout(p.cfg.timeout)
	c := &conn{lc: lc, raw: raw, srv: i, created: time.Now()}
	if srv.scheme == "ldap" && p.cfg.startTLS {
		if err := c.run(ctx, deadline, func(l *goldap.Conn) error { return l.StartTLS(p.tls[i]) }); err != nil {
			c.close()
			return nil, fmt.Errorf("StartTLS: %w", err)
		}
	}
	return c, nil
}

// bindAs checks dn's password with a simple bind on a connection of its
// own. A refused bind is false; only connection failures are errors.
func (p *pool) bindAs(ctx context.Context, deadline time.Time, dn, password string) (bool, error) {
	if password == "" {
		return false, nil
	}
	c, err := p.connect(ctx, deadline, func(l *goldap.Conn) error { return l.Bind(dn, password) })
	if re, ok := errors.AsType[*refusedError](err); ok {
		p.log.Debug().Int("ldap_result", resultCode(re.err)).Msg("user bind refused")
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.close()
	return true, nil
}
