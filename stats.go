package authsrv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/authsrv/authsrv/monitoring"
)

// The statistics recorder: privacyIDEA's SimpleStats and EventCounter
// periodic tasks. Every interval it records the token numbers and the
// Counter event handler's counters as points of the monitoring series
// (GET /monitoring/...), in one store transaction, and once an hour it
// applies the series' retention.

// DefaultStatsInterval is how often the statistics are recorded.
const DefaultStatsInterval = 5 * time.Minute

// MinStatsInterval is the shortest interval WithStatsInterval accepts.
const MinStatsInterval = time.Minute

// statsPruneEvery is how often the recorder applies the retention.
const statsPruneEvery = time.Hour

// The SimpleStats keys.
const (
	StatsTotalTokens              = "total_tokens"
	StatsHardwareTokens           = "hardware_tokens"
	StatsSoftwareTokens           = "software_tokens"
	StatsUnassignedHardwareTokens = "unassigned_hardware_tokens"
	StatsAssignedTokens           = "assigned_tokens"
	StatsUserWithToken            = "user_with_token"
)

// statsConfig is the recorder's part of the options.
type statsConfig struct {
	interval  time.Duration
	retention monitoring.Retention
	// location is the zone of the monitoring dates that name none (nil:
	// the local time).
	location *time.Location
	// resetCounters takes the recorded values off the event counters.
	resetCounters bool
}

func defaultStatsConfig() statsConfig {
	return statsConfig{interval: DefaultStatsInterval, retention: monitoring.DefaultRetention()}
}

// WithStatsInterval sets how often Run records the statistics (the
// SimpleStats token numbers and the event counters); 0 turns the
// recording off. Default 5 minutes, at least a minute. Servers that
// share a store record once per interval between them.
func WithStatsInterval(d time.Duration) Option {
	return func(c *config) error {
		if d != 0 && d < MinStatsInterval {
			return fmt.Errorf("statistics interval %s: want 0 (off) or at least %s", d, MinStatsInterval)
		}
		c.stats.interval = d
		return nil
	}
}

// WithStatsRetention sets the age after which statistics points are
// deleted (0: no age limit; every key still keeps at most
// monitoring.DefaultStatsMaxPoints). Default two years; older points are
// thinned to one per hour after a week and one per day after 90 days.
func WithStatsRetention(maxAge time.Duration) Option {
	return func(c *config) error {
		if maxAge < 0 {
			return errors.New("statistics retention: negative maximum age")
		}
		c.stats.retention.MaxAge = maxAge
		return nil
	}
}

// WithStatsCounterReset makes the recorder take each event counter's
// recorded value off the counter after recording it (privacyIDEA's
// EventCounter task with reset_event_counter), so that each point is the
// count of one interval instead of a running total. The value recorded is
// subtracted rather than the counter set to 0, so that events counted
// between the reading and the reset are kept for the next interval.
func WithStatsCounterReset(reset bool) Option {
	return func(c *config) error {
		c.stats.resetCounters = reset
		return nil
	}
}

// WithLocation sets the zone of the dates an administrator gives without
// one (the start and end of the monitoring endpoints). Default: the
// local time of the process.
func WithLocation(loc *time.Location) Option {
	return func(c *config) error {
		if loc == nil {
			return errors.New("location: nil")
		}
		c.stats.location = loc
		return nil
	}
}

// Stats returns the statistics time series (what GET /monitoring/ reads;
// writes through it bypass rights and audit).
func (s *Server) Stats() *monitoring.Stats {
	return monitoring.NewStats(s.st, s.cfg.stats.retention)
}

// RecordStats records the statistics now: the SimpleStats keys
// (total_tokens, hardware_tokens, software_tokens,
// unassigned_hardware_tokens, assigned_tokens, user_with_token) and each
// counter of the Counter event handler under its own name, in one store
// transaction. Run calls it every interval; a program may call it at any
// time.
func (s *Server) RecordStats(ctx context.Context) error {
	_, err := s.recordStats(ctx, 0)
	return err
}

// recordStats records unless a node recorded less than minGap ago.
func (s *Server) recordStats(ctx context.Context, minGap time.Duration) (bool, error) {
	ts, err := s.tokens.Stats(ctx)
	if err != nil {
		return false, fmt.Errorf("token statistics: %w", err)
	}
	values := map[string]int64{
		StatsTotalTokens:              int64(ts.Total),
		StatsHardwareTokens:           int64(ts.Hardware),
		StatsSoftwareTokens:           int64(ts.Software),
		StatsUnassignedHardwareTokens: int64(ts.UnassignedHardware),
		StatsAssignedTokens:           int64(ts.Assigned),
		StatsUserWithToken:            int64(ts.UsersWithToken),
	}
	counters, err := s.events.Counters(ctx)
	if err != nil {
		return false, fmt.Errorf("event counters: %w", err)
	}
	copied := map[string]int64{}
	for name, v := range counters {
		if _, taken := values[name]; taken {
			s.cfg.log.Warn().Str("component", "monitoring").Str("counter", name).
				Msg("an event counter has the name of a token statistic and is not recorded")
			continue
		}
		if !monitoring.ValidStatsKey(name) {
			s.cfg.log.Warn().Str("component", "monitoring").Str("counter", name).
				Msg("an event counter's name cannot name a statistics key and is not recorded")
			continue
		}
		values[name] = v
		copied[name] = v
	}
	recorded, err := s.Stats().Record(ctx, s.cfg.now(), values, minGap)
	if err != nil || !recorded || !s.cfg.stats.resetCounters {
		return recorded, err
	}
	for name, v := range copied {
		if v == 0 {
			continue
		}
		if _, err := s.events.AddCounter(ctx, name, -v, v < 0); err != nil {
			return true, fmt.Errorf("resetting the event counter %q: %w", name, err)
		}
	}
	return true, nil
}

// runStats records the statistics every interval and applies their
// retention every hour, until ctx ends or the server closes.
func (s *Server) runStats(ctx context.Context) {
	every := s.cfg.stats.interval
	if every <= 0 {
		return
	}
	lg := s.cfg.log.With().Str("component", "monitoring").Logger()
	var pruned time.Time
	s.every(ctx, every, false, func(ctx context.Context) {
		if _, err := s.recordStats(ctx, every/2); err != nil && ctx.Err() == nil {
			lg.Error().Err(err).Msg("recording the statistics failed")
		}
		if now := s.cfg.now(); pruned.IsZero() || now.Sub(pruned) >= statsPruneEvery || now.Before(pruned) {
			pruned = now
			if n, err := s.Stats().Prune(ctx, now); err != nil && ctx.Err() == nil {
				lg.Error().Err(err).Msg("statistics retention failed")
			} else if n > 0 {
				lg.Info().Int("removed", n).Msg("statistics retention")
			}
		}
	})
}
