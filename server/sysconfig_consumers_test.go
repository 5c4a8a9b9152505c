package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/token"
)

// The system settings that the token and validate code read, over HTTP:
// the PIN position, the splitting of login@realm and the fallback SMTP
// server of e-mail tokens.

// settingsEnv is tokenEnv with the token settings set.
func settingsEnv(t *testing.T, set token.Settings) (*env, string) {
	t.Helper()
	e := newEnvWith(t, []authsrv.Option{authsrv.WithResolverTypes(memTypes()), authsrv.WithTokenSettings(set)})
	tok := e.login(t)
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem1", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm1", form("resolvers", "mem1")))
	wantOK(t, e.admin(t, tok, "POST", "/resolver/mem2", form("type", "memresolver")))
	wantOK(t, e.admin(t, tok, "POST", "/realm/realm2", form("resolvers", "mem2")))
	return e, tok
}

func TestSysconfigAppendPIN(t *testing.T) {
	e, tok := settingsEnv(t, token.Settings{AppendPIN: true})
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "AP1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", rfcHOTP[0]+"pin"), true, "matching 1 tokens")
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[1]), false, "wrong otp pin")
}

func TestSysconfigNoSplitAtSign(t *testing.T) {
	e, tok := settingsEnv(t, token.Settings{NoSplitAtSign: true})
	wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "NS1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))

	// "alice@realm1" is a login of the default realm, which has none.
	r := e.do(t, "POST", "/auth", formType, form("username", "alice@realm1", "password", "alice-Pw1"), nil)
	wantError(t, r, 401, 4031, "ERR4031: Authentication failure. Wrong credentials")
	r = e.do(t, "POST", "/validate/check", formType, form("user", "alice@realm1", "pass", "pin"+rfcHOTP[0]), nil)
	if r.status != 400 || !strings.Contains(fmt.Sprint(at(r.json, "result.error.message")), "does not exist") {
		t.Errorf("check of alice@realm1: %d %s", r.status, r.body)
	}
	// With the realm given apart, alice logs in and authenticates.
	r = e.do(t, "POST", "/auth", formType, form("username", "alice", "realm", "realm1", "password", "alice-Pw1"), nil)
	if r.status != 200 || at(r.json, "result.value.role") != "user" {
		t.Errorf("login alice in realm1: %d %s", r.status, r.body)
	}
	wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", "pin"+rfcHOTP[0]), true, "matching 1 tokens")

	// The default splits: alice@realm1 is alice of realm1.
	d, _ := settingsEnv(t, token.Settings{})
	userLogin(t, d, "alice@realm1", "alice-Pw1")
}

// TestSysconfigEmailIdentifier: an e-mail token enrolled without
// email.identifier cannot send without the system setting, and the log
// says which setting is missing; with the setting it sends through that
// server and the mailed OTP answers the challenge.
func TestSysconfigEmailIdentifier(t *testing.T) {
	const cause = "e-mail token PIEM0001A has no SMTP server: set the system setting email.identifier or the token's email.identifier"
	t.Run("Missing", func(t *testing.T) {
		e, tok := settingsEnv(t, token.Settings{})
		wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "email", "serial", "PIEM0001A", "otpkey", rfcKeyHex,
			"email", "alice@example.org", "user", "alice", "realm", "realm1", "pin", "pin")))
		r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin")
		wantAuth(t, r, false, "The PIN was correct, but the EMail could not be sent!")
		logs := e.log.String()
		if !strings.Contains(logs, cause) {
			t.Errorf("the log does not name the missing setting:\n%s", logs)
		}
		noSecret(t, e, tok, rfcHOTP[1])
	})
	t.Run("SystemSetting", func(t *testing.T) {
		sink := testsvc.NewSMTPSink(t)
		e, tok := settingsEnv(t, token.Settings{Values: map[string]string{"email.identifier": "mail"}})
		wantOK(t, e.admin(t, tok, "POST", "/smtpserver/mail", form("server", "127.0.0.1", "port", fmt.Sprint(sink.Port), "sender", "authsrv@example.org", "timeout", "5")))
		wantOK(t, e.admin(t, tok, "POST", "/token/init", form("type", "email", "serial", "PIEM0001A", "otpkey", rfcKeyHex,
			"email", "alice@example.org", "user", "alice", "realm", "realm1", "pin", "pin")))
		r := check(t, e, "user", "alice", "realm", "realm1", "pass", "pin")
		wantAuth(t, r, false, "Enter the OTP from the Email")
		txid, _ := at(r.json, "detail.transaction_id").(string)
		msgs := sink.Messages()
		if len(msgs) != 1 || len(msgs[0].To) != 1 || msgs[0].To[0] != "alice@example.org" || !strings.Contains(msgs[0].Data, rfcHOTP[1]) {
			t.Fatalf("mails %+v", msgs)
		}
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "transaction_id", txid, "pass", rfcHOTP[1]), true, "Found matching challenge")
		if strings.Contains(e.log.String(), cause) {
			t.Errorf("the log names a missing setting that is set:\n%s", e.log.String())
		}
	})
}

