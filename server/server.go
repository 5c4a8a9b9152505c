// Package server mounts authsrv's privacyIDEA-compatible HTTP API on a
// Server: the routes (all in routes.go), the parameter decoder, the
// envelope, the JSON web tokens of /auth and the one rights check.
//
// Package server sits on floor 6: it imports the root package and the
// subsystems; nothing but cmd/ and examples/ imports it.
package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"
	"github.com/rs/zerolog/hlog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/policy"
)

// Option tunes the handler.
type Option func(*api)

// WithBodyLimits sets the largest request bodies, in bytes: for /auth and
// /validate/*, and for everything else.
func WithBodyLimits(auth, admin int64) Option {
	return func(a *api) {
		if auth > 0 {
			a.limitAuth = auth
		}
		if admin > 0 {
			a.limitAdmin = admin
		}
	}
}

type api struct {
	s          *authsrv.Server
	router     *httprouter.Router
	seq        atomic.Int64
	limitAuth  int64
	limitAdmin int64
	// endpoints lists every registered route, for the route tests and the
	// rights list of /auth.
	endpoints []routeInfo
	// innerActions are admin actions handlers check themselves (on routes
	// shared by several roles).
	innerActions []string
}

type routeInfo struct {
	method, path string
	access       access
	action       string
}

// New returns the HTTP API of s.
func New(s *authsrv.Server, opts ...Option) http.Handler {
	a := newAPI(s, opts...)
	return a.middleware(a.router)
}

func newAPI(s *authsrv.Server, opts ...Option) *api {
	a := &api{s: s, limitAuth: bodyLimitAuth, limitAdmin: bodyLimitAdmin}
	for _, o := range opts {
		o(a)
	}
	r := httprouter.New()
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		a.writeAnonError(w, req, apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server."))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		a.writeAnonError(w, req, apierr.New(apierr.Method, fmt.Sprintf("The method %s is not allowed for this path.", req.Method)))
	})
	a.router = r
	a.routes()
	return a
}

// HTTPServer returns an http.Server for h with the timeouts every listener
// of ours has: slow or idle clients cannot hold connections open. Every
// request's context ends a margin before the write deadline (see
// requestContext), so that a long operation stops in time to answer.
func HTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// writeMargin is how long before the connection's write deadline a
// request's context ends: the time left to write the audit entry and the
// answer after an operation stopped at its deadline.
func writeMargin(writeTimeout time.Duration) time.Duration {
	return min(writeTimeout/5, 5*time.Second)
}

// requestContext is r's context with the deadline of the answer: the
// write deadline of the http.Server that serves r (its WriteTimeout, which
// counts from the end of the request's header, a moment before start)
// less writeMargin. Operations honour it: a resolver test gives up, an
// import stops between batches and reports what it did, and the client
// gets that answer instead of a cut connection. Without a WriteTimeout
// (httptest, the control socket) there is no deadline.
func requestContext(r *http.Request, start time.Time) (context.Context, context.CancelFunc) {
	hs, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if hs == nil || hs.WriteTimeout <= 0 {
		return r.Context(), func() {}
	}
	return context.WithDeadline(r.Context(), start.Add(hs.WriteTimeout-writeMargin(hs.WriteTimeout)))
}

// overtime is the answer to an error caused by the request's own deadline
// (an operation that does not report its deadline itself): a clear
// refusal instead of a generic server error.
func overtime(ctx context.Context, err error) error {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	if _, ok := errors.AsType[*apierr.Error](err); ok {
		return err
	}
	return apierr.New(apierr.Busy, "The request did not finish in the time the server gives it.").Wrap(err)
}

// middleware wraps every request: a logger with a request id in the
// context, the access log, and panic recovery.
func (a *api) middleware(next http.Handler) http.Handler {
	h := a.recoverer(next)
	h = hlog.AccessHandler(func(r *http.Request, status, size int, d time.Duration) {
		// The path only: query strings of /validate and /auth carry
		// passwords.
		hlog.FromRequest(r).Info().
			Str("method", r.Method).
			Str("path", r.URL.Path).
			Int("status", status).
			Int("size", size).
			Float64("duration_ms", float64(d.Microseconds())/1000).
			Str("client", clientIP(r).String()).
			Msg("request")
	})(h)
	h = hlog.RequestIDHandler("request_id", "Request-Id")(h)
	return hlog.NewHandler(a.s.Logger().With().Str("component", "http").Logger())(h)
}

func (a *api) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				zerolog.Ctx(r.Context()).Error().
					Str("panic", fmt.Sprint(v)).
					Bytes("stack", debug.Stack()).
					Msg("handler panicked")
				a.writeAnonError(w, r, fmt.Errorf("panic: %v", v))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// clientIP is the request's client: the address withClient determined
