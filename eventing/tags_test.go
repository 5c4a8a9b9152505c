package eventing

import (
	"testing"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/user"
)

func TestReplaceTags(t *testing.T) {
	tags := map[string]string{"serial": "S1", "user": "Alice", "evil": "{serial}", "empty": ""}
	tests := []struct {
		name, in, want string
	}{
		{"Plain", "no tags here", "no tags here"},
		{"Known", "token {serial} of {user}", "token S1 of Alice"},
		{"Unknown", "{unknown} and {serial}", "{unknown} and S1"},
		{"Adjacent", "{serial}{user}", "S1Alice"},
		{"DoubleBrace", "{{serial}}", "{S1}"},
		{"Unterminated", "x {serial", "x {serial"},
		{"ValueNotExpandedAgain", "{evil}", "{serial}"},
		{"Empty", "[{empty}]", "[]"},
		{"CloseOnly", "a } b {serial}", "a } b S1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replaceTags(tt.in, tags); got != tt.want {
				t.Errorf("replaceTags(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRunTags(t *testing.T) {
	e := newNtEnv(t)
	e.token(t, "HOTP0001", "phone <1> & co")
	detail := map[string]any{
		"serial":           "HOTP0001",
		"pin":              "rnd-pin-4242",
		"registrationcode": "reg-code-99",
		"googleurl":        map[string]any{"value": "otpauth://hotp/x?secret=ABC", "img": "data:image/png;base64,iVBORw0KGgo="},
		"pushurl":          map[string]any{"value": "otpauth://pipush/x", "img": "data:image/png;base64,AAAA"},
	}

	t.Run("Post", func(t *testing.T) {
		r := e.run("UserNotification", "sendmail", nil, ntAdminCall("HOTP0001", detail))
		got := r.Tags(t.Context(), false)
		want := map[string]string{
			"admin": "super", "realm": "admins", "action": "POST /token/init", "serial": "HOTP0001",
			"url": "https://auth.example.com/", "user": "Alice Smith", "givenname": "Alice", "surname": "Smith",
			"username": "alice", "userrealm": "realm1", "tokentype": "hotp", "tokendescription": "phone <1> & co",
			"registrationcode": "reg-code-99", "recipient_givenname": "", "recipient_surname": "",
			"googleurl_value": "otpauth://hotp/x?secret=ABC", "googleurl_img": "data:image/png;base64,iVBORw0KGgo=",
			"pushurl_value": "otpauth://pipush/x", "pushurl_img": "data:image/png;base64,AAAA",
			"container_url_value": "", "container_url_img": "",
			"time": "05:06:07", "date": "2026-03-04", "client_ip": "192.0.2.7",
			"ua_browser": "Mozilla", "ua_string": "Mozilla/5.0 (X11; Linux)", "pin": "rnd-pin-4242",
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("tag %s = %q, want %q", k, got[k], v)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected tag %s = %q", k, got[k])
			}
		}
	})

	t.Run("EscapeHTML", func(t *testing.T) {
		r := e.run("UserNotification", "sendmail", nil, ntAdminCall("HOTP0001", detail))
		got := r.Tags(t.Context(), true)
		if got["tokendescription"] != "phone &lt;1&gt; &amp; co" {
			t.Errorf("tokendescription = %q", got["tokendescription"])
		}
		if got["googleurl_img"] != "data:image/png;base64,iVBORw0KGgo=" {
			t.Errorf("googleurl_img = %q", got["googleurl_img"])
		}
	})

	t.Run("PreWithoutAnswer", func(t *testing.T) {
		c := ntAdminCall("HOTP0001", nil)
		c.Response, c.Entry.Action = nil, ""
		r := e.run("UserNotification", "sendmail", nil, c)
		got := r.Tags(t.Context(), false)
		if got["pin"] != "" || got["googleurl_value"] != "" || got["registrationcode"] != "" {
			t.Errorf("secret tags without an answer: %v", got)
		}
		if got["action"] != "POST /token/init" || got["tokentype"] != "hotp" {
			t.Errorf("action %q tokentype %q", got["action"], got["tokentype"])
		}
	})

	t.Run("UserCallerWithoutToken", func(t *testing.T) {
		c := &Call{Event: "user_update", Method: "POST", Path: "/user/",
			Caller: caller.Caller{Role: caller.User, Name: "carol", Realm: "realm1"},
			User:   user.User{Login: "carol", Realm: "realm1"}}
		got := e.run("Logging", "logging", nil, c).Tags(t.Context(), false)
		if got["admin"] != "" || got["realm"] != "realm1" || got["user"] != "Carol" || got["serial"] != "" || got["client_ip"] != "" {
			t.Errorf("tags %v", got)
		}
	})

	t.Run("WithoutSecrets", func(t *testing.T) {
		got := withoutSecrets(e.run("Logging", "logging", nil, ntAdminCall("HOTP0001", detail)).Tags(t.Context(), false))
		for _, k := range secretTags {
			if _, ok := got[k]; ok {
				t.Errorf("secret tag %s kept", k)
			}
		}
		if got["serial"] != "HOTP0001" {
			t.Errorf("serial %q", got["serial"])
		}
	})
}
