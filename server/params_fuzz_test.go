package server_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/server"
)

// FuzzUnquote checks the second percent-decoding: it never panics, always
// returns valid UTF-8, leaves valid strings without '%' unchanged and is
// idempotent on strings without '%'. Seeds: testdata/fuzz/FuzzUnquote.
func FuzzUnquote(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		got := server.Unquote(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Unquote(%q) = %q: invalid UTF-8", s, got)
		}
		if strings.Contains(s, "%") {
			return
		}
		if utf8.ValidString(s) && got != s {
			t.Fatalf("Unquote(%q) = %q, want it unchanged", s, got)
		}
		if again := server.Unquote(got); again != got {
			t.Fatalf("Unquote not idempotent on %q: %q then %q", s, got, again)
		}
	})
}

// paramsFuzzContentTypes are the content types FuzzDecodeParams tries every body with.
var paramsFuzzContentTypes = []string{
	"application/x-www-form-urlencoded",
	"multipart/form-data; boundary=XB",
	"multipart/form-data",
	"application/json",
	"application/json; charset=utf-8",
	"text/plain",
	"",
}

// FuzzDecodeParams feeds random query strings and bodies to decodeParams
// under each content type, with and without the second decoding. It never
// panics; every error is an *apierr.Error of kind Parameter; on success
// every string value is valid UTF-8, the parameter count is within the
// limit and the path parameter wins. Seeds: testdata/fuzz/FuzzDecodeParams.
func FuzzDecodeParams(f *testing.F) {
	path := httprouter.Params{{Key: "serial", Value: "PATH%41"}}
	f.Fuzz(func(t *testing.T, query string, body []byte) {
		for _, ct := range paramsFuzzContentTypes {
			for _, ua := range []string{"", "privacyidea-cp/3.0"} {
				r := httptest.NewRequest(http.MethodPost, "/x", bytes.NewReader(body))
				r.URL.RawQuery = query
				if ct != "" {
					r.Header.Set("Content-Type", ct)
				}
				if ua != "" {
					r.Header.Set("User-Agent", ua)
				}
				p, err := server.DecodeParams(r, path, server.BodyLimitAuth)
				if err != nil {
					e, ok := errors.AsType[*apierr.Error](err)
					if !ok || e.Code != apierr.Parameter {
						t.Fatalf("%s: error %v (%T) is not a Parameter *apierr.Error", ct, err, err)
					}
					if p != nil {
						t.Fatalf("%s: params returned with error %v", ct, err)
					}
					continue
				}
				keys := p.Keys()
				if len(keys) > server.MaxParams+len(path) {
					t.Fatalf("%s: %d keys", ct, len(keys))
				}
				for _, k := range keys {
					if !utf8.ValidString(k) {
						t.Fatalf("%s: key %q is not valid UTF-8", ct, k)
					}
					if v, _ := p.Raw(k); v != nil {
						if s, ok := v.(string); ok && !utf8.ValidString(s) {
							t.Fatalf("%s: value of %q is not valid UTF-8: %q", ct, k, s)
						}
					}
				}
				if v, _ := p.Str("serial"); v != "PATH%41" {
					t.Fatalf("%s: serial = %q, want the path value", ct, v)
				}
				_ = p.String()
			}
		}
	})
}
