package ldap_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/testsvc"
	"github.com/authsrv/authsrv/resolver"
)

// TestTLS is reliability S9: ldaps:// and StartTLS to slapd with a
// self-signed CA verify with the CA configured, are refused without it,
// and work unverified only with TLS_VERIFY=False.
func TestTLS(t *testing.T) {
	t.Parallel()
	s := directory(t, testsvc.SlapdTLS())
	localhost := "ldaps://localhost:" + strconv.Itoa(s.TLSPort)
	cases := []struct {
		name  string
		extra []string
		ok    bool
	}{
		{"ldaps/CACERTIFICATE", []string{"LDAPURI", s.LDAPSURL, "CACERTIFICATE", s.CAPEM}, true},
		{"ldaps/TLS_CA_FILE", []string{"LDAPURI", s.LDAPSURL, "TLS_CA_FILE", s.CAFile}, true},
		{"ldaps/localhost", []string{"LDAPURI", localhost, "TLS_CA_FILE", s.CAFile}, true},
		{"ldaps/TLS1.3", []string{"LDAPURI", s.LDAPSURL, "TLS_CA_FILE", s.CAFile, "TLS_VERSION", "2"}, true},
		{"ldaps/NoCA", []string{"LDAPURI", s.LDAPSURL}, false},
		{"ldaps/NoCA/TLS_VERIFY=True", []string{"LDAPURI", s.LDAPSURL, "TLS_VERIFY", "True"}, false},
		{"ldaps/TLS_VERIFY=False", []string{"LDAPURI", s.LDAPSURL, "TLS_VERIFY", "False"}, true},
		{"StartTLS/CA", []string{"START_TLS", "True", "CACERTIFICATE", s.CAPEM}, true},
		{"StartTLS/NoCA", []string{"START_TLS", "1"}, false},
		{"StartTLS/TLS_VERIFY=0", []string{"START_TLS", "1", "TLS_VERIFY", "0"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := open(t, config(s, append(tc.extra, "TIMEOUT", "2")...))
			if tc.ok {
				wantWorking(t, r)
				if v, desc := r.Test(t.Context()); v != true || !strings.HasPrefix(desc, "Your LDAP config seems to be OK, 4 user objects found in ") {
					t.Errorf("Test = %v, %q", v, desc)
				}
				return
			}
			_, err := r.UserID(t.Context(), "alice")
			if !errors.Is(err, resolver.ErrUnavailable) || !strings.Contains(err.Error(), "certificate") {
				t.Errorf("UserID without the CA: %v", err)
			}
			if v, desc := r.Test(t.Context()); v != false || !strings.Contains(desc, "certificate") {
				t.Errorf("Test = %v, %q", v, desc)
			}
		})
	}
}
