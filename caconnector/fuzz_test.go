package caconnector_test

import (
	"crypto/elliptic"
	"crypto/x509/pkix"
	"testing"

	"github.com/authsrv/authsrv/caconnector"
	"github.com/authsrv/authsrv/caconnector/catest"
)

func FuzzParseTemplates(f *testing.F) {
	f.Add(templates)
	f.Add("a:\n  days: 1\n  extensions: ocsp\n  key_usage: digitalSignature\n")
	f.Add("a:\n\tdays: '7'\n")
	f.Fuzz(func(t *testing.T, src string) {
		got, err := caconnector.ParseTemplates(src)
		if err != nil {
			return
		}
		for name, tpl := range got {
			if name == "" || tpl.Days < 1 || tpl.Days > 36500 || tpl.Extensions == "" {
				t.Fatalf("accepted template %q = %+v", name, tpl)
			}
		}
	})
}

func FuzzParseRequest(f *testing.F) {
	f.Add(catest.Request(f, catest.ECKey(f, elliptic.P256()), pkix.Name{CommonName: "seed"}))
	f.Add("-----BEGIN CERTIFICATE REQUEST-----AAAA-----END CERTIFICATE REQUEST-----")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		csr, err := caconnector.ParseRequest(s)
		if err == nil && csr.CheckSignature() != nil {
			t.Fatal("a request with a bad signature was accepted")
		}
	})
}
