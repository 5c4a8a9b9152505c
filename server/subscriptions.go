package server

import (
	"net/http"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/subscription"
)

// The subscriptions: /subscriptions/... (authsrv.Ops.Subscriptions and
// friends), all with the right managesubscription.

const rightManageSubscription = "managesubscription"

// subscriptionJSON is one row of GET /subscriptions/: the columns that
// are set, the dates as privacyIDEA sends datetimes, and the usage.
func subscriptionJSON(row authsrv.SubscriptionRow) map[string]any {
	out := map[string]any{
		"id":            row.ID,
		"date_from":     row.DateFrom.UTC().Format(http.TimeFormat),
		"date_till":     row.DateTill.UTC().Format(http.TimeFormat),
		"timedelta":     row.Timedelta,
		"active_tokens": row.ActiveTokens,
		"active_users":  row.ActiveUsers,
	}
	for _, name := range subscription.Fields {
		if name == "date_from" || name == "date_till" {
			continue
		}
		v, ok := row.Value(name)
		if !ok {
			continue
		}
		switch name {
		case "num_users":
			out[name] = *row.NumUsers
		case "num_tokens":
			out[name] = *row.NumTokens
		case "num_clients":
			out[name] = *row.NumClients
		default:
			out[name] = v
		}
	}
	if row.Signature != "" {
		out["signature"] = row.Signature
	}
	return out
}

// subscriptionStatusJSON is GET /subscriptions/status's list: the server
// entry, then one per client plugin.
func subscriptionStatusJSON(st authsrv.SubscriptionStatus) []map[string]any {
	out := make([]map[string]any, 0, len(st.Entries))
	for i, e := range st.Entries {
		m := map[string]any{
			"application":  e.Application,
			"in_use":       e.Subscription != nil,
			"subscription": string(e.State),
			"last_seen":    nil,
			"date_till":    nil,
			"days_left":    nil,
		}
		if e.Subscription != nil {
			m["date_till"] = e.Subscription.DateTill.UTC().Format(http.TimeFormat)
			m["days_left"] = e.DaysLeft
		}
		if e.Warning != "" {
			m["warning"] = e.Warning
		}
		if !e.LastSeen.IsZero() {
			m["in_use"] = true
			m["last_seen"] = e.LastSeen.UTC().Format(http.TimeFormat)
		}
		if i == 0 {
			m["is_server"] = true
			m["in_use"] = true
			m["versions"] = []string{st.Version}
			m["current_version"] = nil
			m["current_version_date"] = nil
			m["current_version_url"] = nil
			m["active_tokens"] = st.Usage.ActiveTokens
			m["active_users"] = st.Usage.ActiveUsers
		}
		out = append(out, m)
	}
	return out
}

// getSubscriptions is GET /subscriptions/[{application}]: the stored
// subscriptions (those of application when given), or with application
// "status" the dashboard's status list.
func getSubscriptions(c *call) (answer, error) {
	app, err := c.p.str("application")
	if err != nil {
		return answer{}, c.refused(rightManageSubscription, err)
	}
	if app == "status" {
		st, err := c.a.s.Ops().SubscriptionStatus(c.ctx, c.caller())
		c.ran()
		if err != nil {
			return answer{}, err
		}
		return answer{value: subscriptionStatusJSON(st)}, nil
	}
	rows, err := c.a.s.Ops().Subscriptions(c.ctx, c.caller(), app)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := make([]map[string]any, 0, len(rows))
	for _, row := range rows {
		out = append(out, subscriptionJSON(row))
	}
	return answer{value: out}, nil
}

// postSubscription is POST /subscriptions/: the multipart file "file", a
// signed subscription file, replaces the subscription of its
// application; value true.
func postSubscription(c *call) (answer, error) {
	data, _, ok := c.p.file("file")
	if !ok {
		s, err := c.p.str("file")
		if err != nil || s == "" {
			return answer{}, c.refused(rightManageSubscription, apierr.MissingParameter("file"))
		}
		data = []byte(s)
	}
	_, err := c.a.s.Ops().AddSubscription(c.ctx, c.caller(), data)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: true}, nil
}

// deleteSubscription is DELETE /subscriptions/{application}: value the
// deleted row's id, or -1 when there was none.
func deleteSubscription(c *call) (answer, error) {
	app, err := c.p.required("application")
	if err != nil {
		return answer{}, c.refused(rightManageSubscription, err)
	}
	id, err := c.a.s.Ops().DeleteSubscription(c.ctx, c.caller(), app)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: id}, nil
}
