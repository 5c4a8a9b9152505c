package server

import (
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/audit"
)

// auditParams are the GET /audit/ parameters that are not column filters.
// sortname, rp, query and qtype are sent by privacyideaadm's "audit list"
// (old flexigrid names); privacyIDEA ignores them, and so do we.
var auditParams = []string{"timelimit", "page", "page_size", "sortorder", "csvfile", "sortname", "rp", "query", "qtype"}

// auditQuery builds the query of GET /audit/ and its CSV download: column
// filters, timelimit, paging and order. The library narrows it by the
// caller's auditlog_age and hide_audit_columns policies, and to a user's
// own entries.
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
	if tl, err := c.p.str("timelimit"); err != nil {
		return q, err
	} else if tl != "" {
		d, err := audit.ParseTimelimit(tl)
		if err != nil {
			return q, err
		}
		q.Since = c.a.s.Now().Add(-d)
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
	return q, nil
}

// getAudit is GET /audit/ (authsrv.Ops.SearchAudit).
func getAudit(c *call) (answer, error) {
	q, err := c.auditQuery()
	if err != nil {
		return answer{}, c.refused("auditlog", err)
	}
	res, err := c.a.s.Ops().SearchAudit(c.ctx, c.caller(), q)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	rows := make([]any, len(res.Rows))
	for i, r := range res.Rows {
		rows[i] = map[string]any(r)
	}
	v := map[string]any{"auditcolumns": audit.Columns(), "auditdata": rows, "count": res.Count, "current": res.Current,
		"prev": pageOrNull(res.Prev), "next": pageOrNull(res.Next)}
	return answer{value: v}, nil
}

// getAuditCSV is GET /audit/{name}.csv (authsrv.Ops.DownloadAudit): every
// matching entry as a CSV download, streamed.
func getAuditCSV(c *call) (answer, error) {
	name, _ := c.p.str("csvfile")
	if !strings.HasSuffix(name, ".csv") {
		return answer{}, apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server.")
	}
	q, err := c.auditQuery()
	if err != nil {
		return answer{}, c.refused("auditlog_download", err)
	}
	rows, err := c.a.s.Ops().DownloadAudit(c.ctx, c.caller(), q)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{raw: func(w http.ResponseWriter) {
		h := w.Header()
		h.Set("Content-Type", "text/csv; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": safeFilename(name)}))
		w.WriteHeader(http.StatusOK)
		ctx := c.r.Context()
		_ = audit.WriteCSV(w, func(fn func(audit.Row) error) error { return rows(ctx, fn) })
	}}, nil
}
