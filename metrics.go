package authsrv

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/metrics"
	"github.com/authsrv/authsrv/validate"
)

// WithMetrics makes the server report its measurements to m: every
// validate decision (whoever asked: the HTTP API, a RADIUS gateway, a Go
// program), the HTTP requests per route (package server), the wait of PIN
// and password hashes for the KDF budget, and the commit latency of the
// store the server opens itself (a store given to WithStore reports
// through its own options). Without it nothing is measured and the hot
// paths pay nothing.
func WithMetrics(m metrics.Sink) Option {
	return func(c *config) error {
		if m == nil {
			return errors.New("metrics: nil sink")
		}
		c.metrics = m
		return nil
	}
}

// Metrics is the sink the server reports to (metrics.Nop without
// WithMetrics).
func (s *Server) Metrics() metrics.Sink {
	if metrics.IsNop(s.cfg.metrics) {
		return metrics.Nop{}
	}
	return s.cfg.metrics
}

// onCommit is the store's commit hook: nil without metrics.
func (c *config) onCommit() func(time.Duration) {
	if metrics.IsNop(c.metrics) {
		return nil
	}
	return c.metrics.StoreCommit
}

// onKDFWait is the hasher's wait hook: nil without metrics.
func (c *config) onKDFWait() func(time.Duration) {
	if metrics.IsNop(c.metrics) {
		return nil
	}
	return c.metrics.KDFQueueWait
}

// meterValidate counts the validator's decisions around h; without
// metrics it is h itself.
func (c *config) meterValidate(h validate.EventHook) validate.EventHook {
	if metrics.IsNop(c.metrics) {
		return h
	}
	return &meteredHook{next: h, sink: c.metrics}
}

// meteredHook counts each decision of the validator, then runs the event
// hook it wraps. The validator calls Post once per operation, after the
// decision and its audit entry, for every caller: the count is the same
// for an HTTP client, a RADIUS gateway and a Go program.
type meteredHook struct {
	next validate.EventHook
	sink metrics.Sink
}

func (h *meteredHook) Pre(ctx context.Context, name string, r *validate.Request, e audit.Entry) error {
	return h.next.Pre(ctx, name, r, e)
}

func (h *meteredHook) Post(ctx context.Context, name string, r validate.Request, e audit.Entry, res validate.Response, err error) error {
	h.sink.ValidateRequest(validateEndpoint(name, r.Caller.Action), validateResult(name, res, err))
	return h.next.Post(ctx, name, r, e, res, err)
}

// validateEndpoint is the kind of a validate request: its operation, and
// for a check the form a client asked for (samlcheck and radiuscheck are
// checks answered in another shape). The label is one of a fixed set,
// never the caller's text.
func validateEndpoint(name, action string) metrics.Endpoint {
	switch name {
	case validate.EventTrigger:
		return metrics.TriggerChallenge
	case validate.EventPoll:
		return metrics.PollTransaction
	}
	switch {
	case strings.Contains(action, "/validate/samlcheck"):
		return metrics.SAMLCheck
	case strings.Contains(action, "/validate/radiuscheck"):
		return metrics.RadiusCheck
	}
	return metrics.Check
}

// validateResult is the outcome of a validate request, as the audit's
// authentication column names it (a polled transaction still waiting
// counts as a challenge).
func validateResult(name string, res validate.Response, err error) metrics.Result {
	switch {
	case err != nil:
		return metrics.Error
	case name == validate.EventPoll:
		switch {
		case res.Value:
			return metrics.Accept
		case res.ChallengeStatus == "pending":
			return metrics.Challenge
		}
		return metrics.Reject
	case len(res.Challenges) > 0:
		return metrics.Challenge
	case res.Value:
		return metrics.Accept
	}
	return metrics.Reject
}
