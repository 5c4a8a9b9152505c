package ldap_test

import (
	"testing"

	"github.com/authsrv/authsrv/resolver"
	"github.com/authsrv/authsrv/resolver/resolvertest"
)

var searchKeys = []string{resolver.KeyGivenname, resolver.KeySurname, resolver.KeyEmail, resolver.KeyPhone, resolver.KeyMobile}

func TestConformance(t *testing.T) {
	cases := []struct {
		name     string
		editable bool
		extra    []string
	}{
		{"DN", false, nil},
		{"DN/Editable", true, nil},
		{"entryUUID", false, []string{"UIDTYPE", "entryUUID"}},
		{"entryUUID/Editable", true, []string{"UIDTYPE", "entryUUID"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := directory(t)
			cfg := config(s, tc.extra...)
			if tc.editable {
				cfg = editableConfig(s, tc.extra...)
			}
			resolvertest.Run(t, func(t *testing.T) resolver.Resolver { return open(t, cfg) },
				resolvertest.Options{Passwords: true, SearchKeys: searchKeys, Editable: tc.editable})
		})
	}
}
