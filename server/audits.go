package server

import (
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/policy"
)

// auditParams are the GET /audit/ parameters that are not column filters.
// sortname, rp, query and qtype are sent by privacyideaadm's "audit list"
// (old flexigrid names); privacyIDEA ignores them, and so do we.
var auditParams = []string{"timelimit", "page", "page_size", "sortorder", "csvfile", "sortname", "rp", "query", "qtype"}

// auditQuery builds the query of GET /audit/ and its CSV download: column
// filters, timelimit, paging and order, narrowed by the caller's
// auditlog_age and hide_audit_columns policies; a user sees only its own
// entries.
func (c *call) auditQuery() (audit.Query, error) {
	q := audit.Query{Filters: map[string]string{}}
	for _, k := range c.p.keys() {
		if slices.Contains(auditParams, k) {
			continue
		}
		v, err := c.p.str(k)
		if err != nil {
			return q, err
		}
		if v != "" {
			q.Filters[k] = v
		}
	}
	now := c.a.s.Now()
	if tl, err := c.p.str("timelimit"); err != nil {
		return q, err
	} else if tl != "" {
		d, err := audit.ParseTimelimit(tl)
		if err != nil {
			return q, err
		}
		q.Since = now.Add(-d)
	}
	var err error
	if q.Page, err = c.p.integer("page", 1); err != nil {
		return q, err
	}
	if q.PageSize, err = c.p.integer("page_size", 15); err != nil {
		return q, err
	}
	order, err := c.p.str("sortorder")
	if err != nil {
		return q, err
	}
	q.Ascending = strings.EqualFold(order, "asc")

	if c.who.Role == roleUser {
		q.Filters["user"], q.Filters["realm"] = c.who.Username, c.who.Realm
	}
	pq := c.policyQuery("auditlog_age")
	pq.User, pq.Realm, pq.Resolver = nil, nil, nil
	if c.who.Role == roleUser {
		pq.User, pq.Realm = policy.Str(c.who.Username), policy.Str(c.who.Realm)
	}
	ages, err := c.a.s.Policies().Values(c.ctx, pq, true, false)
	if err != nil {
		return q, err
	}
	for v, names := range ages {
		c.policies = append(c.policies, names...)
		d, err := audit.ParseTimelimit(v)
		if err != nil {
			continue
		}
		if since := now.Add(-d); since.After(q.Since) {
			q.Since = since
		}
	}
	pq.Action = "hide_audit_columns"
	hide, err := c.a.s.Policies().Values(c.ctx, pq, false, false)
	if err != nil {
		return q, err
	}
	for col, names := range hide {
		c.policies = append(c.policies, names...)
		q.Hide = append(q.Hide, col)
	}
	slices.Sort(q.Hide)
	return q, nil
}

// getAudit is GET /audit/.
func getAudit(c *call) (answer, error) {
	if err := c.authorize("auditlog"); err != nil {
		return answer{}, err
	}
	q, err := c.auditQuery()
	if err != nil {
		return answer{}, err
	}
	res, err := c.a.s.Audit().Search(c.ctx, q)
	if err != nil {
		return answer{}, err
	}
	rows := make([]any, len(res.Rows))
	for i, r := range res.Rows {
		rows[i] = map[string]any(r)
	}
	v := map[string]any{"auditcolumns": audit.Columns(), "auditdata": rows, "count": res.Count, "current": res.Current}
	if res.Next > 0 {
		v["next"] = res.Next
	}
	if res.Prev > 0 {
		v["prev"] = res.Prev
	}
	return answer{value: v}, nil
}

// getAuditCSV is GET /audit/{name}.csv: every matching entry as a CSV
// download, streamed.
func getAuditCSV(c *call) (answer, error) {
	name, _ := c.p.str("csvfile")
	if !strings.HasSuffix(name, ".csv") {
		return answer{}, apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server.")
	}
	if err := c.authorize("auditlog_download"); err != nil {
		return answer{}, err
	}
	q, err := c.auditQuery()
	if err != nil {
		return answer{}, err
	}
	// Check the query before the first byte goes out.
	q.PageSize = 1
	if _, err := c.a.s.Audit().Search(c.ctx, q); err != nil {
		return answer{}, err
	}
	return answer{raw: func(w http.ResponseWriter) {
		h := w.Header()
		h.Set("Content-Type", "text/csv; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": safeFilename(name)}))
		w.WriteHeader(http.StatusOK)
		ctx := c.r.Context()
		_ = audit.WriteCSV(w, func(fn func(audit.Row) error) error { return c.a.s.Audit().Each(ctx, q, fn) })
	}}, nil
}
