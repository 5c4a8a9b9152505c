package eventing

import (
	"context"
	"html"
	"strings"

	"github.com/authsrv/authsrv/audit"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/user"
)

// secretTags are the tags whose values hold a secret of the enrollment:
// the random PIN, the registration code, and the enrollment URLs and QR
// codes (they carry the OTP seed or the enrollment credential). Only a
// notification to a recipient may show them; the Logging and WebHook
// modules never substitute them.
var secretTags = []string{
	"pin", "registrationcode",
	"googleurl_value", "googleurl_img", "pushurl_value", "pushurl_img",
	"container_url_value", "container_url_img",
}

// Tags returns the notification tags of the run (section 7.5 of the
// admin-config spec), by name without braces. A tag whose value is not
// known is present with "". With escapeHTML every value is HTML-escaped,
// for a template whose text is HTML.
//
// {pin} is the PIN of the operation's answer (the random PIN of an
// enrollment that the user must receive): it is a secret, for
// notifications only, and never logged.
func (r *Run) Tags(ctx context.Context, escapeHTML bool) map[string]string {
	return r.tagsFor(ctx, escapeHTML, nil)
}

// usedTags are the tag names text refers to ("{serial}" -> serial).
func usedTags(texts ...string) map[string]bool {
	used := map[string]bool{}
	for _, t := range texts {
		for {
			i := strings.IndexByte(t, '{')
			if i < 0 {
				break
			}
			j := strings.IndexByte(t[i:], '}')
			if j < 0 {
				break
			}
			used[t[i+1:i+j]] = true
			t = t[i+j:]
		}
	}
	return used
}

// tagsFor is Tags; with want set, the user store and the token are read
// only when a wanted tag needs them (the others are then "").
func (r *Run) tagsFor(ctx context.Context, escapeHTML bool, want map[string]bool) map[string]string {
	needs := func(names ...string) bool {
		if want == nil {
			return true
		}
		for _, n := range names {
			if want[n] {
				return true
			}
		}
		return false
	}
	c := r.Call
	s := r.svc
	t := make(map[string]string, 40)

	switch c.Caller.Role {
	case caller.Admin:
		t["admin"] = c.Caller.Name
	case caller.Local:
		t["admin"] = "local"
	default:
		t["admin"] = ""
	}
	t["realm"] = c.Caller.Realm
	action := c.Entry.Action
	if action == "" {
		action = strings.TrimSpace(c.Method + " " + c.Path)
	}
	t["action"] = action
	t["url"] = s.cfg.URL

	var u user.User
	if needs("username", "userrealm", "user", "givenname", "surname") {
		u = r.User(ctx)
	}
	var info map[string]string
	if needs("user", "givenname", "surname") {
		info = r.UserInfo(ctx)
	}
	t["givenname"], t["surname"] = info["givenname"], info["surname"]
	t["username"], t["userrealm"] = u.Login, u.Realm
	t["user"] = strings.TrimSpace(info["givenname"] + " " + info["surname"])
	if t["user"] == "" {
		t["user"] = u.Login
	}
	t["recipient_givenname"], t["recipient_surname"] = "", ""

	var detail map[string]any
	var value any
	if c.Response != nil {
		detail, value = c.Response.Detail, c.Response.Value
	}
	serial, typ, desc := c.Serial, c.TokenType, ""
	if serial == "" || needs("tokentype", "tokendescription") {
		if tok, ok := r.Token(ctx); ok {
			if serial == "" || serial == tok.Serial {
				serial, desc = tok.Serial, tok.Description
				if typ == "" {
					typ = tok.Type
				}
			}
		}
	}
	if serial == "" {
		serial = detailString(detail, "serial")
	}
	t["serial"], t["tokentype"], t["tokendescription"] = serial, typ, desc
	t["registrationcode"] = detailString(detail, "registrationcode")
	t["pin"] = detailString(detail, "pin")
	if r.Call.PIN != "" {
		t["pin"] = r.Call.PIN
	}
	t["googleurl_value"] = subString(detail["googleurl"], "value")
	t["googleurl_img"] = subString(detail["googleurl"], "img")
	t["pushurl_value"] = subString(detail["pushurl"], "value")
	t["pushurl_img"] = subString(detail["pushurl"], "img")
	var cu any
	if m, ok := value.(map[string]any); ok {
		cu = m["container_url"]
	}
	t["container_url_value"] = subString(cu, "value")
	t["container_url_img"] = subString(cu, "img")

	now := s.now()
	t["time"] = now.Format("15:04:05")
	t["date"] = now.Format("2006-01-02")
	t["client_ip"] = ""
	if c.Caller.Client.IsValid() {
		t["client_ip"] = c.Caller.Client.String()
	}
	t["ua_browser"], _ = audit.SplitAgent(c.Caller.UserAgent)
	t["ua_string"] = c.Caller.UserAgent

	if escapeHTML {
		for k, v := range t {
			t[k] = html.EscapeString(v)
		}
	}
	return t
}

// withoutSecrets returns tags without the secret tags (see secretTags), so
// that "{pin}" and the others stay as they are in the text.
func withoutSecrets(tags map[string]string) map[string]string {
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		out[k] = v
	}
	for _, k := range secretTags {
		delete(out, k)
	}
	return out
}

// detailString returns the detail member key as text ("" when missing).
func detailString(detail map[string]any, key string) string {
	v, ok := detail[key]
	if !ok || v == nil {
		return ""
	}
	return toString(v)
}

// subString returns member key of v, an object of the detail
// ({"value": ..., "img": ...}); "" when v is not one or lacks key.
func subString(v any, key string) string {
	switch m := v.(type) {
	case map[string]any:
		if x, ok := m[key]; ok && x != nil {
			return toString(x)
		}
	case map[string]string:
		return m[key]
	}
	return ""
}

// replaceTags substitutes each "{name}" of text whose name is in tags, in
// one pass: a substituted value is never searched for tags again (a user
// store value holding "{pin}" stays as it is), and an unknown "{name}" is
// left unchanged.
func replaceTags(text string, tags map[string]string) string {
	if !strings.Contains(text, "{") {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	for {
		i := strings.IndexByte(text, '{')
		if i < 0 {
			b.WriteString(text)
			break
		}
		j := strings.IndexByte(text[i+1:], '}')
		if j < 0 {
			b.WriteString(text)
			break
		}
		if v, ok := tags[text[i+1:i+1+j]]; ok {
			b.WriteString(text[:i])
			b.WriteString(v)
			text = text[i+2+j:]
			continue
		}
		// Not a tag: keep the brace and look again after it, since the
		// name may hold the opening brace of a tag ("{{serial}").
		b.WriteString(text[:i+1])
		text = text[i+1:]
	}
	return b.String()
}
