package server_test

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/audit"
)

// TestMonitoringAfterEnrollment is the check as a new user would
// make it: tokens are created, the recorder runs once, and
// /monitoring/total_tokens shows a point with their number.
func TestMonitoringAfterEnrollment(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	if v := wantOK(t, e.admin(t, tok, "GET", "/monitoring/", "")); v == nil || len(v.([]any)) != 0 {
		t.Errorf("keys of a new server: %v", v)
	}
	for range 3 {
		wantOK(t, e.admin(t, tok, "POST", "/token/init", "type=hotp&genkey=1"))
	}
	if err := e.s.RecordStats(t.Context()); err != nil {
		t.Fatal(err)
	}
	keys, _ := wantOK(t, e.admin(t, tok, "GET", "/monitoring/", "")).([]any)
	for _, want := range []string{"total_tokens", "hardware_tokens", "software_tokens", "unassigned_hardware_tokens", "assigned_tokens", "user_with_token"} {
		found := false
		for _, k := range keys {
			found = found || k == want
		}
		if !found {
			t.Errorf("GET /monitoring/ = %v, lacks %s", keys, want)
		}
	}
	got, _ := json.Marshal(wantOK(t, e.admin(t, tok, "GET", "/monitoring/total_tokens", "")))
	if want := `[["2026-11-22 10:00:00.000000+0000",3]]`; string(got) != want {
		t.Errorf("GET /monitoring/total_tokens = %s, want %s", got, want)
	}
	got, _ = json.Marshal(wantOK(t, e.admin(t, tok, "GET", "/monitoring/software_tokens/last", "")))
	if string(got) != "3" {
		t.Errorf("GET /monitoring/software_tokens/last = %s, want 3", got)
	}
	// Trailing slashes are served too.
	got, _ = json.Marshal(wantOK(t, e.admin(t, tok, "GET", "/monitoring/total_tokens/", "")))
	if want := `[["2026-11-22 10:00:00.000000+0000",3]]`; string(got) != want {
		t.Errorf("GET /monitoring/total_tokens/ = %s", got)
	}
	// A key without points: an empty list, and null as the last value.
	if v := wantOK(t, e.admin(t, tok, "GET", "/monitoring/nosuchkey", "")); v == nil || len(v.([]any)) != 0 {
		t.Errorf("unknown key: %v", v)
	}
	r := e.do(t, "GET", "/monitoring/nosuchkey/last", "", "", map[string]string{"Authorization": tok})
	if r.status != 200 || at(r.json, "result.status") != true {
		t.Fatalf("last of an unknown key: %d %s", r.status, r.body)
	}
	if v, ok := r.json["result"].(map[string]any)["value"]; !ok || v != nil {
		t.Errorf("last of an unknown key: value %v (present %v), want null", v, ok)
	}
}

