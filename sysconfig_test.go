package authsrv_test

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caller"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/sysconfig"
	"github.com/authsrv/authsrv/token"
)

var localCaller = caller.Caller{Role: caller.Local, RequestID: "sysconfig-test"}

// enrollOTPLen enrolls an HOTP token with a generated key and no otplen
// and returns its OTP length.
func enrollOTPLen(t *testing.T, s *authsrv.Server, serial string) int {
	t.Helper()
	tok, _, err := s.Tokens().Init(t.Context(), token.InitRequest{Type: "hotp", Serial: serial, Params: token.Params{"genkey": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	return tok.OTPLen
}

// settingValue reads key through Ops as who ("" when not answered).
func settingValue(t *testing.T, s *authsrv.Server, who caller.Caller, key string) string {
	t.Helper()
	list, err := s.Ops().SystemSettings(t.Context(), who, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		return ""
	}
	return list[0].Value
}

// TestSystemConfigOTPLenAcrossRestart: DefaultOtpLen=8 set through Ops
// makes the next enrollment 8 digits at once, and on a new server opened
// on the same data directory after Close.
func TestSystemConfigOTPLenAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	s := newServer(t, dir)
	if n := enrollOTPLen(t, s, "HOTP1"); n != 6 {
		t.Fatalf("default otplen = %d", n)
	}
	res, err := s.Ops().SetSystemConfig(t.Context(), localCaller, []sysconfig.Change{{Key: "DefaultOtpLen", Value: "8"}})
	if err != nil || res["DefaultOtpLen"] != "insert" {
		t.Fatalf("SetSystemConfig = %v, %v", res, err)
	}
	if n := enrollOTPLen(t, s, "HOTP2"); n != 8 {
		t.Errorf("otplen after setConfig on the running server = %d, want 8", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := newServer(t, dir)
	if n := enrollOTPLen(t, s2, "HOTP3"); n != 8 {
		t.Errorf("otplen on the restarted server = %d, want 8", n)
	}
	if v := settingValue(t, s2, localCaller, "DefaultOtpLen"); v != "8" {
		t.Errorf("DefaultOtpLen read = %q", v)
	}
}

// TestSystemConfigOptionsAreDefaults: the token settings of the options
// are what GET /system/ shows until a value is stored, and again after
// it is deleted; stored values reach the token settings.
func TestSystemConfigOptionsAreDefaults(t *testing.T) {
	s := configServer(t, authsrv.WithTokenSettings(token.Settings{DefaultOtpLen: 8, AutoResync: true,
		AutoResyncTimeout: 90 * time.Second, FailcounterClearTime: 30 * time.Second}))
	ctx := t.Context()
	for k, want := range map[string]string{"DefaultOtpLen": "8", "AutoResync": "True", "AutoResyncTimeout": "90",
		"failcounter_clear_timeout": "1", "DefaultSyncWindow": "1000", "PrependPin": "True"} {
		if got := settingValue(t, s, localCaller, k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// Not stored: the options' exact values stay in force.
	if set := s.Tokens().Settings(); set.FailcounterClearTime != 30*time.Second || !set.AutoResync {
		t.Errorf("settings before any write = %+v", set)
	}
	if _, err := s.Ops().SetSystemConfig(ctx, localCaller, []sysconfig.Change{
		{Key: "DefaultOtpLen", Value: "6"}, {Key: "AutoResync", Value: "False"}, {Key: "PrependPin", Value: "0"},
		{Key: "failcounter_clear_timeout", Value: "5"}, {Key: "totp.hashlib", Value: "sha256"},
		{Key: "email.identifier", Value: "mail1"}, {Key: "sms.identifier", Value: "gw1"},
		{Key: "HotpChallengeValidityTime", Value: "60"},
	}); err != nil {
		t.Fatal(err)
	}
	set := s.Tokens().Settings()
	if set.DefaultOtpLen != 6 || set.AutoResync || !set.AppendPIN || set.FailcounterClearTime != 5*time.Minute ||
		set.TOTPHashlib != "sha256" || set.Value("email.identifier") != "mail1" || set.Value("sms.identifier") != "gw1" ||
		set.Value("HotpChallengeValidityTime") != "60" || set.Value("email.validtime") != "120" {
		t.Errorf("token settings after setConfig = %+v", set)
	}
	if n := enrollOTPLen(t, s, "HOTP6"); n != 6 {
		t.Errorf("otplen = %d, want 6", n)
	}
	deleted, err := s.Ops().DeleteSystemConfig(ctx, localCaller, "DefaultOtpLen")
	if err != nil || !deleted {
		t.Fatalf("DeleteSystemConfig = %v, %v", deleted, err)
	}
	if got := settingValue(t, s, localCaller, "DefaultOtpLen"); got != "8" {
		t.Errorf("after delete DefaultOtpLen = %q, want the option's 8", got)
	}
	if n := enrollOTPLen(t, s, "HOTP8"); n != 8 {
		t.Errorf("otplen after delete = %d, want 8", n)
	}
	if deleted, err := s.Ops().DeleteSystemConfig(ctx, localCaller, "DefaultOtpLen"); err != nil || deleted {
		t.Errorf("second delete = %v, %v", deleted, err)
	}
}

// TestSystemConfigBadInputChangesNothing: unknown keys, wrong types and
// unknown identifiers are refused with a Parameter error naming the
// problem, nothing is stored (all-or-nothing), and the refusal is
// audited.
func TestSystemConfigBadInputChangesNothing(t *testing.T) {
	s := configServer(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name    string
		changes []sysconfig.Change
		want    string
	}{
		{"unknown key", []sysconfig.Change{{Key: "DefaultOtpLength", Value: "8"}}, "DefaultOtpLength"},
		{"non-integer window", []sysconfig.Change{{Key: "DefaultCountWindow", Value: "ten"}}, "DefaultCountWindow"},
		{"negative max fail count", []sysconfig.Change{{Key: "DefaultMaxFailCount", Value: "-3"}}, "DefaultMaxFailCount"},
		{"otplen 7", []sysconfig.Change{{Key: "DefaultOtpLen", Value: "7"}}, "6, 8"},
		{"unknown hash", []sysconfig.Change{{Key: "totp.hashlib", Value: "md5"}}, "sha1"},
		{"unknown SMTP server", []sysconfig.Change{{Key: "email.identifier", Value: "nosuch"}}, "no SMTP server"},
		{"unknown SMS gateway", []sysconfig.Change{{Key: "sms.identifier", Value: "nosuch"}}, "no SMS gateway"},
		{"one bad of two", []sysconfig.Change{{Key: "DefaultOtpLen", Value: "8"}, {Key: "DefaultSyncWindow", Value: "x"}}, "DefaultSyncWindow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(auditRows(t, s))
			_, err := s.Ops().SetSystemConfig(ctx, localCaller, tc.changes)
			if !apierr.Is(err, apierr.Parameter) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a Parameter error with %q", err, tc.want)
			}
			if got := settingValue(t, s, localCaller, "DefaultOtpLen"); got != "6" {
				t.Errorf("DefaultOtpLen = %q after a refused write", got)
			}
			rows := auditRows(t, s)
			// The refusal and the read above are audited.
			if len(rows) != before+2 {
				t.Fatalf("%d audit entries, want %d", len(rows), before+2)
			}
			if r := rows[before]; r["action"] != "POST /system/setConfig" || fmt.Sprint(r["success"]) == "1" || fmt.Sprint(r["success"]) == "true" {
				t.Errorf("audit entry of the refusal = %v", r)
			}
		})
	}
	if _, err := s.Ops().DeleteSystemConfig(ctx, localCaller, "NoSuchKey"); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("delete of an unknown key: %v", err)
	}
	if _, err := s.Ops().SetSystemDefaults(ctx, localCaller, map[string]string{"foo": "1"}); err == nil ||
		!strings.Contains(err.Error(), "Usage: parameters are: DefaultMaxFailCount") {
		t.Errorf("setDefault without a key: %v", err)
	} else if ae, ok := err.(*apierr.Error); !ok || ae.Number() != 77 {
		t.Errorf("setDefault usage error number: %v", err)
	}
}

// TestSystemConfigAuditAndRights: a write is audited in its transaction
// with "key=value, " info; an administrator needs configwrite,
// configdelete and configread once admin policies exist; a user reads
// only the public settings and writes nothing.
func TestSystemConfigAuditAndRights(t *testing.T) {
	s := configServer(t)
	ctx := t.Context()
	if _, err := s.Ops().SetSystemDefaults(ctx, localCaller, map[string]string{"defaultotplen": "8", "DEFAULTSYNCWINDOW": "500"}); err != nil {
		t.Fatal(err)
	}
	rows := auditRows(t, s)
	last := rows[len(rows)-1]
	if last["action"] != "POST /system/setDefault" || !strings.Contains(fmt.Sprint(last["info"]), "DefaultSyncWindow=500, ") ||
		!strings.Contains(fmt.Sprint(last["info"]), "DefaultOtpLen=8, ") {
		t.Errorf("audit entry = %v", last)
	}

	admin := caller.Caller{Role: caller.Admin, Name: "bob"}
	if _, err := s.Policies().Set(ctx, policy.Policy{Name: "others", Scope: policy.ScopeAdmin, Action: "configread", AdminUser: []string{"someone-else"}, Active: true, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ops().SetSystemConfig(ctx, admin, []sysconfig.Change{{Key: "DefaultOtpLen", Value: "6"}}); !apierr.Is(err, apierr.Policy) {
		t.Errorf("set without configwrite: %v", err)
	}
	if _, err := s.Ops().DeleteSystemConfig(ctx, admin, "DefaultOtpLen"); !apierr.Is(err, apierr.Policy) {
		t.Errorf("delete without configdelete: %v", err)
	}
	if _, err := s.Ops().SystemSettings(ctx, admin, ""); !apierr.Is(err, apierr.Policy) {
		t.Errorf("read without configread: %v", err)
	}
	if _, err := s.Ops().Random(ctx, admin, 16, "hex"); !apierr.Is(err, apierr.Policy) {
		t.Errorf("random without getrandom: %v", err)
	}

	u := caller.Caller{Role: caller.User, Name: "alice", Realm: "realm1"}
	list, err := s.Ops().SystemSettings(ctx, u, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, st := range list {
		names = append(names, st.Name)
	}
	if strings.Join(names, ",") != "IncFailCountOnFalsePin,PrependPin,ReturnSamlAttributes,splitAtSign" {
		t.Errorf("a user reads %v", names)
	}
	if v := settingValue(t, s, u, "DefaultOtpLen"); v != "" {
		t.Errorf("a user reads DefaultOtpLen = %q", v)
	}
	if _, err := s.Ops().SetSystemConfig(ctx, u, []sysconfig.Change{{Key: "PrependPin", Value: "0"}}); !apierr.Is(err, apierr.AuthMissingRight) {
		t.Errorf("a user's write: %v", err)
	}
	if v := settingValue(t, s, localCaller, "DefaultOtpLen"); v != "8" {
		t.Errorf("DefaultOtpLen = %q", v)
	}
}

// TestRandom: the random value has the asked length and encoding and is
// not in the audit log.
func TestRandom(t *testing.T) {
	s := configServer(t)
	v, err := s.Ops().Random(t.Context(), localCaller, 16, "")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := hex.DecodeString(v); err != nil || len(b) != 16 {
		t.Errorf("random = %q", v)
	}
	for _, r := range auditRows(t, s) {
		for k, col := range r {
			if strings.Contains(fmt.Sprint(col), v) {
				t.Errorf("the random value is in the audit column %s", k)
			}
		}
	}
	if _, err := s.Ops().Random(t.Context(), localCaller, 5000, ""); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("len 5000: %v", err)
	}
	if _, err := s.Ops().Random(t.Context(), localCaller, 8, "base32"); !apierr.Is(err, apierr.Parameter) {
		t.Errorf("encode base32: %v", err)
	}
}

// TestSystemConfigSharedByNodes: two servers on one store (two nodes); a
// setting written on one reaches the other's token settings within the
// recheck bound of a second, without a restart.
func TestSystemConfigSharedByNodes(t *testing.T) {
	st := storetest.Open(t)
	key := []byte(strings.Repeat("k", 32))
	open := func(node string) *authsrv.Server {
		s, err := authsrv.New(authsrv.WithStore(st), authsrv.WithEncKey(key), authsrv.WithJWTKey(key), cheapKDF, authsrv.WithNodeName(node))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open("node-a"), open("node-b")
	if b.Tokens().Settings().DefaultOtpLen != 6 {
		t.Fatal("default otplen")
	}
	if _, err := a.Ops().SetSystemConfig(t.Context(), localCaller, []sysconfig.Change{{Key: "DefaultOtpLen", Value: "8"}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Tokens().Settings().DefaultOtpLen != 8 {
		if time.Now().After(deadline) {
			t.Fatal("the second node never saw DefaultOtpLen=8")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
