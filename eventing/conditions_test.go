package eventing

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/token"
	"github.com/authsrv/authsrv/user"
)

func TestConditionsEmptyAndUnknown(t *testing.T) {
	e := newCondEnv(t)
	call := func() *Call {
		return &Call{Event: "token_init", Caller: condAdmin, Response: &Response{Status: true, Value: true}}
	}
	e.check(t, []condCheck{
		{"no conditions", nil, true},
		{"unknown key ignored", map[string]string{"no_such_condition": "x"}, true},
		{"container condition ignored", map[string]string{"container_type": "smartphone", "container_has_owner": "True"}, true},
		{"empty value is not set", map[string]string{"realm": "", "tokentype": "  ", "result_value": ""}, true},
		{"one failing key decides", map[string]string{"no_such_condition": "x", "result_value": "False"}, false},
		{"all must hold", map[string]string{"result_value": "True", "logged_in_user": "user"}, false},
		{"all hold", map[string]string{"result_value": "True", "logged_in_user": "admin"}, true},
	}, call)
}

// TestConditionTokenTypeFromDetail: the token of a token_init post call
// whose serial is only in the answer's detail.
func TestConditionTokenTypeFromDetail(t *testing.T) {
	e := newCondEnv(t)
	e.enroll(t, "HOTP0001", "hotp", nil)
	call := func() *Call {
		return &Call{Event: "token_init", Caller: condAdmin, Params: map[string]any{"type": "hotp", "genkey": "1"},
			Response: &Response{Status: true, Value: true, Detail: map[string]any{"serial": "HOTP0001"}}}
	}
	e.check(t, []condCheck{
		{"hotp", map[string]string{"tokentype": "hotp"}, true},
		{"totp", map[string]string{"tokentype": "totp"}, false},
		{"list", map[string]string{"tokentype": "totp, hotp"}, true},
		{"case", map[string]string{"tokentype": "HOTP"}, true},
		{"serial from detail", map[string]string{"serial": "^HOTP"}, true},
		{"serial from detail mismatch", map[string]string{"serial": "TOTP"}, false},
	}, call)
}