// TestMonitoringWindows: start and end in both date forms and several
// time zones, DELETE with a window, and dates that do not parse.
func TestMonitoringWindows(t *testing.T) {
	// The server's local time is UTC+2 (naive dates).
	e := newEnvWith(t, []authsrv.Option{authsrv.WithLocation(time.FixedZone("CEST", 2*3600))})
	tok := e.login(t)
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for h := range 6 { // 10:00 .. 15:00 UTC, values 0..5
		if err := e.s.Stats().Add(t.Context(), "my_counter", base.Add(time.Duration(h)*time.Hour), int64(h)); err != nil {
			t.Fatal(err)
		}
	}
	values := func(t *testing.T, query url.Values) string {
		t.Helper()
		target := "/monitoring/my_counter"
		if len(query) > 0 {
			target += "?" + query.Encode()
		}
		var vs []int64
		raw, _ := json.Marshal(wantOK(t, e.admin(t, tok, "GET", target, "")))
		var pts [][2]any
		if err := json.Unmarshal(raw, &pts); err != nil {
			t.Fatalf("%s: %s", target, raw)
		}
		for _, p := range pts {
			vs = append(vs, int64(p[1].(float64)))
		}
		out, _ := json.Marshal(vs)
		return string(out)
	}
	cases := []struct {
		name, start, end, want string
	}{
		{"all", "", "", "[0,1,2,3,4,5]"},
		{"ISO with offset, inclusive", "2026-05-01 13:00+0200", "2026-05-01 14:00+02:00", "[1,2]"},
		{"ISO Z", "2026-05-01T13:00:00Z", "", "[3,4,5]"},
		{"ISO with seconds and fraction", "", "2026-05-01T11:00:00.000001Z", "[0,1]"},
		{"naive ISO is local time", "2026-05-01 16:30", "", "[5]"},
		{"legacy DD/MM/YY naive", "01/05/26 13:00", "01/05/26 14:00", "[1,2]"},
		{"legacy with another zone", "01/05/26 08:00-0400", "", "[2,3,4,5]"},
		{"empty window", "2026-05-02 00:00Z", "", "null"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := url.Values{}
			if c.start != "" {
				q.Set("start", c.start)
			}
			if c.end != "" {
				q.Set("end", c.end)
			}
			if got := values(t, q); got != c.want {
				t.Errorf("values %s, want %s", got, c.want)
			}
		})
	}

	// Dates that do not parse: 400 naming the parameter, nothing deleted.
	for _, q := range []url.Values{{"start": {"yesterday"}}, {"end": {"2026-13-01 10:00"}}, {"start": {"2026-05-01 10:00Z"}, "end": {"31/02/26 10:00"}}} {
		for _, method := range []string{"GET", "DELETE"} {
			r := e.admin(t, tok, method, "/monitoring/my_counter?"+q.Encode(), "")
			name := "start"
			if !q.Has("start") || q.Has("end") {
				name = "end"
			}
			bad := q.Get(name)
			msg := "ERR905: The parameter " + name + " is not a date: \"" + bad + "\". Use YYYY-MM-DD hh:mm[:ss][+hhmm] or DD/MM/YY hh:mm."
			wantError(t, r, 400, 905, msg)
		}
	}
	if got := values(t, nil); got != "[0,1,2,3,4,5]" {
		t.Fatalf("bad dates deleted points: %s", got)
	}

	// DELETE with a window answers the number deleted.
	q := url.Values{"start": {"2026-05-01 12:00+0200"}, "end": {"01/05/26 15:00"}} // 10:00 .. 13:00 UTC
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/monitoring/my_counter?"+q.Encode(), "")); v != float64(4) {
		t.Errorf("DELETE answered %v, want 4", v)
	}
	if got := values(t, nil); got != "[4,5]" {
		t.Errorf("after the DELETE: %s", got)
	}
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/monitoring/my_counter", "")); v != float64(2) {
		t.Errorf("DELETE of the rest answered %v, want 2", v)
	}
	if v := wantOK(t, e.admin(t, tok, "DELETE", "/monitoring/my_counter", "")); v != float64(0) {
		t.Errorf("DELETE of nothing answered %v, want 0", v)
	}
	if v := wantOK(t, e.admin(t, tok, "GET", "/monitoring/", "")); len(v.([]any)) != 0 {
		t.Errorf("keys after deleting every point: %v", v)
	}
}

// TestMonitoringAuditedOnce: every statistics request writes exactly one
// audit entry, answered, refused for a bad date or for want of the right.
func TestMonitoringAuditedOnce(t *testing.T) {
	for _, refused := range []bool{false, true} {
		e := newEnv(t)
		tok := e.login(t)
		if refused {
			wantOK(t, e.admin(t, tok, "POST", "/policy/other", `{"scope":"admin","action":"enable","adminuser":"someone"}`))
		}
		for _, r := range []struct{ method, target string }{
			{"GET", "/monitoring/"}, {"GET", "/monitoring/k"}, {"GET", "/monitoring/k?start=2026-05-01T10:00Z"},
			{"GET", "/monitoring/k/last"}, {"DELETE", "/monitoring/k?end=01/05/26+10:00"}, {"GET", "/monitoring/k?start=never"},
			{"DELETE", "/monitoring/k?end=never"},
		} {
			before, err := e.s.Audit().Search(t.Context(), audit.Query{PageSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			got := e.do(t, r.method, r.target, "", "", map[string]string{"Authorization": tok})
			after, _ := e.s.Audit().Search(t.Context(), audit.Query{PageSize: 1})
			if after.Count != before.Count+1 {
				t.Errorf("refused=%v %s %s: %d audit entries (status %d), want 1", refused, r.method, r.target, after.Count-before.Count, got.status)
			}
			if refused && got.status != 403 {
				t.Errorf("%s %s without the right: %d %s", r.method, r.target, got.status, got.body)
			}
		}
	}
}
