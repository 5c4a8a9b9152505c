package server

import (
	"encoding/json"
	"time"

	"github.com/authsrv/authsrv/monitoring"
)

// The statistics: /monitoring/... (authsrv.Ops.MonitoringKeys and
// friends).

// monitoringWindow decodes the optional start and end parameters.
func monitoringWindow(c *call) (start, end time.Time, err error) {
	for _, w := range []struct {
		name string
		to   *time.Time
	}{{"start", &start}, {"end", &end}} {
		v, err := c.p.str(w.name)
		if err != nil {
			return start, end, err
		}
		if v == "" {
			continue
		}
		if *w.to, err = c.a.s.Ops().MonitoringDate(w.name, v); err != nil {
			return start, end, err
		}
	}
	return start, end, nil
}

// pointsJSON is the answer's form of a series: [[time, value], ...].
func pointsJSON(ps []monitoring.Point) [][2]any {
	out := make([][2]any, 0, len(ps))
	for _, p := range ps {
		out = append(out, [2]any{monitoring.FormatTime(p.Time), p.Value})
	}
	return out
}

// getMonitoring is GET /monitoring/[{stats_key}]: the keys, or the points
// of one key in the window start..end.
func getMonitoring(c *call) (answer, error) {
	key, err := c.p.str("stats_key")
	if err != nil {
		return answer{}, c.refused("statistics_read", err)
	}
	if key == "" {
		keys, err := c.a.s.Ops().MonitoringKeys(c.ctx, c.caller())
		c.ran()
		return answer{value: keys}, err
	}
	start, end, err := monitoringWindow(c)
	if err != nil {
		return answer{}, c.refused("statistics_read", err)
	}
	ps, err := c.a.s.Ops().MonitoringValues(c.ctx, c.caller(), key, start, end)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: pointsJSON(ps)}, nil
}

// lastNone is the value of /last for a key without points: privacyIDEA
// answers null there (and no client of spec/real-clients.md reads it).
var lastNone = json.RawMessage("null")

// getMonitoringLast is GET /monitoring/{stats_key}/last: the newest value,
// or null.
func getMonitoringLast(c *call) (answer, error) {
	key, err := c.p.required("stats_key")
	if err != nil {
		return answer{}, c.refused("statistics_read", err)
	}
	v, ok, err := c.a.s.Ops().MonitoringLast(c.ctx, c.caller(), key)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	if !ok {
		return answer{value: lastNone}, nil
	}
	return answer{value: v}, nil
}

// deleteMonitoring is DELETE /monitoring/{stats_key}: the number of points
// deleted in the window start..end. A date that does not parse deletes
// nothing.
func deleteMonitoring(c *call) (answer, error) {
	key, err := c.p.required("stats_key")
	if err != nil {
		return answer{}, c.refused("statistics_delete", err)
	}
	start, end, err := monitoringWindow(c)
	if err != nil {
		return answer{}, c.refused("statistics_delete", err)
	}
	n, err := c.a.s.Ops().DeleteMonitoring(c.ctx, c.caller(), key, start, end)
	c.ran()
	return answer{value: n}, err
}