// (OverrideAuthorizationClient, clientip.go), else the TCP peer with
// IPv4-mapped addresses unmapped.
func clientIP(r *http.Request) netip.Addr {
	if ip, ok := r.Context().Value(clientKey{}).(netip.Addr); ok {
		return ip
	}
	return peerIP(r)
}

// access says who may call an endpoint.
type access int

const (
	// public endpoints need no token (health, /auth, /validate/check).
	public access = iota
	// anyRole endpoints need a valid token of any role.
	anyRole
	// adminRole endpoints need an admin token.
	adminRole
)

func (x access) String() string {
	return [...]string{"public", "any role", "admin"}[x]
}

// endpoint describes one route's handler.
type endpoint struct {
	access access
	// action is the right the handler checks (admin scope), "" for none.
	action string
	// auth marks authentication-type endpoints (envelope id 2).
	auth bool
	// authLimit selects the small body limit of /auth and /validate.
	authLimit bool
	fn        func(c *call) (answer, error)
}

// call is one request as handlers see it.
type call struct {
	ctx     context.Context
	r       *http.Request
	w       http.ResponseWriter
	p       *params
	who     *identity
	a       *api
	started time.Time
	// entry collects what handlers know for the audit (serial, user,
	// info, ...); the middleware fills the rest.
	entry audit.Entry
	// policies are the names of the policies that decided.
	policies []string
	// recorded is set when a library operation (authsrv.Ops, the
	// validator) wrote the request's audit entry itself; the wrapper then
	// writes none.
	recorded bool
	// x is the request's exchange with the library's event handlers (the
	// parameters they read, the answer a post handler changed); set once
	// the parameters are decoded.
	x authsrv.Exchange
	// snap is the request's policy snapshot once taken (policySnapshot):
	// the API key check, the validator and the envelope's hardening
	// share it.
	snap *policy.Snapshot
}

// handle registers ep for method and path, and for the path with the
// trailing slash toggled: privacyIDEA clients use both forms.
func (a *api) handle(method, path string, ep endpoint) {
	h := a.metered(method, path, a.wrap(ep))
	a.router.Handle(method, path, h)
	a.endpoints = append(a.endpoints, routeInfo{method, path, ep.access, ep.action})
	alt := strings.TrimSuffix(path, "/")
	if alt == path {
		alt = path + "/"
	}
	if alt != "" && !strings.Contains(path, "*") {
		a.router.Handle(method, alt, h)
	}
}

func (a *api) wrap(ep endpoint) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		ctx, cancel := requestContext(r, time.Now())
		defer cancel()
		c := &call{ctx: ctx, r: r, w: w, a: a, started: a.s.Now()}
		ans, err := a.serve(c, ep, ps)
		if c.x.Response != nil && ans.raw == nil {
			ans, err = a.exchanged(c.x.Response, ans.auth || ep.auth), nil
		}
		err = overtime(ctx, err)
		if err == nil && ans.raw == nil {
			ans.auth = ans.auth || ep.auth
		}
		// The audit entry is committed before the client sees an answer:
		// an answer a client got is always in the audit.
		if aerr := a.audit(c, ans, err); aerr != nil {
			zerolog.Ctx(r.Context()).Error().Err(aerr).Msg("audit write failed")
			err = apierr.New(apierr.Server, "Internal server error.")
		}
		switch {
		case err != nil:
			a.writeErrorAs(w, r, err, c.hardening(err))
		case ans.raw != nil:
			ans.raw(w)
		default:
			a.writeAnswerAs(w, ans, c.hardening(nil))
		}
	}
}

// serve authenticates, decodes, checks the endpoint's right and runs it.
func (a *api) serve(c *call, ep endpoint, ps httprouter.Params) (answer, error) {
	limit := a.limitAdmin
	if ep.authLimit {
		limit = a.limitAuth
	}
	c.r = a.withClient(c.r, "")
	if ep.access != public {
		who, err := a.authenticate(c.r)
		if errors.Is(err, errValidateRole) && ep.access == adminRole {
			err = errWrongRole
		}
		if err != nil {
			return answer{}, err
		}
		c.who = who
		if ep.access == adminRole && who.Role != roleAdmin {
			return answer{}, errWrongRole
		}
		l := zerolog.Ctx(c.ctx).With().Str("admin", who.Username).Str("role", who.Role).Logger()
		c.ctx = l.WithContext(c.ctx)
	}
	p, err := decodeParams(c.r, ps, limit)
	if err != nil {
		return answer{}, err
	}
	c.p = p
	if v, _ := p.str("client"); v != "" && clientParamPath(c.r.URL.Path) {
		c.r = a.withClient(c.r, v)
	}
	c.x = authsrv.Exchange{Method: c.r.Method, Path: c.r.URL.Path, Params: p.values}
	c.ctx = authsrv.WithExchange(c.ctx, &c.x)
	if ep.action != "" {
		if err := c.authorize(ep.action); err != nil {
			return answer{}, err
		}
	}
	return ep.fn(c)
}
