package policy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
)

func TestCheckPIN(t *testing.T) {
	for _, tc := range []struct {
		name, pin, min, max, contents string
		msg                           string
	}{
		{"no rules", "", "", "", "", ""},
		{"long enough", "abcd", "4", "", "", ""},
		{"too short", "abc", "4", "", "", "The provided PIN is too short."},
		{"runes counted", "äöü", "3", "3", "", ""},
		{"too long", "abcdefg", "", "6", "", "The provided PIN is too long."},
		{"all groups", "ab1!", "", "", "cns", ""},
		{"a group missing", "ab1", "", "", "cns", "The provided PIN does not contain the required characters: cns"},
		{"one of the groups", "123", "", "", "+cs", "The provided PIN does not contain the required characters: +cs"},
		{"one of the groups given", "12!", "", "", "+cs", ""},
		{"forbidden group", "ab1", "", "", "-n", "The provided PIN does not contain the required characters: -n"},
		{"forbidden group absent", "abc", "", "", "-n", ""},
		{"others", "äb", "", "", "o", ""},
		{"unparsable length ignored", "a", "x", "y", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := policy.CheckPIN(tc.pin, tc.min, tc.max, tc.contents)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			ae, ok := errors.AsType[*apierr.Error](err)
			if !ok || ae.Error() != tc.msg || !apierr.Is(err, apierr.Policy) {
				t.Fatalf("error %v, want a policy error %q", err, tc.msg)
			}
		})
	}
}

func TestCheckPINRules(t *testing.T) {
	rules := map[string]string{"otp_pin_minlength": "4", "hotp_otp_pin_minlength": "6", "otp_pin_contents": "n"}
	value := func(action string) (string, error) { return rules[action], nil }
	// the type's own rule wins over the general one; the others still hold
	if err := policy.CheckPINRules("hotp", "12345", value); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("hotp, 5 digits: %v", err)
	}
	if err := policy.CheckPINRules("totp", "12345", value); err != nil {
		t.Fatalf("totp, 5 digits: %v", err)
	}
	if err := policy.CheckPINRules("totp", "abcde", value); err == nil || !strings.Contains(err.Error(), "required characters") {
		t.Fatalf("totp, no digit: %v", err)
	}
	boom := errors.New("store down")
	if err := policy.CheckPINRules("hotp", "123456", func(string) (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing lookup: %v", err)
	}
}
