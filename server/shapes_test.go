package server_test

import (
	"fmt"
	"io"
	"testing"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
)

// TestAnswerShapes: answers carry the keys privacyIDEA sends, null where
// privacyIDEA sends null: the detail of an error envelope ({} for a failed
// login), the paging keys of GET /audit/, and /auth's log_level in Python's
// numbers.
func TestAnswerShapes(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithLogger(zerolog.New(io.Discard).Level(zerolog.WarnLevel))})
	login := e.do(t, "POST", "/auth", formType, form("username", "admin", "password", adminPass), nil)
	if got := at(login.json, "result.value.log_level"); got != float64(30) {
		t.Errorf("log_level %v, want 30 (warning)", got)
	}
	tok := e.login(t)
	for _, body := range []string{form("username", "admin", "password", "wrong"), form("password", "x")} {
		r := e.do(t, "POST", "/auth", formType, body, nil)
		if d, ok := r.json["detail"].(map[string]any); r.status != 401 || !ok || len(d) != 0 {
			t.Errorf("failed login: %d %s, want 401 with detail {}", r.status, r.body)
		}
	}

	r := e.admin(t, tok, "GET", "/nothing/here", "")
	if d, ok := r.json["detail"]; !ok || d != nil {
		t.Errorf("error envelope detail %v (present %v), want null", d, ok)
	}
	r = e.do(t, "POST", "/validate/check", formType, form("user", "nobody", "pass", "x"), nil)
	if d, ok := r.json["detail"]; !ok || d != nil || r.status != 400 {
		t.Errorf("validate error: %d %s", r.status, r.body)
	}
	r = e.admin(t, tok, "GET", "/realm/", "")
	if _, ok := r.json["detail"]; ok {
		t.Errorf("success without details carries detail: %s", r.body)
	}

	v := wantOK(t, e.admin(t, tok, "GET", "/audit/", "")).(map[string]any)
	if got := fmt.Sprint(keysOf(v)); got != "[auditcolumns auditdata count current next prev]" {
		t.Errorf("audit keys %s", got)
	}
	if v["prev"] != nil || v["next"] != nil || v["current"] != float64(1) {
		t.Errorf("one page: prev %v next %v current %v", v["prev"], v["next"], v["current"])
	}
	v = wantOK(t, e.admin(t, tok, "GET", "/audit/?page_size=1&page=1", "")).(map[string]any)
	if v["prev"] != nil || v["next"] != float64(2) {
		t.Errorf("first of several pages: prev %v next %v", v["prev"], v["next"])
	}
}
