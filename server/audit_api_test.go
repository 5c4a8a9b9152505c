package server_test

import (
	"encoding/csv"
	"strings"
	"testing"
)

func TestAuditAPI(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	e.do(t, "POST", "/auth", formType, form("username", "admin", "password", "wrong"), map[string]string{"User-Agent": "privacyidea-cli/1.5"})
	wantOK(t, e.admin(t, tok, "GET", "/realm/", ""))
	wantOK(t, e.admin(t, tok, "POST", "/policy/pol1", `{"scope":"admin","action":"*","adminuser":"admin"}`))

	v := wantOK(t, e.admin(t, tok, "GET", "/audit/?action=*auth*", "")).(map[string]any)
	cols := v["auditcolumns"].([]any)
	if len(cols) < 20 || cols[0] != "number" {
		t.Errorf("columns %v", cols)
	}
	rows := v["auditdata"].([]any)
	if v["count"] != float64(2) || len(rows) != 2 {
		t.Fatalf("action=*auth*: %v", v)
	}
	newest, oldest := rows[0].(map[string]any), rows[1].(map[string]any)
	if newest["action"] != "POST /auth" || newest["success"] != float64(0) || newest["user"] != "admin" ||
		newest["user_agent"] != "privacyidea-cli" || newest["user_agent_version"] != "1.5" ||
		!strings.Contains(newest["info"].(string), "ERR4031") || newest["sig_check"] != "OK" || newest["missing_line"] != "OK" {
		t.Errorf("failed login entry: %v", newest)
	}
	if oldest["success"] != float64(1) || oldest["authentication"] != "ACCEPT" || oldest["client"] != "192.0.2.1" {
		t.Errorf("login entry: %v", oldest)
	}
	all := wantOK(t, e.admin(t, tok, "GET", "/audit/?sortorder=asc&page_size=2&page=2", "")).(map[string]any)
	if all["current"] != float64(2) || all["prev"] != float64(1) || all["next"] != float64(3) {
		t.Errorf("paging: count %v current %v prev %v next %v", all["count"], all["current"], all["prev"], all["next"])
	}
	first := all["auditdata"].([]any)[0].(map[string]any)
	if first["number"] != float64(3) || first["administrator"] != "admin" || first["action"] != "GET /realm/" {
		t.Errorf("third entry: %v", first)
	}
	wantError(t, e.admin(t, tok, "GET", "/audit/?nosuchcolumn=1", ""), 400, 905, "ERR905: Unknown audit column: nosuchcolumn")
	wantError(t, e.admin(t, tok, "GET", "/audit/?timelimit=soon", ""), 400, 905, at(e.admin(t, tok, "GET", "/audit/?timelimit=soon", "").json, "result.error.message").(string))

	// Policies narrow what an admin sees.
	wantOK(t, e.admin(t, tok, "POST", "/policy/pol2", `{"scope":"admin","action":"hide_audit_columns=client info, auditlog_age=1h","adminuser":"admin"}`))
	e.clk.add(2 * 60 * 60e9)
	tok = e.login(t) // the old token expired meanwhile
	wantOK(t, e.admin(t, tok, "GET", "/realm/", ""))
	v = wantOK(t, e.admin(t, tok, "GET", "/audit/", "")).(map[string]any)
	for _, r := range v["auditdata"].([]any) {
		row := r.(map[string]any)
		if _, shown := row["client"]; shown {
			t.Errorf("hidden column client shown: %v", row)
		}
		if _, shown := row["info"]; shown {
			t.Errorf("hidden column info shown: %v", row)
		}
		if row["action"] == "GET /realm/" && row["policies"] != "" {
			t.Errorf("GET /realm/ is decided by no policy: %v", row)
		}
	}
	if n := v["count"].(float64); n < 1 || n > 3 {
		t.Errorf("auditlog_age=1h left %v entries", n)
	}

	pol := wantOK(t, e.admin(t, tok, "GET", "/audit/?action=GET%20/audit/", "")).(map[string]any)
	if p := pol["auditdata"].([]any)[0].(map[string]any)["policies"]; p != "pol1,pol2" {
		t.Errorf("policies of GET /audit/: %v", p)
	}

	// CSV download.
	r := e.do(t, "GET", "/audit/audit.csv?sortorder=asc", "", "", map[string]string{"Authorization": tok})
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %v", r.status, r.header)
	}
	recs, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil || len(recs) < 2 || recs[0][0] != "number" {
		t.Fatalf("csv body: %v %q", err, r.body)
	}
	if r := e.do(t, "GET", "/audit/audit.txt", "", "", map[string]string{"Authorization": tok}); r.status != 404 {
		t.Errorf("non-csv download: %d", r.status)
	}
}
