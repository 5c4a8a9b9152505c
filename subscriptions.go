package authsrv

import (
	"context"
	"crypto"
	"fmt"
	"time"

	"github.com/authsrv/authsrv/subscription"
	"github.com/authsrv/authsrv/token"
)

// subscriptionCheckEvery is how often Run compares the subscriptions with
// what is in use and logs a warning for each expired or exceeded one: at
// most once an hour each.
const subscriptionCheckEvery = time.Hour

// WithSubscriptionKey sets the public key (Ed25519, or RSA of at least
// 2048 bits) that uploaded subscription files must be signed with (see
// package subscription). Without it every upload is refused.
func WithSubscriptionKey(key crypto.PublicKey) Option {
	return func(c *config) error {
		if err := subscription.CheckKey(key); err != nil {
			return err
		}
		c.subscriptionKey = key
		return nil
	}
}

// Subscriptions returns the subscription store (no rights, no audit: see
// Ops for those).
func (s *Server) Subscriptions() *subscription.Service {
	return subscription.New(subscription.Config{Store: s.st, Key: s.cfg.subscriptionKey})
}

// SubscriptionUsage counts what the subscriptions limit: the active
// tokens that have an owner (from the token list indexes), and the users
// (resolver and user id) who own an active token (token.Service.Stats).
func (s *Server) SubscriptionUsage(ctx context.Context) (subscription.Usage, error) {
	yes := true
	p, err := s.tokens.List(ctx, token.Filter{Active: &yes, Assigned: &yes}, "serial", false, 1, 1)
	if err != nil {
		return subscription.Usage{}, fmt.Errorf("counting the active tokens: %w", err)
	}
	st, err := s.tokens.Stats(ctx)
	if err != nil {
		return subscription.Usage{}, fmt.Errorf("counting the users with a token: %w", err)
	}
	return subscription.Usage{ActiveTokens: p.Count, ActiveUsers: st.UsersWithToken}, nil
}

// SubscriptionStatus is the dashboard's view (GET /subscriptions/status).
type SubscriptionStatus struct {
	// Entries: the server first, then one per client plugin.
	Entries []subscription.Status
	// Usage is what the subscriptions were compared with.
	Usage subscription.Usage
	// Version is this server's version.
	Version string
}

// subscriptionStatus compares the stored subscriptions with what is in
// use.
func (s *Server) subscriptionStatus(ctx context.Context) (SubscriptionStatus, error) {
	subs, err := s.Subscriptions().List(ctx, "")
	if err != nil {
		return SubscriptionStatus{}, err
	}
	u, err := s.SubscriptionUsage(ctx)
	if err != nil {
		return SubscriptionStatus{}, err
	}
	entries := subscription.Overview(subs, u, s.cfg.now())
	if s.clients != nil {
		apps, err := s.clients.List(ctx)
		if err != nil {
			return SubscriptionStatus{}, err
		}
		seen := map[string]time.Time{}
		for typ, list := range apps {
			p := subscription.PluginOf(typ)
			if p == "" {
				continue
			}
			for _, a := range list {
				if a.LastSeen.After(seen[p]) {
					seen[p] = a.LastSeen
				}
			}
		}
		subscription.Seen(entries, seen)
	}
	return SubscriptionStatus{Entries: entries, Usage: u, Version: Version}, nil
}

// checkSubscriptions logs a warning for every stored subscription that
// has expired or is exceeded. It never stops anything: authentication
// goes on whatever the subscriptions say.
func (s *Server) checkSubscriptions(ctx context.Context) {
	lg := s.cfg.log.With().Str("component", "subscription").Logger()
	subs, err := s.Subscriptions().List(ctx, "")
	if err != nil || len(subs) == 0 {
		if err != nil && ctx.Err() == nil {
			lg.Error().Err(err).Msg("reading the subscriptions failed")
		}
		return
	}
	u, err := s.SubscriptionUsage(ctx)
	if err != nil {
		if ctx.Err() == nil {
			lg.Error().Err(err).Msg("counting the tokens in use failed")
		}
		return
	}
	now := s.cfg.now()
	for i := range subs {
		st := subscription.Evaluate(subs[i].Application, &subs[i], u, now)
		if st.Warning != "" {
			lg.Warn().Str("application", subs[i].Application).Str("state", string(st.State)).
				Int("active_users", u.ActiveUsers).Int("active_tokens", u.ActiveTokens).Msg(st.Warning)
		}
	}
}

// runSubscriptionCheck runs checkSubscriptions at once and then every
// subscriptionCheckEvery, until ctx ends or the server closes.
func (s *Server) runSubscriptionCheck(ctx context.Context) {
	s.every(ctx, subscriptionCheckEvery, true, s.checkSubscriptions)
}
