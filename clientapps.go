package authsrv

import (
	"context"
	"errors"
	"time"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/monitoring"
)

// Client applications: every /validate/check (samlcheck and radiuscheck
// included, and a Go program's Validator().Check) records its caller's
// User-Agent and address in memory once the check and its post event
// handlers are done; Run writes them to the store once a minute (at most
// one write per client per flush), and Close writes what is left. Ops.
// ClientApps lists them (GET /client/).

// clientRecorder is the Server's recorder.
type clientRecorder = monitoring.ClientRecorder

// clientAppsConfig are the recorder's options.
type clientAppsConfig struct {
	limit     int
	retention time.Duration
}

// WithClientAppLimit bounds the client applications (User-Agent and
// address) a node keeps in memory between two writes to the store
// (monitoring.DefaultClientLimit without it). Clients beyond it are not
// recorded, and a warning is logged once a minute while that happens.
func WithClientAppLimit(n int) Option {
	return func(c *config) error {
		if n <= 0 {
			return errors.New("client application limit: want a positive number")
		}
		c.clientApps.limit = n
		return nil
	}
}

// WithClientAppRetention is how long a client application that is not
// seen again stays listed (monitoring.DefaultClientRetention, 90 days,
// without it); older rows are removed from the store.
func WithClientAppRetention(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Hour {
			return errors.New("client application retention: want at least an hour")
		}
		c.clientApps.retention = d
		return nil
	}
}

// newClientApps builds the client application recorder.
func (s *Server) newClientApps() *monitoring.ClientRecorder {
	c := &s.cfg
	return monitoring.NewClientRecorder(monitoring.ClientConfig{Store: s.st, Node: c.nodeName, Now: c.now,
		Log: c.log, Limit: c.clientApps.limit, Retention: c.clientApps.retention})
}

// ClientApps is the client application recorder (its List bypasses the
// rights and the audit; Ops.ClientApps is the operation).
func (s *Server) ClientApps() *monitoring.ClientRecorder { return s.clients }

// recordClient notes the client of a finished validate check.
func (s *Server) recordClient(who caller.Caller) {
	s.clients.Record(who.UserAgent, who.Client)
}

// runClientApps writes the recorded client applications every
// monitoring.ClientFlushInterval until ctx ends or the server closes
// (Close writes the rest).
func (s *Server) runClientApps(ctx context.Context) {
	s.every(ctx, monitoring.ClientFlushInterval, false, s.flushClientApps)
}

// flushClientApps writes the client applications that changed.
func (s *Server) flushClientApps(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	w, d, err := s.clients.Flush(ctx)
	lg := s.cfg.log.With().Str("component", "monitoring").Logger()
	switch {
	case err != nil:
		lg.Error().Err(err).Msg("writing the client applications failed")
	case w > 0 || d > 0:
		lg.Debug().Int("written", w).Int("removed", d).Msg("client applications written")
	}
}