// TestSysconfigOverrideAuthorizationClient: the client address of the
// audit entry (and of policy matching) follows X-Forwarded-For and the
// client parameter only as far as the proxies of the system setting
// OverrideAuthorizationClient vouch for; without the setting it is the
// TCP peer (httptest's 192.0.2.1).
func TestSysconfigOverrideAuthorizationClient(t *testing.T) {
	type hop struct{ xff, client, want string }
	for _, tc := range []struct {
		name    string
		setting string
		hops    []hop
	}{
		{"NoSetting", "", []hop{
			{"10.1.1.1", "", "192.0.2.1"},
			{"", "10.2.2.2", "192.0.2.1"},
			{"10.1.1.1", "10.2.2.2", "192.0.2.1"},
		}},
		{"ProxyAlone", "192.0.2.0/24", []hop{
			{"10.1.1.1", "", "10.1.1.1"},
			{"", "10.3.3.3", "10.3.3.3"},
			// The path is peer, XFF, client: a proxy alone vouches for
			// one hop only.
			{"10.1.1.1", "10.3.3.3", "10.1.1.1"},
			{"", "", "192.0.2.1"},
			{"not-an-address", "", "192.0.2.1"},
		}},
		{"ProxyToNetwork", "192.0.2.1 > 10.0.0.0/8", []hop{
			{"10.9.9.9", "", "10.9.9.9"},
			{"172.16.0.5", "", "192.0.2.1"},
			{"", "172.16.0.5", "192.0.2.1"},
			// The spoofed first entry is beyond the path's length.
			{"172.16.0.5, 10.9.9.9", "", "10.9.9.9"},
		}},
		{"Chain", "192.0.2.1 > 10.0.0.0/8 > 172.16.0.0/12, 192.0.2.1 > 10.0.0.5", []hop{
			{"172.16.1.1, 10.0.0.7", "", "172.16.1.1"},
			// A proxy path vouches only when it matches whole.
			{"192.168.1.1, 10.0.0.7", "", "192.0.2.1"},
			{"", "10.0.0.5", "10.0.0.5"},
			{"", "10.0.0.6", "192.0.2.1"},
		}},
		{"UntrustedPeer", "198.51.100.0/24", []hop{
			{"10.1.1.1", "10.2.2.2", "192.0.2.1"},
		}},
		{"Unparsable", "192.0.2.0/24, nonsense", []hop{
			{"10.1.1.1", "", "192.0.2.1"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, tok := settingsEnv(t, token.Settings{Values: map[string]string{"OverrideAuthorizationClient": tc.setting}})
			for _, h := range tc.hops {
				kv := []string{"user", "alice", "realm", "realm1", "pass", "nope"}
				if h.client != "" {
					kv = append(kv, "client", h.client)
				}
				hdr := map[string]string{}
				if h.xff != "" {
					hdr["X-Forwarded-For"] = h.xff
				}
				r := e.do(t, "POST", "/validate/check", formType, form(kv...), hdr)
				if r.status != 200 {
					t.Fatalf("check: %d %s", r.status, r.body)
				}
				if got := lastCheckAudit(t, e, tok)["client"]; got != h.want {
					t.Errorf("X-Forwarded-For %q, client %q: audit client %v, want %s", h.xff, h.client, got, h.want)
				}
			}
		})
	}

	t.Run("ClientParamOnlyOnAuthPaths", func(t *testing.T) {
		e, tok := settingsEnv(t, token.Settings{Values: map[string]string{"OverrideAuthorizationClient": "192.0.2.0/24"}})
		wantOK(t, e.do(t, "GET", "/realm/?client=10.4.4.4", "", "", map[string]string{"Authorization": tok}))
		wantOK(t, e.do(t, "GET", "/realm/", "", "", map[string]string{"Authorization": tok, "X-Forwarded-For": "10.5.5.5"}))
		v := wantOK(t, e.admin(t, tok, "GET", "/audit/?action=*/realm/*", "")).(map[string]any)
		rows := v["auditdata"].([]any)
		if len(rows) < 2 {
			t.Fatalf("audit rows %v", rows)
		}
		// Newest first: X-Forwarded-For maps every request, the client
		// parameter only those of /validate, /ttype and /auth.
		if got := rows[0].(map[string]any)["client"]; got != "10.5.5.5" {
			t.Errorf("GET /realm/ with X-Forwarded-For: client %v", got)
		}
		if got := rows[1].(map[string]any)["client"]; got != "192.0.2.1" {
			t.Errorf("GET /realm/?client=: client %v", got)
		}
	})

	t.Run("PolicyClient", func(t *testing.T) {
		// An authentication policy for clients in 10.7.0.0/16 applies to
		// a request its proxy forwards from there.
		e, tok := settingsEnv(t, token.Settings{Values: map[string]string{"OverrideAuthorizationClient": "192.0.2.1"}})
		wantOK(t, e.admin(t, tok, "POST", "/token/init", form("serial", "PC1", "otpkey", rfcKeyHex, "user", "alice", "realm", "realm1", "pin", "pin")))
		setPolicy(t, e, tok, "nopin", "authentication", "otppin=none", "client", "10.7.0.0/16")
		wantAuth(t, check(t, e, "user", "alice", "realm", "realm1", "pass", rfcHOTP[0]), false, "wrong otp pin")
		r := e.do(t, "POST", "/validate/check", formType, form("user", "alice", "realm", "realm1", "pass", rfcHOTP[0]), map[string]string{"X-Forwarded-For": "10.7.1.1"})
		wantAuth(t, r, true, "matching 1 tokens")
	})
}
