package server_test

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/notify"
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

// TestRemoteChallengeAttributes: e-mail challenges carry privacyIDEA's
// attributes: "state" null for the first token of the transaction and its
// id for the later ones, and "valid_until"; the top-level copy is the last
// challenge's.
func TestRemoteChallengeAttributes(t *testing.T) {
	e, tok := tokenEnv(t)
	sink := testsvc.NewSMTPSink(t)
	if err := e.s.Notify().SetSMTP(t.Context(), notify.SMTPServer{Identifier: "mail", Server: "127.0.0.1", Port: sink.Port, Sender: "authsrv@example.org", Timeout: 5}); err != nil {
		t.Fatal(err)
	}
	for _, serial := range []string{"EM1", "EM2"} {
		wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "email", "serial", serial, "email", "alice@example.org",
			"email.identifier", "mail", "user", "alice", "realm", "realm1", "pin", "mailpin")))
	}
	r := check(t, e, "user", "alice", "realm", "realm1", "pass", "mailpin")
	txid, _ := at(r.json, "detail.transaction_id").(string)
	multi, _ := at(r.json, "detail.multi_challenge").([]any)
	if len(txid) != 20 || len(multi) != 2 {
		t.Fatalf("challenge %s", r.body)
	}
	until := e.clk.now().Add(120 * time.Second).Local().Format("2006-01-02 15:04:05.000000")
	for i, want := range []any{nil, txid} {
		attrs, _ := multi[i].(map[string]any)["attributes"].(map[string]any)
		if st, ok := attrs["state"]; !ok || st != want || attrs["valid_until"] != until || len(attrs) != 2 {
			t.Errorf("challenge %d attributes %v, want state %v, valid_until %s", i, attrs, want, until)
		}
	}
	if got := fmt.Sprint(at(r.json, "detail.attributes")); got != fmt.Sprint(multi[1].(map[string]any)["attributes"]) {
		t.Errorf("top-level attributes %s, want the last challenge's", got)
	}
}
