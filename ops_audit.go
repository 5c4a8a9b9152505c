package authsrv

import (
	"context"
	"maps"
	"slices"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
)

// Rights of the audit reads (admin and user scope).
const (
	rightAuditLog      = "auditlog"
	rightAuditDownload = "auditlog_download"
)

// auditTarget is what an administrator's audit right is checked against:
// the user, realm and resolver the query filters by.
func auditTarget(who caller.Caller, q audit.Query) Target {
	if who.Role == caller.User {
		return Target{}
	}
	return Target{User: q.Filters["user"], Realm: q.Filters["realm"], Resolver: q.Filters["resolver"]}
}

// auditQuery narrows q for who: a user sees only its own entries;
// auditlog_age moves the start forward, hide_audit_columns hides columns.
func (o *Ops) auditQuery(ctx context.Context, who caller.Caller, r *opRun, q audit.Query) (audit.Query, error) {
	q.Filters = maps.Clone(q.Filters)
	if q.Filters == nil {
		q.Filters = map[string]string{}
	}
	q.Hide = slices.Clone(q.Hide)
	if who.Role == caller.User {
		q.Filters["user"], q.Filters["realm"] = who.Name, who.Realm
	}
	if who.Trusted() {
		return q, nil
	}
	now := o.s.cfg.now()
	pq := o.Query(ctx, who, "auditlog_age", Target{})
	ages, err := o.s.policies.Values(ctx, pq, true, false)
	if err != nil {
		return q, err
	}
	for v, names := range ages {
		r.note(names...)
		d, err := audit.ParseTimelimit(v)
		if err != nil {
			continue
		}
		if since := now.Add(-d); since.After(q.Since) {
			q.Since = since
		}
	}
	pq.Action = "hide_audit_columns"
	hide, err := o.s.policies.Values(ctx, pq, false, false)
	if err != nil {
		return q, err
	}
	for col, names := range hide {
		r.note(names...)
		q.Hide = append(q.Hide, col)
	}
	slices.Sort(q.Hide)
	q.Hide = slices.Compact(q.Hide)
	return q, nil
}

// SearchAudit reads one page of the audit log (right auditlog, event
// audit_search), narrowed by auditlog_age and hide_audit_columns; a user
// sees only its own entries. The search's own entry is written after it.
func (o *Ops) SearchAudit(ctx context.Context, who caller.Caller, q audit.Query) (audit.Result, error) {
	var res audit.Result
	err := o.run(ctx, who, opSpec{event: "audit_search", action: "GET /audit/", right: rightAuditLog, target: auditTarget(who, q)},
		func(ctx context.Context, r *opRun) error {
			r.Entry.Serial = audit.Text(q.Filters["serial"], 256)
			nq, err := o.auditQuery(ctx, who, r, q)
			if err != nil {
				return err
			}
			res, err = o.s.audit.Search(ctx, nq)
			return err
		})
	return res, err
}

// AuditRows visits audit rows in order; it stops at fn's first error.
type AuditRows func(ctx context.Context, fn func(audit.Row) error) error

// DownloadAudit checks a download of the audit log (right
// auditlog_download, event audit_download) as SearchAudit does, without
// paging, and audits it; the rows are read when the answer's AuditRows
// is called (the download is streamed).
func (o *Ops) DownloadAudit(ctx context.Context, who caller.Caller, q audit.Query) (AuditRows, error) {
	var rows AuditRows
	err := o.run(ctx, who, opSpec{event: "audit_download", action: "GET /audit/", right: rightAuditDownload, target: auditTarget(who, q)},
		func(ctx context.Context, r *opRun) error {
			r.Entry.Serial = audit.Text(q.Filters["serial"], 256)
			nq, err := o.auditQuery(ctx, who, r, q)
			if err != nil {
				return err
			}
			// Check the query before the first row goes out.
			probe := nq
			probe.PageSize = 1
			if _, err := o.s.audit.Search(ctx, probe); err != nil {
				return err
			}
			rows = func(ctx context.Context, fn func(audit.Row) error) error { return o.s.audit.Each(ctx, nq, fn) }
			return nil
		})
	return rows, err
}
