package server_test

import (
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/server"
)

// innerChecks are the routes shared by several roles, which check rights
// inside: the request that reaches the check and the refusal expected
// once admin policies exist that grant nothing to the caller. "" marks a
// route that privacyIDEA leaves unchecked for logged-in callers.
var innerChecks = map[string]struct {
	target, body, want string
}{
	"GET /user/":                          {"/user/", "", "Admin actions are defined, but the action userlist is not allowed!"},
	"PUT /user/":                          {"/user/", "user=alice&resolver=mem1", "Admin actions are defined, but the action updateuser is not allowed!"},
	"DELETE /user/:first/*rest":           {"/user/mem1/alice", "", "Admin actions are defined, but the action deleteuser is not allowed!"},
	"POST /user/attribute":                {"/user/attribute", "user=alice&key=k&value=v", "You are not allowed to set the custom user attribute k!"},
	"GET /user/attribute":                 {"/user/attribute?user=alice", "", ""},
	"GET /user/editable_attributes/":      {"/user/editable_attributes/", "", ""},
	"DELETE /user/attribute (dispatch)":   {"/user/attribute/k/alice/realm1", "", "You are not allowed to delete the custom user attribute k!"},
	"GET /audit/":                         {"/audit/", "", "Admin actions are defined, but the action auditlog is not allowed!"},
	"POST /machine/token":                 {"/machine/token", "serial=TK1&application=ssh&service_id=web&user=root", "Admin actions are defined, but the action manage_machine_tokens is not allowed!"},
	"DELETE /machine/token/:serial/*rest": {"/machine/token/TK1/ssh/1", "", "Admin actions are defined, but the action manage_machine_tokens is not allowed!"},
	"POST /machine/tokenoption":           {"/machine/tokenoption", "serial=TK1&application=ssh&service_id=web&user=x", "Admin actions are defined, but the action manage_machine_tokens is not allowed!"},
	"POST /machine/deltoken":              {"/machine/deltoken", "serial=TK1&application=ssh&mtid=1", "Admin actions are defined, but the action manage_machine_tokens is not allowed!"},
	"POST /machine/deloption":             {"/machine/deloption", "serial=TK1&application=ssh&mtid=1&key=user", "Admin actions are defined, but the action manage_machine_tokens is not allowed!"},
	"GET /event/:eventid":                 {"/event/available", "", "Admin actions are defined, but the action eventhandling_read is not allowed!"},
	"GET /event/:eventid/:module":         {"/event/actions/Token", "", "Admin actions are defined, but the action eventhandling_read is not allowed!"},
	"POST /event":                         {"/event", "name=n&event=token_init&handlermodule=Logging&action=logging", "Admin actions are defined, but the action eventhandling_write is not allowed!"},
	"POST /event/:eventid/:id":            {"/event/enable/1", "", "Admin actions are defined, but the action eventhandling_write is not allowed!"},
	"DELETE /event/:eventid":              {"/event/1", "", "Admin actions are defined, but the action eventhandling_write is not allowed!"},
	"GET /audit/:csvfile":                 {"/audit/all.csv", "", "Admin actions are defined, but the action auditlog_download is not allowed!"},
	"POST /token/enable":                  {"/token/enable", "serial=TK1", "Admin actions are defined, but the action enable is not allowed!"},
	"POST /token/enable/:serial":          {"/token/enable/TK1", "", "Admin actions are defined, but the action enable is not allowed!"},
	"POST /token/disable":                 {"/token/disable", "serial=TK1", "Admin actions are defined, but the action disable is not allowed!"},
	"POST /token/disable/:serial":         {"/token/disable/TK1", "", "Admin actions are defined, but the action disable is not allowed!"},
	"POST /token/reset":                   {"/token/reset", "serial=TK1", "Admin actions are defined, but the action reset is not allowed!"},
	"POST /token/reset/:serial":           {"/token/reset/TK1", "", "Admin actions are defined, but the action reset is not allowed!"},
	"POST /token/resync":                  {"/token/resync", "serial=TK1&otp1=1&otp2=2", "Admin actions are defined, but the action resync is not allowed!"},
	"POST /token/resync/:serial":          {"/token/resync/TK1", "otp1=1&otp2=2", "Admin actions are defined, but the action resync is not allowed!"},
	"POST /token/setpin":                  {"/token/setpin", "serial=TK1&otppin=1", "Admin actions are defined, but the action setpin is not allowed!"},
	"POST /token/setpin/:serial":          {"/token/setpin/TK1", "otppin=1", "Admin actions are defined, but the action setpin is not allowed!"},
	"POST /token/setrandompin":            {"/token/setrandompin", "serial=TK1", "Admin actions are defined, but the action setrandompin is not allowed!"},
	"POST /token/setrandompin/:serial":    {"/token/setrandompin/TK1", "", "Admin actions are defined, but the action setrandompin is not allowed!"},
	"POST /token/description":             {"/token/description", "serial=TK1&description=x", "Admin actions are defined, but the action setdescription is not allowed!"},
	"POST /token/description/:serial":     {"/token/description/TK1", "description=x", "Admin actions are defined, but the action setdescription is not allowed!"},
	"POST /token/revoke":                  {"/token/revoke", "serial=TK1", "Admin actions are defined, but the action revoke is not allowed!"},
	"POST /token/revoke/:serial":          {"/token/revoke/TK1", "", "Admin actions are defined, but the action revoke is not allowed!"},
	"GET /token/":                         {"/token/", "", "Admin actions are defined, but the action tokenlist is not allowed!"},
	"POST /token/init":                    {"/token/init", "type=hotp&genkey=1", "Admin actions are defined, but the action enrollHOTP is not allowed!"},
	"POST /token/assign":                  {"/token/assign", "serial=TK1&user=alice&realm=realm1", "Admin actions are defined, but the action assign is not allowed!"},
	"POST /token/unassign":                {"/token/unassign", "serial=TK1", "Admin actions are defined, but the action unassign is not allowed!"},
	"POST /token/lost/:serial":            {"/token/lost/TK1", "", "Admin actions are defined, but the action losttoken is not allowed!"},
	"DELETE /token/":                      {"/token/?serial=TK1", "", "Admin actions are defined, but the action delete is not allowed!"},
	"DELETE /token/:serial":               {"/token/TK1", "", "Admin actions are defined, but the action delete is not allowed!"},
	"DELETE /token/:serial/*rest":         {"/token/challenges/transaction/123", "", "Admin actions are defined, but the action cancelchallenge is not allowed!"},
	"GET /system/":                        {"/system/", "", "Admin actions are defined, but the action configread is not allowed!"},
	"GET /system/:key":                    {"/system/DefaultOtpLen", "", "Admin actions are defined, but the action configread is not allowed!"},
	"GET /system/:key/:sub":               {"/system/names/radius", "", "Admin actions are defined, but the action enrollRADIUS is not allowed!"},
	"GET /system/random (dispatch)":       {"/system/random", "", "Admin actions are defined, but the action getrandom is not allowed!"},
	// Admin-only routes whose right the library checks.
	"POST /token/set":               {"/token/set", "serial=TK1&description=x", "Admin actions are defined, but the action set is not allowed!"},
	"POST /token/set/:serial":       {"/token/set/TK1", "description=x", "Admin actions are defined, but the action set is not allowed!"},
	"POST /token/realm/:serial":     {"/token/realm/TK1", "realms=realm1", "Admin actions are defined, but the action tokenrealms is not allowed!"},
	"POST /token/info/:serial/:key": {"/token/info/TK1/k", "value=v", "Admin actions are defined, but the action settokeninfo is not allowed!"},
	"POST /token/copypin":           {"/token/copypin", "from=TK1&to=TK1", "Admin actions are defined, but the action copytokenpin is not allowed!"},
	"POST /token/copyuser":          {"/token/copyuser", "from=TK1&to=TK1", "Admin actions are defined, but the action copytokenuser is not allowed!"},
	"POST /token/load/:filename":    {"/token/load/f.csv", "type=oathcsv&file=x", "Admin actions are defined, but the action importtokens is not allowed!"},
}