// TestConditionResultValueAndFailcounter: result_value=False together
// with failcounter=>2 on a failed authentication.
func TestConditionResultValueAndFailcounter(t *testing.T) {
	e := newCondEnv(t)
	alice := e.user(t, "alice")
	e.enroll(t, "HOTPF", "hotp", &alice)
	conds := map[string]string{"result_value": "False", "failcounter": "=>2"}
	failed := func() *Call {
		return condTokenCall("validate_check", "HOTPF", alice, &Response{Status: true, Value: false})
	}
	succeeded := func() *Call {
		return condTokenCall("validate_check", "HOTPF", alice, &Response{Status: true, Value: true})
	}
	for _, tc := range []struct {
		name string
		fail int
		call func() *Call
		want bool
	}{
		{"failed, counter 3", 3, failed, true},
		{"failed, counter 2", 2, failed, true},
		{"failed, counter 1", 1, failed, false},
		{"succeeded, counter 3", 3, succeeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.update(t, "HOTPF", func(tok *token.Token) { tok.FailCount = tc.fail })
			if got := e.hold(t, conds, tc.call()); got != tc.want {
				t.Errorf("hold = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConditionResultValueStatus(t *testing.T) {
	e := newCondEnv(t)
	for _, tc := range []struct {
		name  string
		res   *Response
		conds map[string]string
		want  bool
	}{
		{"value true", &Response{Status: true, Value: true}, map[string]string{"result_value": "True"}, true},
		{"value true vs False", &Response{Status: true, Value: true}, map[string]string{"result_value": "False"}, false},
		{"value 1", &Response{Status: true, Value: 1}, map[string]string{"result_value": "true"}, true},
		{"value object is not true", &Response{Status: true, Value: map[string]any{"a": 1}}, map[string]string{"result_value": "False"}, true},
		{"error has no value", &Response{Status: false, Error: &ResponseError{Code: 905, Message: "x"}}, map[string]string{"result_value": "False"}, true},
		{"pre has no value", nil, map[string]string{"result_value": "False"}, true},
		{"pre has no value, True", nil, map[string]string{"result_value": "True"}, false},
		{"status true", &Response{Status: true}, map[string]string{"result_status": "True"}, true},
		{"status false", &Response{Status: false}, map[string]string{"result_status": "True"}, false},
		{"status false, False", &Response{Status: false}, map[string]string{"result_status": "False"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Call{Event: "validate_check", Caller: condAdmin, Response: tc.res}
			if got := e.hold(t, tc.conds, c); got != tc.want {
				t.Errorf("hold = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConditionResultAuthentication(t *testing.T) {
	e := newCondEnv(t)
	chal := map[string]any{"multi_challenge": []any{map[string]any{"serial": "X"}}, "transaction_id": "1"}
	for _, tc := range []struct {
		name, event string
		res         *Response
		want        string
	}{
		{"accept", "validate_check", &Response{Status: true, Value: true}, authAccept},
		{"reject", "validate_check", &Response{Status: true, Value: false}, authReject},
		{"challenge", "validate_check", &Response{Status: true, Value: false, Detail: chal}, authChallenge},
		{"typed challenge list", "validate_triggerchallenge", &Response{Status: true, Value: 1,
			Detail: map[string]any{"multi_challenge": []map[string]any{{"serial": "X"}}}}, authChallenge},
		{"value CHALLENGE", "validate_check", &Response{Status: true, Value: "CHALLENGE"}, authChallenge},
		{"declined", "validate_poll_transaction", &Response{Status: true, Value: false,
			Detail: map[string]any{"challenge_status": "declined"}}, authDeclined},
		{"cancelled", "validate_poll_transaction", &Response{Status: true, Value: false,
			Detail: map[string]any{"challenge_status": "cancelled"}}, authDeclined},
		{"pending", "validate_poll_transaction", &Response{Status: true, Value: false,
			Detail: map[string]any{"challenge_status": "pending"}}, authReject},
		{"samlcheck", "validate_check", &Response{Status: true, Value: map[string]any{"auth": true, "attributes": map[string]any{}}}, authAccept},
		{"auth", "auth", &Response{Status: true, Value: map[string]any{"token": "x", "role": "admin"}}, authAccept},
		{"error", "validate_check", &Response{Status: false, Error: &ResponseError{Code: 905, Message: "x"}}, ""},
		{"not an authentication", "token_init", &Response{Status: true, Value: true}, ""},
		{"pre", "validate_check", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := condAuthentication(tc.event, tc.res); got != tc.want {
				t.Fatalf("authentication = %q, want %q", got, tc.want)
			}
			for _, v := range []string{authAccept, authReject, authChallenge, authDeclined} {
				c := &Call{Event: tc.event, Caller: condAdmin, Response: tc.res}
				if got := e.hold(t, map[string]string{"result_authentication": v}, c); got != (v == tc.want) {
					t.Errorf("result_authentication=%s hold = %v, want %v", v, got, v == tc.want)
				}
			}
		})
	}
}

func TestConditionDetailMessages(t *testing.T) {
	e := newCondEnv(t)
	call := func() *Call {
		return &Call{Event: "validate_check", Caller: condAdmin, Response: &Response{Status: true, Value: false,
			Detail: map[string]any{"message": "wrong otp value", "error": map[string]any{"message": "Failed to send SMS: gateway down"}}}}
	}
	e.check(t, []condCheck{
		{"message found", map[string]string{"detail_message": "otp"}, true},
		{"message searched, not anchored", map[string]string{"detail_message": "otp value$"}, true},
		{"message missing", map[string]string{"detail_message": "^otp"}, false},
		{"error message", map[string]string{"detail_error_message": "send SMS"}, true},
		{"error message regex", map[string]string{"detail_error_message": "gateway (up|down)"}, true},
		{"error message mismatch", map[string]string{"detail_error_message": "e-mail"}, false},
	}, call)

	// Without a detail, the messages are empty.
	e.check(t, []condCheck{
		{"empty matches empty", map[string]string{"detail_message": "^$"}, true},
		{"empty does not match text", map[string]string{"detail_error_message": "SMS"}, false},
	}, func() *Call { return &Call{Event: "validate_check", Caller: condAdmin} })

	t.Run("bad regex", func(t *testing.T) {
		if e.hold(t, map[string]string{"detail_message": "(otp"}, call()) {
			t.Fatal("a bad regular expression held")
		}
		if !strings.Contains(e.log.String(), "detail_message") || !strings.Contains(e.log.String(), "malformed") {
			t.Fatalf("the bad condition was not logged: %s", e.log.String())
		}
	})
}

func TestConditionClientIP(t *testing.T) {
	e := newCondEnv(t)
	list := "10.0.0.0/8, !10.1.0.0/16, -10.2.3.4, 2001:db8::/32"
	for _, tc := range []struct {
		client string
		want   bool
	}{
		{"10.5.5.5", true},
		{"10.1.2.3", false},
		{"10.2.3.4", false},
		{"10.2.3.5", true},
		{"192.0.2.1", false},
		{"2001:db8::1", true},
		{"::ffff:10.5.5.5", true},
		{"", true}, // an unknown client is not checked
	} {
		t.Run(tc.client, func(t *testing.T) {
			c := &Call{Event: "validate_check", Caller: caller.Caller{Role: caller.Anonymous}}
			if tc.client != "" {
				c.Caller.Client = netip.MustParseAddr(tc.client)
			}
			if got := e.hold(t, map[string]string{"client_ip": list}, c); got != tc.want {
				t.Errorf("client %s: hold = %v, want %v", tc.client, got, tc.want)
			}
		})
	}
	t.Run("only exclusions pass nobody", func(t *testing.T) {
		c := &Call{Event: "validate_check", Caller: caller.Caller{Client: netip.MustParseAddr("192.0.2.1")}}
		if e.hold(t, map[string]string{"client_ip": "!10.0.0.0/8"}, c) {
			t.Fatal("a list of only exclusions held")
		}
	})
	t.Run("malformed", func(t *testing.T) {
		c := &Call{Event: "validate_check", Caller: caller.Caller{Client: netip.MustParseAddr("10.0.0.1")}}
		if e.hold(t, map[string]string{"client_ip": "10.0.0.0/33"}, c) {
			t.Fatal("a malformed client list held")
		}
		if !strings.Contains(e.log.String(), "client_ip") {
			t.Fatalf("the malformed client list was not logged: %s", e.log.String())
		}
	})
}

func TestConditionLoggedInUser(t *testing.T) {
	e := newCondEnv(t)
	for _, tc := range []struct {
		role caller.Role
		want string
	}{
		{caller.Admin, "admin"},
		{caller.Local, "admin"},
		{caller.User, "user"},
		{caller.Anonymous, "user"},
		{caller.APIKey, "user"},
	} {
		t.Run(string(tc.role)+"/"+tc.want, func(t *testing.T) {
			for _, v := range []string{"admin", "user"} {
				c := &Call{Event: "token_init", Caller: caller.Caller{Role: tc.role, Name: "x"}}
				if got := e.hold(t, map[string]string{"logged_in_user": v}, c); got != (v == tc.want) {
					t.Errorf("logged_in_user=%s hold = %v, want %v", v, got, v == tc.want)
				}
			}
		})
	}
}

func TestConditionUserRealmResolver(t *testing.T) {
	e := newCondEnv(t)
	alice := user.User{Login: "alice", Realm: "realmc"} // resolved by the run
	call := func() *Call { return &Call{Event: "token_list", Caller: condAdmin, User: alice} }
	e.check(t, []condCheck{
		{"realm", map[string]string{"realm": "realmc"}, true},
		{"realm list", map[string]string{"realm": "other,realmc"}, true},
		{"realm case", map[string]string{"realm": "RealmC"}, true},
		{"other realm", map[string]string{"realm": "other"}, false},
		{"resolver", map[string]string{"resolver": "condres"}, true},
		{"other resolver", map[string]string{"resolver": "condres2"}, false},
	}, call)

	// A user who does not exist is the empty user.
	e.check(t, []condCheck{
		{"ghost realm", map[string]string{"realm": "realmc"}, false},
		{"ghost resolver", map[string]string{"resolver": "condres"}, false},
	}, func() *Call {
		return &Call{Event: "token_list", Caller: condAdmin, User: user.User{Login: "ghost", Realm: "realmc"}}
	})

	// The token owner is the user when the request names only a serial.
	owner := e.user(t, "alice")
	e.enroll(t, "OWNED1", "hotp", &owner)
	e.check(t, []condCheck{
		{"owner realm", map[string]string{"realm": "realmc"}, true},
		{"owner resolver", map[string]string{"resolver": "condres2"}, false},
	}, func() *Call {
		return condTokenCall("token_disable", "OWNED1", user.User{}, &Response{Status: true, Value: 1})
	})
}

// TestConditionUserInfo compares user attributes, numbers and dates
// ({now}-7d) among them.
func TestConditionUserInfo(t *testing.T) {
	e := newCondEnv(t)
	alice, bob := e.user(t, "alice"), e.user(t, "bob")
	if _, err := e.attrs.Set(t.Context(), alice, "department", "sales", ""); err != nil {
		t.Fatal(err)
	}
	forUser := func(u user.User) func() *Call {
		return func() *Call { return &Call{Event: "token_init", Caller: condAdmin, User: u} }
	}
	e.check(t, []condCheck{
		{"older than a week", map[string]string{"user_info": "created < {now}-7d"}, true},
		{"not newer than a week", map[string]string{"user_info": "created > {now}-7d"}, false},
		{"before now", map[string]string{"user_info": "created <= {now}"}, true},
		{"fixed date", map[string]string{"user_info": "created == 2026-01-01T00:00+0000"}, true},
		{"fixed date other form", map[string]string{"user_info": "created < 2026-01-02"}, true},
		{"int greater", map[string]string{"user_info": "level > 3"}, true},
		{"int, not text order", map[string]string{"user_info": "level < 10"}, true},
		{"int greater or equal", map[string]string{"user_info": "level >= 6"}, false},
		{"text equal", map[string]string{"user_info": "givenname == Alice"}, true},
		{"text not equal", map[string]string{"user_info": "givenname != Alice"}, false},
		{"custom attribute", map[string]string{"user_info": "department == sales"}, true},
		{"missing attribute equal", map[string]string{"user_info": "nope == x"}, false},
		{"missing attribute not equal", map[string]string{"user_info": "nope != x"}, true},
		{"missing attribute order", map[string]string{"user_info": "nope < 5"}, false},
	}, forUser(alice))
	e.check(t, []condCheck{
		{"bob is newer than a week ago", map[string]string{"user_info": "created < {now}-7d"}, false},
		{"bob is older than a day ago", map[string]string{"user_info": "created < {now}-1d"}, true},
		{"bob is not older than 2h ahead", map[string]string{"user_info": "created > {now}+2h"}, false},
		{"bob level as int", map[string]string{"user_info": "level > 5"}, true},
	}, forUser(bob))
	e.check(t, []condCheck{
		{"no user", map[string]string{"user_info": "givenname == Alice"}, false},
	}, func() *Call { return &Call{Event: "token_init", Caller: condAdmin} })

	for _, bad := range []string{"level ~ 3", "level = 3", "== 3", "level ==", "created < {now}-7w"} {
		t.Run("malformed "+bad, func(t *testing.T) {
			if e.hold(t, map[string]string{"user_info": bad}, forUser(alice)()) {
				t.Fatalf("malformed %q held", bad)
			}
		})
	}
	if !strings.Contains(e.log.String(), `"condition":"user_info"`) {
		t.Fatalf("malformed user_info not logged: %s", e.log.String())
	}
}

func TestConditionCounter(t *testing.T) {
	e := newCondEnv(t)
	if _, err := e.svc.AddCounter(t.Context(), "failures", 5, false); err != nil {
		t.Fatal(err)
	}
	call := func() *Call {
		return &Call{Event: "validate_check", Caller: condAdmin, Response: &Response{Status: true}}
	}
	e.check(t, []condCheck{
		{"greater", map[string]string{"counter": "failures > 3"}, true},
		{"equal", map[string]string{"counter": "failures == 5"}, true},
		{"not equal", map[string]string{"counter": "failures != 5"}, false},
		{"smaller", map[string]string{"counter": "failures < 5"}, false},
		{"at most", map[string]string{"counter": "failures <= 5"}, true},
		{"missing counter is 0", map[string]string{"counter": "other == 0"}, true},
		{"missing counter not greater", map[string]string{"counter": "other > 0"}, false},
		{"malformed", map[string]string{"counter": "failures five"}, false},
	}, call)
	if _, err := e.svc.AddCounter(t.Context(), "failures", 10, false); err != nil {
		t.Fatal(err)
	}
	e.check(t, []condCheck{{"after increase", map[string]string{"counter": "failures > 10"}, true}}, call)
}

func TestConditionTokenProperties(t *testing.T) {
	e := newCondEnv(t)
	alice := e.user(t, "alice")
	tok := e.enroll(t, "TOTP0042", "totp", &alice)
	if !slices.Contains(tok.Realms, "realmc") {
		t.Fatalf("token realms %v lack the owner's realm", tok.Realms)
	}
	e.enroll(t, "NOREALM", "hotp", nil)
	call := func() *Call { return condTokenCall("token_info", "TOTP0042", user.User{}, &Response{Status: true}) }
	e.check(t, []condCheck{
		{"tokenrealm", map[string]string{"tokenrealm": "realmc"}, true},
		{"tokenrealm list", map[string]string{"tokenrealm": "other, realmc"}, true},
		{"tokenrealm other", map[string]string{"tokenrealm": "other"}, false},
		{"tokenresolver", map[string]string{"tokenresolver": "condres"}, true},
		{"tokenresolver other", map[string]string{"tokenresolver": "condres2"}, false},
		{"serial from start", map[string]string{"serial": "TOTP"}, true},
		{"serial not from start", map[string]string{"serial": "0042"}, false},
		{"serial anywhere", map[string]string{"serial": ".*42$"}, true},
		{"serial bad regex", map[string]string{"serial": "TOTP["}, false},
		{"has owner", map[string]string{"token_has_owner": "True"}, true},
		{"has no owner", map[string]string{"token_has_owner": "False"}, false},
		{"has owner malformed", map[string]string{"token_has_owner": "maybe"}, false},
		{"not orphaned", map[string]string{"token_is_orphaned": "False"}, true},
		{"orphaned", map[string]string{"token_is_orphaned": "True"}, false},
		{"not locked", map[string]string{"token_locked": "False"}, true},
		{"locked", map[string]string{"token_locked": "True"}, false},
		{"in validity", map[string]string{"token_validity_period": "True"}, true},
		{"outside validity", map[string]string{"token_validity_period": "False"}, false},
		{"not in container", map[string]string{"token_is_in_container": "False"}, true},
		{"in container", map[string]string{"token_is_in_container": "True"}, false},
		{"rollout enrolled", map[string]string{"rollout_state": "enrolled"}, true},
		{"rollout clientwait", map[string]string{"rollout_state": "clientwait"}, false},
	}, call)

	// A token without realms is not checked for realms and user stores,
	// nor has it an owner.
	e.check(t, []condCheck{
		{"tokenrealm skipped", map[string]string{"tokenrealm": "other"}, true},
		{"tokenresolver skipped", map[string]string{"tokenresolver": "condres2"}, true},
		{"no owner", map[string]string{"token_has_owner": "False"}, true},
		{"no owner is not orphaned", map[string]string{"token_is_orphaned": "False"}, true},
	}, func() *Call { return condTokenCall("token_info", "NOREALM", user.User{}, &Response{Status: true}) })

	// Changed properties.
	e.update(t, "TOTP0042", func(t *token.Token) {
		t.FailCount, t.MaxFail = 10, 10
		t.Info[token.InfoValidityEnd] = token.FormatValidity(condStart.Add(-time.Hour))
		t.RolloutState = token.StateClientWait
	})
	e.check(t, []condCheck{
		{"locked now", map[string]string{"token_locked": "True"}, true},
		{"not unlocked", map[string]string{"token_locked": "False"}, false},
		{"expired validity", map[string]string{"token_validity_period": "False"}, true},
		{"not valid", map[string]string{"token_validity_period": "True"}, false},
		{"rollout list", map[string]string{"rollout_state": "verify,clientwait"}, true},
	}, call)
}

func TestConditionTokenOrphaned(t *testing.T) {
	e := newCondEnv(t)
	alice := e.user(t, "alice")
	e.enroll(t, "ORPHAN1", "hotp", &alice)
	// The owner disappears from the user store (another uid now).
	e.update(t, "ORPHAN1", func(t *token.Token) {
		t.Owner = &user.User{Login: "ghost", Realm: "realmc", Resolver: "condres", UID: "999"}
	})
	call := func() *Call { return condTokenCall("token_info", "ORPHAN1", user.User{}, &Response{Status: true}) }
	e.check(t, []condCheck{
		{"orphaned", map[string]string{"token_is_orphaned": "True"}, true},
		{"not orphaned", map[string]string{"token_is_orphaned": "False"}, false},
		{"has owner", map[string]string{"token_has_owner": "True"}, true},
		// The vanished owner is the empty user.
		{"owner realm gone", map[string]string{"realm": "realmc"}, false},
	}, call)
}

func TestConditionTokenCounters(t *testing.T) {
	e := newCondEnv(t)
	e.enroll(t, "CNT1", "hotp", nil)
	e.update(t, "CNT1", func(t *token.Token) {
		t.Count = 17
		t.FailCount = 2
		t.Info[token.InfoCountAuth] = "12"
		t.Info[token.InfoCountAuthSuccess] = "9"
	})
	call := func() *Call { return condTokenCall("validate_check", "CNT1", user.User{}, &Response{Status: true}) }
	e.check(t, []condCheck{
		{"otp_counter plain", map[string]string{"otp_counter": "17"}, true},
		{"otp_counter plain other", map[string]string{"otp_counter": "16"}, false},
		{"otp_counter greater", map[string]string{"otp_counter": ">16"}, true},
		{"otp_counter smaller", map[string]string{"otp_counter": "<17"}, false},
		{"count_auth equal", map[string]string{"count_auth": "==12"}, true},
		{"count_auth not equal", map[string]string{"count_auth": "!=12"}, false},
		{"count_auth spaces", map[string]string{"count_auth": "> 11"}, true},
		{"count_auth_success", map[string]string{"count_auth_success": "=9"}, true},
		{"count_auth_success smaller", map[string]string{"count_auth_success": "<9"}, false},
		{"count_auth_fail", map[string]string{"count_auth_fail": "3"}, true},
		{"count_auth_fail greater", map[string]string{"count_auth_fail": ">3"}, false},
		{"failcounter at least", map[string]string{"failcounter": ">=2"}, true},
		{"failcounter at most", map[string]string{"failcounter": "<=1"}, false},
		{"malformed", map[string]string{"failcounter": "two"}, false},
		{"malformed comparator", map[string]string{"failcounter": "~2"}, false},
	}, call)
}

func TestConditionIntegerForms(t *testing.T) {
	e := newCondEnv(t)
	ev := &condEval{r: &Run{Def: Definition{Name: "x"}, Call: &Call{}, svc: e.svc, facts: &facts{}}}
	for _, tc := range []struct {
		cond string
		have int64
		want bool
	}{
		{"5", 5, true}, {"5", 4, false}, {"==5", 5, true}, {"=5", 5, true}, {"!=5", 5, false}, {"!=5", 6, true},
		{"<5", 4, true}, {"<5", 5, false}, {">5", 6, true}, {">5", 5, false},
		{"<=5", 5, true}, {"=<5", 6, false}, {">=5", 5, true}, {"=>5", 4, false},
		{" > 5 ", 6, true}, {"-1", -1, true}, {">-1", 0, true},
		{"", 0, false}, {"five", 5, false}, {">>5", 6, false}, {"5.0", 5, false},
	} {
		got, err := ev.intCondition(tc.cond, tc.have)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%q against %d = %v, want %v", tc.cond, tc.have, got, tc.want)
		}
	}
}

func TestConditionUserTokenNumber(t *testing.T) {
	e := newCondEnv(t)
	alice := e.user(t, "alice")
	e.enroll(t, "A1", "hotp", &alice)
	e.enroll(t, "A2", "hotp", &alice)
	call := func() *Call { return &Call{Event: "token_init", Caller: condAdmin, User: alice} }
	e.check(t, []condCheck{
		{"two", map[string]string{"user_token_number": "2"}, true},
		{"more than two", map[string]string{"user_token_number": ">2"}, false},
		{"less than three", map[string]string{"user_token_number": "<3"}, true},
		{"no containers", map[string]string{"user_container_number": "0"}, true},
		{"containers", map[string]string{"user_container_number": ">0"}, false},
	}, call)
	carol := e.user(t, "carol")
	e.check(t, []condCheck{
		{"carol has none", map[string]string{"user_token_number": "0"}, true},
	}, func() *Call { return &Call{Event: "token_init", Caller: condAdmin, User: carol} })
	// Without a user the user number conditions are not checked.
	e.check(t, []condCheck{
		{"no user", map[string]string{"user_token_number": "7", "user_container_number": "3"}, true},
	}, func() *Call { return &Call{Event: "token_init", Caller: condAdmin} })
}

// TestConditionNoSingleToken: the token conditions are skipped (hold) when
// the call has no single token, as privacyIDEA skips them; token_locked
// then asks whether any token of the user is locked.
func TestConditionNoSingleToken(t *testing.T) {
	e := newCondEnv(t)
	alice := e.user(t, "alice")
	e.enroll(t, "B1", "hotp", &alice)
	e.enroll(t, "B2", "hotp", &alice)
	call := func() *Call {
		return &Call{Event: "validate_check", Caller: condAdmin, User: alice, Response: &Response{Status: true}}
	}
	skipped := map[string]string{
		"tokentype": "totp", "token_has_owner": "False", "token_is_orphaned": "True", "token_validity_period": "False",
		"token_is_in_container": "True", "rollout_state": "broken", "otp_counter": ">1000", "count_auth": ">1000",
		"count_auth_success": ">1000", "count_auth_fail": ">1000", "failcounter": ">1000", "last_auth": "1s",
		"tokeninfo": "x == y", "tokenrealm": "other", "tokenresolver": "condres2", "serial": "NOPE",
		"challenge_session": "nope", "challenge_expired": "True",
	}
	for k, v := range skipped {
		t.Run(k, func(t *testing.T) {
			if !e.hold(t, map[string]string{k: v}, call()) {
				t.Errorf("%s=%s did not hold without a single token", k, v)
			}
		})
	}
	e.check(t, []condCheck{
		{"no token locked", map[string]string{"token_locked": "True"}, false},
		{"no token locked, False", map[string]string{"token_locked": "False"}, true},
	}, call)
	e.update(t, "B2", func(t *token.Token) { t.FailCount, t.MaxFail = 5, 5 })
	e.check(t, []condCheck{
		{"a token locked", map[string]string{"token_locked": "True"}, true},
		{"a token locked, False", map[string]string{"token_locked": "False"}, false},
	}, call)
	// A serial of no token: no single token either.
	e.check(t, []condCheck{
		{"unknown serial", map[string]string{"tokentype": "totp", "failcounter": "9"}, true},
	}, func() *Call { return condTokenCall("token_info", "MISSING", user.User{}, &Response{Status: true}) })
}

func TestConditionLastAuth(t *testing.T) {
	e := newCondEnv(t)
	e.enroll(t, "LA1", "hotp", nil)
	call := func() *Call { return condTokenCall("validate_check", "LA1", user.User{}, &Response{Status: true}) }
	e.check(t, []condCheck{
		{"never used", map[string]string{"last_auth": "5d"}, true},
	}, call)
	// Stored as the validator writes it: three days ago.
	e.update(t, "LA1", func(t *token.Token) {
		t.Info[token.InfoLastAuth] = condStart.Add(-72 * time.Hour).Format("2006-01-02 15:04:05.000000-0700")
	})
	e.check(t, []condCheck{
		{"newer than 5d", map[string]string{"last_auth": "5d"}, false},
		{"older than 2d", map[string]string{"last_auth": "2d"}, true},
		{"older than 70h", map[string]string{"last_auth": "70h"}, true},
		{"newer than 80h", map[string]string{"last_auth": "80h"}, false},
		{"older than 30m", map[string]string{"last_auth": "30m"}, true},
		{"newer than 1y", map[string]string{"last_auth": "1y"}, false},
		{"malformed", map[string]string{"last_auth": "5x"}, false},
		{"malformed compound", map[string]string{"last_auth": "1d12h"}, false},
	}, call)
	// The ISO form of older versions.
	e.update(t, "LA1", func(t *token.Token) {
		t.Info[token.InfoLastAuth] = condStart.Add(-72 * time.Hour).Format(time.RFC3339)
	})
	e.check(t, []condCheck{
		{"iso newer than 5d", map[string]string{"last_auth": "5d"}, false},
		{"iso older than 2d", map[string]string{"last_auth": "2d"}, true},
	}, call)
	e.update(t, "LA1", func(t *token.Token) { t.Info[token.InfoLastAuth] = "yesterday" })
	e.check(t, []condCheck{{"unreadable", map[string]string{"last_auth": "2d"}, false}}, call)
}

func TestConditionTokenInfo(t *testing.T) {
	e := newCondEnv(t)
	e.enroll(t, "TI1", "hotp", nil)
	e.update(t, "TI1", func(t *token.Token) {
		t.Info["next_check"] = "2026-03-01T00:00+0000"
		t.Info["shoe_size"] = "42"
		t.Info["color"] = "blue"
	})
	call := func() *Call { return condTokenCall("token_info", "TI1", user.User{}, &Response{Status: true}) }
	e.check(t, []condCheck{
		{"date before now", map[string]string{"tokeninfo": "next_check < {now}"}, true},
		{"date after now", map[string]string{"tokeninfo": "next_check > {now}"}, false},
		{"date before now-7d", map[string]string{"tokeninfo": "next_check < {now}-7d"}, true},
		{"date before now-10d", map[string]string{"tokeninfo": "next_check < {now}-10d"}, false},
		{"date after now-30d", map[string]string{"tokeninfo": "next_check > {now}-30d"}, true},
		{"int", map[string]string{"tokeninfo": "shoe_size > 9"}, true},
		{"int equal", map[string]string{"tokeninfo": "shoe_size == 42"}, true},
		{"text", map[string]string{"tokeninfo": "color == blue"}, true},
		{"text not equal", map[string]string{"tokeninfo": "color != blue"}, false},
		{"missing", map[string]string{"tokeninfo": "size == 42"}, false},
		{"malformed", map[string]string{"tokeninfo": "color is blue"}, false},
	}, call)
}

func TestConditionChallenge(t *testing.T) {
	e := newCondEnv(t)
	alice := e.user(t, "alice")
	tok := e.enroll(t, "CH1", "hotp", &alice)
	ctx := t.Context()
	if _, _, err := e.tokens.CreateSessionChallenge(ctx, tok, "11111", "enrollment", nil, nil); err != nil {
		t.Fatal(err)
	}
	withTx := func(txid string, asParam bool) func() *Call {
		return func() *Call {
			c := condTokenCall("validate_check", "CH1", alice, &Response{Status: true, Value: false})
			if asParam {
				c.Params["transaction_id"] = txid
			} else {
				c.TransactionID = txid
			}
			return c
		}
	}
	e.check(t, []condCheck{
		{"session", map[string]string{"challenge_session": "enroll"}, true},
		{"session regex", map[string]string{"challenge_session": "enrol+ment"}, true},
		{"session not from start", map[string]string{"challenge_session": "ment"}, false},
		{"session bad regex", map[string]string{"challenge_session": "("}, false},
		{"not expired", map[string]string{"challenge_expired": "False"}, true},
		{"expired", map[string]string{"challenge_expired": "True"}, false},
	}, withTx("11111", false))
	e.check(t, []condCheck{
		{"transaction from the parameters", map[string]string{"challenge_session": "^enrollment$"}, true},
	}, withTx("11111", true))
	e.check(t, []condCheck{
		{"no challenge of the transaction", map[string]string{"challenge_session": "nope", "challenge_expired": "True"}, true},
	}, withTx("22222", false))

	e.clock.Add(time.Hour)
	e.check(t, []condCheck{
		{"expired now", map[string]string{"challenge_expired": "True"}, true},
		{"no longer unexpired", map[string]string{"challenge_expired": "False"}, false},
	}, withTx("11111", false))

	// Without a transaction all challenges of the token count: two are
	// ambiguous.
	if _, _, err := e.tokens.CreateChallenge(ctx, tok, "33333", "", nil, nil); err != nil {
		t.Fatal(err)
	}
	e.check(t, []condCheck{
		{"two challenges", map[string]string{"challenge_expired": "True"}, false},
		{"two challenges, session", map[string]string{"challenge_session": ".*"}, false},
	}, withTx("", false))
}

func TestConditionSpecs(t *testing.T) {
	e := newCondEnv(t)
	specs := e.svc.ConditionSpecs(t.Context())
	want := []string{"realm", "resolver", "logged_in_user", "user_info", "result_value", "result_status",
		"result_authentication", "detail_message", "detail_error_message", "client_ip", "tokenrealm", "tokenresolver",
		"tokentype", "serial", "token_has_owner", "token_is_orphaned", "token_locked", "token_validity_period",
		"token_is_in_container", "rollout_state", "otp_counter", "count_auth", "count_auth_success", "count_auth_fail",
		"failcounter", "user_token_number", "user_container_number", "last_auth", "tokeninfo", "counter",
		"challenge_session", "challenge_expired"}
	if len(specs) != len(want) {
		t.Errorf("%d conditions, want %d", len(specs), len(want))
	}
	for _, k := range want {
		c, ok := specs[k]
		if !ok {
			t.Errorf("condition %s missing", k)
			continue
		}
		if c.Desc == "" || !slices.Contains([]string{"str", "multi", "regexp"}, c.Type) ||
			!slices.Contains([]string{"token", "general", "user", "counter", "challenge"}, c.Group) {
			t.Errorf("condition %s: %+v", k, c)
		}
	}
	for k, g := range map[string]string{"realm": "user", "tokentype": "token", "result_value": "general",
		"counter": "counter", "failcounter": "counter", "challenge_expired": "challenge", "serial": "token"} {
		if specs[k].Group != g {
			t.Errorf("%s group %q, want %q", k, specs[k].Group, g)
		}
	}
	if specs["serial"].Type != "regexp" || specs["tokentype"].Type != "multi" || specs["result_value"].Type != "str" {
		t.Errorf("types: serial %s, tokentype %s, result_value %s", specs["serial"].Type, specs["tokentype"].Type, specs["result_value"].Type)
	}

	b, err := json.Marshal(specs)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]struct {
		Type  string `json:"type"`
		Desc  string `json:"desc"`
		Value []any  `json:"value"`
		Group string `json:"group"`
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	names := func(k string) []string {
		var out []string
		for _, v := range wire[k].Value {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%s value %v is not {\"name\": ...}", k, v)
			}
			out = append(out, m["name"].(string))
		}
		slices.Sort(out)
		return out
	}
	strs := func(k string) []string {
		var out []string
		for _, v := range wire[k].Value {
			out = append(out, v.(string))
		}
		return out
	}
	if got := names("realm"); !slices.Equal(got, []string{"other", "realmc"}) {
		t.Errorf("realm values %v", got)
	}
	if got := names("tokenresolver"); !slices.Equal(got, []string{"condres", "condres2"}) {
		t.Errorf("tokenresolver values %v", got)
	}
	if got := names("tokentype"); !slices.Contains(got, "hotp") || !slices.Contains(got, "totp") {
		t.Errorf("tokentype values %v", got)
	}
	if got := strs("logged_in_user"); !slices.Equal(got, []string{"admin", "user"}) {
		t.Errorf("logged_in_user values %v", got)
	}
	if got := strs("result_authentication"); !slices.Equal(got, []string{"ACCEPT", "REJECT", "CHALLENGE", "DECLINED"}) {
		t.Errorf("result_authentication values %v", got)
	}
	if got := strs("rollout_state"); !slices.Contains(got, "clientwait") || !slices.Contains(got, "enrolled") {
		t.Errorf("rollout_state values %v", got)
	}
	if got := strs("token_locked"); !slices.Equal(got, []string{"True", "False"}) {
		t.Errorf("token_locked values %v", got)
	}
	if wire["user_info"].Value != nil || wire["counter"].Value != nil {
		t.Errorf("free-form conditions have choices: %v %v", wire["user_info"].Value, wire["counter"].Value)
	}

	// Without realms and tokens the lists are empty, not a failure.
	bare := New(Config{Store: e.st})
	t.Cleanup(bare.Close)
	if got := bare.ConditionSpecs(t.Context()); len(got["realm"].Value) != 0 || len(got["tokentype"].Value) != 0 {
		t.Errorf("bare service choices: realm %v, tokentype %v", got["realm"].Value, got["tokentype"].Value)
	}
}

// condRecorder is a module that records its runs.
type condRecorder struct {
	mu   sync.Mutex
	runs []string
}

func (m *condRecorder) Name() string        { return "CondRecorder" }
func (m *condRecorder) Positions() []string { return []string{Post, Pre} }
func (m *condRecorder) DefaultAbort() bool  { return false }
func (m *condRecorder) Actions(context.Context) (map[string]map[string]OptionSpec, error) {
	return map[string]map[string]OptionSpec{"record": {}}, nil
}
func (m *condRecorder) Check(context.Context, Definition) error { return nil }
func (m *condRecorder) Do(_ context.Context, r *Run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs = append(m.runs, r.Def.Name)
	return nil
}

// TestConditionsInDispatch: Service.Run runs only the definitions whose
// conditions hold.
func TestConditionsInDispatch(t *testing.T) {
	e := newCondEnv(t)
	rec := &condRecorder{}
	e.svc.Register(rec)
	ctx := t.Context()
	alice := e.user(t, "alice")
	e.enroll(t, "D1", "hotp", &alice)
	e.update(t, "D1", func(t *token.Token) { t.FailCount = 3 })
	for i, d := range []struct {
		name  string
		conds map[string]string
	}{
		{"fails", map[string]string{"result_value": "False", "failcounter": ">2"}},
		{"success", map[string]string{"result_value": "True"}},
		{"from admins", map[string]string{"logged_in_user": "admin", "client_ip": "192.0.2.0/24"}},
		{"other realm", map[string]string{"realm": "other"}},
		{"always", nil},
	} {
		if _, err := e.svc.Set(ctx, Definition{Name: d.name, Active: true, Ordering: i, Events: []string{"validate_check"},
			HandlerModule: "CondRecorder", Action: "record", Position: Post, Conditions: d.conds}, false); err != nil {
			t.Fatal(err)
		}
	}
	c := condTokenCall("validate_check", "D1", alice, &Response{Status: true, Value: false})
	if err := e.svc.Run(ctx, Post, c); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := []string{"fails", "from admins", "always"}; !slices.Equal(rec.runs, want) {
		t.Fatalf("ran %v, want %v", rec.runs, want)
	}
}

func TestConditionCompareValues(t *testing.T) {
	now := condStart
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"10", "9", 1},
		{"9", "10", -1},
		{" 7", "7 ", 0},
		{"abc", "abd", -1},
		{"2026-03-01T00:00+0000", "2026-03-01T01:00+0100", 0},
		{"2026-03-01", "01.03.2026", 0},
		{"2026-03-01 10:00:00.123456+0000", "2026-03-01T10:00+0000", 1},
		{"+1d", "2026-03-10T13:00+0000", 1},
		{"2026-03-01", "abc", -1}, // a date and text compare as text
	} {
		if got := condCompareValues(tc.a, tc.b, now); got != tc.want {
			t.Errorf("compare %q, %q = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestConditionReplaceNow(t *testing.T) {
	now := condStart
	for _, tc := range []struct{ in, want string }{
		{"x < {now}", "x < 2026-03-10T12:00+0000"},
		{"x < {now}-7d", "x < 2026-03-03T12:00+0000"},
		{"x > {now}+2h", "x > 2026-03-10T14:00+0000"},
		{"x > {current_time}-30m", "x > 2026-03-10T11:30+0000"},
		{"x == y", "x == y"},
	} {
		got, ok := condReplaceNow(tc.in, now)
		if !ok || got != tc.want {
			t.Errorf("%q -> %q %v, want %q", tc.in, got, ok, tc.want)
		}
	}
}

// FuzzConditionValues: no condition value makes the evaluation panic.
func FuzzConditionValues(f *testing.F) {
	for _, s := range []string{"a == b", "level > {now}-7d", ">=5", "=<", "{now}+99999999999d", "x <", "((", "!10.0.0.0/8", "5d"} {
		f.Add(s)
	}
	s := New(Config{})
	f.Cleanup(s.Close)
	f.Fuzz(func(t *testing.T, v string) {
		tok := &token.Token{Serial: "F1", Type: "hotp", Info: map[string]string{"a": "1", token.InfoLastAuth: "2026-03-01 10:00:00.000000+0000"}}
		r := &Run{Def: Definition{Name: "fuzz"}, Call: &Call{Caller: caller.Caller{Client: netip.MustParseAddr("10.0.0.1")}},
			svc: s, facts: &facts{tokenDone: true, tok: tok, userDone: true, infoDone: true, info: map[string]string{"a": "2026-01-01"}}}
		ctx := context.Background()
		for _, name := range []string{"tokeninfo", "user_info", "failcounter", "otp_counter", "last_auth", "client_ip",
			"serial", "detail_message", "tokentype", "rollout_state", "token_has_owner"} {
			r.Def.Conditions = map[string]string{name: v}
			if _, err := r.conditionsHold(ctx); err != nil {
				t.Fatalf("%s=%q: %v", name, v, err)
			}
		}
	})
}
