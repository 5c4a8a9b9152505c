package authsrv

import (
	"context"
	"time"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/monitoring"
)

// Rights of the statistics (admin scope).
const (
	rightStatisticsRead   = "statistics_read"
	rightStatisticsDelete = "statistics_delete"
)

// MonitoringDate parses the start or end parameter (name) of the
// statistics reads and DELETE: an ISO-like date with or without seconds,
// fraction and zone offset ("2010-12-31 22:00+0200",
// "2026-05-01T12:00:00Z") or the legacy "DD/MM/YY hh:mm"; one without a
// zone is in the server's location (WithLocation). A value that does not
// parse is a parameter error that names the parameter.
func (o *Ops) MonitoringDate(name, value string) (time.Time, error) {
	return monitoring.ParseDate(name, value, o.s.cfg.stats.location, o.s.cfg.now())
}

// MonitoringKeys lists the statistics keys that have points (right
// statistics_read, event get_statistics).
func (o *Ops) MonitoringKeys(ctx context.Context, who caller.Caller) ([]string, error) {
	var out []string
	err := o.readConfig(ctx, who, "get_statistics", "GET /monitoring/", rightStatisticsRead, Target{},
		func(ctx context.Context, r *opRun) error {
			var err error
			out, err = o.s.Stats().Keys(ctx)
			return err
		})
	return out, err
}

// MonitoringValues returns the points of key from start to end (both
// included; a zero time leaves that side open), oldest first; none for
// an unknown key (right statistics_read, event get_statistics).
func (o *Ops) MonitoringValues(ctx context.Context, who caller.Caller, key string, start, end time.Time) ([]monitoring.Point, error) {
	var out []monitoring.Point
	err := o.readConfig(ctx, who, "get_statistics", "GET /monitoring/"+key, rightStatisticsRead, Target{},
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text("key: "+key+windowInfo(start, end), 512)
			var err error
			out, err = o.s.Stats().Range(ctx, key, start, end)
			return err
		})
	return out, err
}

// MonitoringLast returns the newest value of key; ok is false when the
// key has none (right statistics_read, event get_statistics_last).
func (o *Ops) MonitoringLast(ctx context.Context, who caller.Caller, key string) (value int64, ok bool, err error) {
	err = o.readConfig(ctx, who, "get_statistics_last", "GET /monitoring/"+key+"/last", rightStatisticsRead, Target{},
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text("key: "+key, 512)
			p, found, err := o.s.Stats().Last(ctx, key)
			value, ok = p.Value, found
			return err
		})
	return value, ok, err
}

// DeleteMonitoring deletes the points of key from start to end (both
// included; a zero time leaves that side open) and returns how many it
// deleted, with the audit entry in the same transaction (right
// statistics_delete, event delete_statistics).
func (o *Ops) DeleteMonitoring(ctx context.Context, who caller.Caller, key string, start, end time.Time) (int, error) {
	var n int
	err := o.adminOnlyOp(ctx, who, "delete_statistics", "DELETE /monitoring/"+key, rightStatisticsDelete,
		func(ctx context.Context, r *opRun) error {
			r.Entry.Info = audit.Text("key: "+key+windowInfo(start, end), 512)
			var err error
			n, err = o.s.Stats().Delete(ctx, key, start, end, r.Audit)
			if err == nil {
				r.respond(n, nil)
			}
			return err
		})
	return n, err
}

// windowInfo describes a time window for the audit's info column.
func windowInfo(start, end time.Time) string {
	s := ""
	if !start.IsZero() {
		s += ", start: " + monitoring.FormatTime(start)
	}
	if !end.IsZero() {
		s += ", end: " + monitoring.FormatTime(end)
	}
	return s
}