// TestEveryRouteIsChecked walks every registered route: each is public by
// design, guarded by the admin role alone as in privacyIDEA, or calls the
// rights check, which an unrelated active admin policy makes refuse.
func TestEveryRouteIsChecked(t *testing.T) {
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes())})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", "type=memresolver&Editable=True"))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", "resolvers=mem1"))
	wantOK(t, e.admin(t, tok, "POST", "/token/init", "serial=TK1&genkey=1&user=alice&realm=realm1"))
	// From now on only "someone-else" has rights.
	wantOK(t, e.admin(t, tok, "POST", "/policy/only-someone", `{"scope":"admin","action":"policyread","adminuser":"someone-else"}`))

	seen := map[string]bool{}
	for _, r := range routesOf(e) {
		key := r.Method + " " + r.Path
		seen[key] = true
		switch {
		case r.Access == "public":
			if !publicByDesign[key] {
				t.Errorf("%s is public but not listed as public by design", key)
			}
		case r.Access == "admin" && r.Action != "":
			path := strings.NewReplacer(":realm", "realm1", ":nodeid", e.s.NodeID(), ":resolvername", "mem1",
				":name", "p1", ":sub", "x", ":oldname", "p1", ":smtpid", "mail1", ":radiusid", "rad1",
				":gwid", "1", ":identifier", "gw1", ":key", "k", ":serial", "TK1", ":otp", "123456", ":filename", "f.csv").Replace(r.Path)
			rep := e.admin(t, tok, r.Method, path, "")
			want := "ERR303: Admin actions are defined, but the action " + r.Action + " is not allowed!"
			if rep.status != 403 || at(rep.json, "result.error.message") != want {
				t.Errorf("%s %s = %d %s; want 403 %q", r.Method, path, rep.status, rep.body, want)
			}
		case r.Access == "admin" && !hasInnerCheck(key):
			if !adminByRole[key] {
				t.Errorf("%s is admin-only without an action and not listed as guarded by the role alone", key)
			}
			path := strings.NewReplacer(":resolvername", "memresolver").Replace(r.Path)
			if rep := e.admin(t, tok, r.Method, path, ""); rep.status == 403 {
				t.Errorf("%s answered 403", key)
			}
		default:
			if _, ok := innerChecks[key]; !ok {
				t.Errorf("%s (%s) checks rights inside but has no entry in innerChecks", key, r.Access)
			}
		}
	}
	for key, c := range innerChecks {
		method := strings.Fields(key)[0]
		rep := e.admin(t, tok, method, c.target, c.body)
		if c.want == "" {
			if rep.status == 403 {
				t.Errorf("%s answered 403", key)
			}
			continue
		}
		if rep.status != 403 || at(rep.json, "result.error.message") != "ERR303: "+c.want {
			t.Errorf("%s %s = %d %s; want 403 %q", method, c.target, rep.status, rep.body, c.want)
		}
	}
	if len(seen) < 20 {
		t.Errorf("only %d routes walked", len(seen))
	}
}

func routesOf(e *env) []server.Route { return server.RoutesOf(e.s) }

// hasInnerCheck reports whether a route's right is checked inside.
func hasInnerCheck(key string) bool { _, ok := innerChecks[key]; return ok }
