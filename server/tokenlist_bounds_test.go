package server_test

import (
	"strings"
	"testing"
)

// GET /token/ with bad paging or sorting (issue 17 "Bad input",
// reliability B11): a clear parameter error or a bounded page, never a
// full decode or a huge allocation.
func TestTokenListBadInput(t *testing.T) {
	e, tok := tokenEnv(t)
	for _, s := range []string{"B1", "B2", "B3"} {
		wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", s, "genkey", "1")))
	}
	const paging = "ERR905: page must be at least 1 and pagesize from 1 to 10000"
	for _, q := range []string{"pagesize=0", "pagesize=-1", "pagesize=1000000000", "pagesize=1000000", "page=0", "page=-1"} {
		wantError(t, e.admin(t, tok, "GET", "/token/?"+q, ""), 400, 905, paging)
	}
	wantError(t, e.admin(t, tok, "GET", "/token/?page=100000000000000000000", ""), 400, 905, "ERR905: Parameter page is out of range.")
	r := e.admin(t, tok, "GET", "/token/?sortby=nosuchcolumn", "")
	if r.status != 400 || !strings.Contains(string(r.body), "sortby must be one of serial") {
		t.Errorf("unknown sortby: %d %s", r.status, r.body)
	}
	// serial=* is every token; a page far past the end is empty.
	v := wantOK(t, e.admin(t, tok, "GET", "/token/?serial=*&pagesize=2", "")).(map[string]any)
	if v["count"] != float64(3) || len(v["tokens"].([]any)) != 2 || v["next"] != float64(2) {
		t.Errorf("serial=*: %v", v)
	}
	v = wantOK(t, e.admin(t, tok, "GET", "/token/?page=1000000000&pagesize=10000", "")).(map[string]any)
	if v["count"] != float64(3) || len(v["tokens"].([]any)) != 0 || v["next"] != nil || v["prev"] != float64(999999999) {
		t.Errorf("page 10^9: %v", v)
	}
	v = wantOK(t, e.admin(t, tok, "GET", "/token/?sortby=count&sortdir=desc&serial=b*", "")).(map[string]any)
	if v["count"] != float64(3) {
		t.Errorf("sortby count: %v", v)
	}
}
