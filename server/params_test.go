package server_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/server"
)

const (
	ctFormBody = "application/x-www-form-urlencoded"
	ctJSONBody = "application/json"
)

// paramReq describes one request for decodeParams.
type paramReq struct {
	method  string // default POST
	target  string // default /x
	ctype   string
	body    string
	ua      string // User-Agent; empty means none
	headers map[string]string
	path    httprouter.Params
	limit   int64 // default BodyLimitAdmin
	chunked bool  // unknown length (ContentLength -1)
}

func (s paramReq) request(t testing.TB) *http.Request {
	t.Helper()
	method, target := s.method, s.target
	if method == "" {
		method = http.MethodPost
	}
	if target == "" {
		target = "/x"
	}
	var body io.Reader
	if s.body != "" {
		body = strings.NewReader(s.body)
	}
	r := httptest.NewRequest(method, target, body)
	if s.ctype != "" {
		r.Header.Set("Content-Type", s.ctype)
	}
	if s.ua != "" {
		r.Header.Set("User-Agent", s.ua)
	}
	for k, v := range s.headers {
		r.Header.Set(k, v)
	}
	if s.chunked {
		r.ContentLength = -1
		r.Body = io.NopCloser(strings.NewReader(s.body))
	}
	return r
}

func (s paramReq) decode(t testing.TB) (*server.Params, error) {
	t.Helper()
	limit := s.limit
	if limit == 0 {
		limit = server.BodyLimitAdmin
	}
	return server.DecodeParams(s.request(t), s.path, limit)
}

func mustDecodeParams(t *testing.T, s paramReq) *server.Params {
	t.Helper()
	p, err := s.decode(t)
	if err != nil {
		t.Fatalf("decodeParams: %v", err)
	}
	return p
}

func wantParamValues(t *testing.T, p *server.Params, want map[string]any) {
	t.Helper()
	for k, w := range want {
		got, ok := p.Raw(k)
		if !ok {
			t.Errorf("%s: missing, want %#v", k, w)
			continue
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %#v, want %#v", k, got, w)
		}
	}
}

// wantParamError checks that err is an *apierr.Error of kind Parameter whose
// text contains sub.
func wantParamError(t *testing.T, err error, sub string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", sub)
	}
	e, ok := errors.AsType[*apierr.Error](err)
	if !ok {
		t.Fatalf("error %v (%T) is not an *apierr.Error", err, err)
	}
	if e.Code != apierr.Parameter {
		t.Errorf("error %q has code %v, want Parameter", e, e.Code)
	}
	if !strings.Contains(e.Error(), sub) {
		t.Errorf("error %q does not contain %q", e, sub)
	}
}

func multipartFormBody(t testing.TB, fields [][2]string, files [][3]string) (body, ctype string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, f := range fields {
		if err := w.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		fw, err := w.CreateFormFile(f[0], f[1])
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(fw, f[2])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String(), w.FormDataContentType()
}

func TestDecodeParamsPrecedence(t *testing.T) {
	serial := httprouter.Params{{Key: "serial", Value: "PATH"}}
	tests := []struct {
		name string
		req  paramReq
		want map[string]any
	}{
		{
			name: "query beats form",
			req:  paramReq{target: "/x?user=query", ctype: ctFormBody, body: "user=form"},
			want: map[string]any{"user": "query"},
		},
		{
			name: "form fills keys the query lacks",
			req:  paramReq{target: "/x?user=query", ctype: ctFormBody, body: "realm=form&user=form"},
			want: map[string]any{"user": "query", "realm": "form"},
		},
		{
			name: "JSON overrides query",
			req:  paramReq{target: "/x?user=query&realm=r", ctype: ctJSONBody, body: `{"user":"json"}`},
			want: map[string]any{"user": "json", "realm": "r"},
		},
		{
			name: "path overrides query and form",
			req:  paramReq{target: "/x?serial=query", ctype: ctFormBody, body: "serial=form", path: serial},
			want: map[string]any{"serial": "PATH"},
		},
		{
			name: "path overrides JSON",
			req:  paramReq{target: "/x?serial=query", ctype: ctJSONBody, body: `{"serial":"json"}`, path: serial},
			want: map[string]any{"serial": "PATH"},
		},
		{
			name: "GET query only",
			req:  paramReq{method: http.MethodGet, target: "/x?a=1&b=&c"},
			want: map[string]any{"a": "1", "b": "", "c": ""},
		},
		{
			name: "semicolon is not a separator",
			req:  paramReq{target: "/x?a=1;b=2"},
			want: map[string]any{"a": "1;b=2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantParamValues(t, mustDecodeParams(t, tt.req), tt.want)
		})
	}
}

func TestDecodeParamsRepeatedKeys(t *testing.T) {
	mp, mpType := multipartFormBody(t, [][2]string{{"a", "first"}, {"a", "second"}}, nil)
	tests := []struct {
		name string
		req  paramReq
		want any
	}{
		{"query first wins", paramReq{target: "/x?a=first&a=second"}, "first"},
		{"form first wins", paramReq{ctype: ctFormBody, body: "a=first&a=second"}, "first"},
		{"multipart first wins", paramReq{ctype: mpType, body: mp}, "first"},
		{"query before form", paramReq{target: "/x?a=first", ctype: ctFormBody, body: "a=second"}, "first"},
		{"JSON last wins as in Python", paramReq{ctype: ctJSONBody, body: `{"a":"first","a":"second"}`}, "second"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantParamValues(t, mustDecodeParams(t, tt.req), map[string]any{"a": tt.want})
		})
	}
}

// lwpFormEncode encodes a pair as Perl's URI->query_form (used by LWP's
// POST with a form) does: the reserved characters ;/?:@&=+,$[]% and
// everything outside URI's unreserved set are escaped, a space becomes '+'.
func lwpFormEncode(key, value string) string {
	enc := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c == ' ':
				b.WriteByte('+')
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
				strings.IndexByte("-_.~!*'()", c) >= 0:
				b.WriteByte(c)
			default:
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
		return b.String()
	}
	return enc(key) + "=" + enc(value)
}

func TestDoubleDecodingRealClients(t *testing.T) {
	t.Run("FreeRADIUS password through LWP", func(t *testing.T) {
		// The plugin percent-encodes the password itself ...
		const password = "p w%+&=ä"
		const fromPlugin = "p%20w%25+&=%C3%A4" // the value after one form decoding (real-clients.md)
		// ... and LWP form-encodes that string once more.
		body := lwpFormEncode("user", "alice") + "&" + lwpFormEncode("pass", fromPlugin)
		if want := "user=alice&pass=p%2520w%2525%2B%26%3D%25C3%25A4"; body != want {
			t.Fatalf("LWP body %q, want %q", body, want)
		}
		p := mustDecodeParams(t, paramReq{ctype: ctFormBody, body: body, ua: "libwww-perl/6.72"})
		wantParamValues(t, p, map[string]any{"user": "alice", "pass": password})
	})
	t.Run("PAM password with a literal %41", func(t *testing.T) {
		// pam_privacyidea curl-escapes the password: %41 -> %2541.
		body := "pass=" + url.QueryEscape("x%41y") + "&user=bob"
		p := mustDecodeParams(t, paramReq{ctype: ctFormBody, body: body, ua: "PAM/1.1.0"})
		wantParamValues(t, p, map[string]any{"pass": "xAy", "user": "bob"})
	})
	t.Run("privacyIDEA's own tests: pass=quote(code)", func(t *testing.T) {
		p := mustDecodeParams(t, paramReq{ctype: ctFormBody, body: "pass=" + url.QueryEscape(url.PathEscape("pin 12%34"))})
		wantParamValues(t, p, map[string]any{"pass": "pin 12%34"})
	})
}

func TestDoubleDecoding(t *testing.T) {
	tests := []struct {
		name  string
		value string // the value as it is after one form decoding
		ua    string
		want  string
	}{
		{"percent escape decoded", "%41", "", "A"},
		{"plus stays plus", "a+b", "", "a+b"},
		{"encoded plus decoded to plus", "a%2Bb", "", "a+b"},
		{"space escape", "a%20b", "", "a b"},
		{"invalid hex stays", "%zz", "", "%zz"},
		{"one hex digit stays", "%4", "", "%4"},
		{"trailing percent stays", "abc%", "", "abc%"},
		{"double percent", "%%41", "", "%A"},
		{"lone lead byte", "%C3", "", "\uFFFD"},
		{"lone lead byte then letter", "%C3x", "", "\uFFFDx"},
		{"truncated three-byte sequence is one U+FFFD", "%E2%82", "", "\uFFFD"},
		{"overlong is replaced per byte", "%C0%80", "", "\uFFFD\uFFFD"},
		{"surrogate is replaced", "%ED%A0%80", "", "\uFFFD\uFFFD\uFFFD"},
		{"two-byte UTF-8", "%C3%A4", "", "ä"},
		{"lower-case hex", "%c3%a4", "", "ä"},
		{"non-ASCII passes", "ä€😀", "", "ä€😀"},
		{"non-ASCII beside escapes", "ä%41€", "", "äA€"},
		{"lead byte cut by a raw character", "%C3ä%A4", "", "\uFFFDä\uFFFD"},
		{"no escapes", "plain", "", "plain"},
		{"other user agent decodes", "%41", "python-requests/2.31", "A"},
		{"mozilla naming an exception later decodes", "%41", "Mozilla/5.0 (privacyidea-cp/3.0)", "A"},
		{"privacyidea-cp skips", "%41", "privacyidea-cp/3.0", "%41"},
		{"privacyidea-cp without version skips", "%41", "privacyidea-cp", "%41"},
		{"privacyIDEA-LDAP-Proxy skips", "%41", "privacyIDEA-LDAP-Proxy/1.2 Twisted", "%41"},
		{"simplesamlphp upper case skips", "%41", "SIMPLESAMLPHP/2.1", "%41"},
		{"product name is trimmed", "%41", " simpleSAMLphp /2", "%41"},
		{"exception keeps plus", "a+b", "privacyidea-cp/3.0", "a+b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, src := range []string{"query", "form", "multipart"} {
				var s paramReq
				switch src {
				case "query":
					s = paramReq{target: "/x?v=" + url.QueryEscape(tt.value)}
				case "form":
					s = paramReq{ctype: ctFormBody, body: "v=" + url.QueryEscape(tt.value)}
				case "multipart":
					s.body, s.ctype = multipartFormBody(t, [][2]string{{"v", tt.value}}, nil)
				}
				s.ua = tt.ua
				p := mustDecodeParams(t, s)
				if got, _ := p.Str("v"); got != tt.want {
					t.Errorf("%s: got %q, want %q", src, got, tt.want)
				}
			}
		})
	}
}

func TestDoubleDecodingNotApplied(t *testing.T) {
	tests := []struct {
		name string
		req  paramReq
		key  string
		want string
	}{
		{"JSON values", paramReq{ctype: ctJSONBody, body: `{"pass":"%41+%zz"}`}, "pass", "%41+%zz"},
		{"path params", paramReq{path: httprouter.Params{{Key: "serial", Value: "%41"}}}, "serial", "%41"},
		{"keys", paramReq{ctype: ctFormBody, body: "%2541=x"}, "%41", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustDecodeParams(t, tt.req)
			if got, err := p.Str(tt.key); err != nil || got != tt.want {
				t.Errorf("got %q, %v, want %q", got, err, tt.want)
			}
		})
	}
	t.Run("missing User-Agent decodes", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/x?v=%2541", nil)
		r.Header.Del("User-Agent")
		p, err := server.DecodeParams(r, nil, server.BodyLimitAuth)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := p.Str("v"); got != "A" {
			t.Errorf("got %q, want A", got)
		}
	})
}

func TestUnquote(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"plain", "abc", "abc"},
		{"escape", "%41%42", "AB"},
		{"plus", "+", "+"},
		{"percent only", "%", "%"},
		{"four-byte", "%F0%9F%98%80", "😀"},
		{"four-byte truncated", "%F0%9F%98", "\uFFFD"},
		{"above U+10FFFF", "%F4%90%80%80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"invalid input byte replaced", "a\xffb", "a\uFFFDb"},
		{"NUL decoded", "%00", "\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := server.Unquote(tt.in); got != tt.want {
				t.Errorf("Unquote(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestDecodeParamsBodies(t *testing.T) {
	mp, mpType := multipartFormBody(t,
		[][2]string{{"user", "alice"}, {"pass", "%41"}},
		[][3]string{{"file", "tokens.csv", "serial,seed\n"}, {"file", "second.csv", "ignored"}})
	tests := []struct {
		name string
		req  paramReq
		want map[string]any
		none []string // keys that must be absent
	}{
		{
			name: "multipart fields",
			req:  paramReq{ctype: mpType, body: mp},
			want: map[string]any{"user": "alice", "pass": "A"},
			none: []string{"file"},
		},
		{
			name: "JSON with charset",
			req:  paramReq{ctype: "application/json; charset=utf-8", body: `{"user":"alice","otplen":6,"genkey":true,"x":null,"l":["a"],"o":{"k":"v"}}`},
			want: map[string]any{"user": "alice", "otplen": json.Number("6"), "genkey": true, "x": nil,
				"l": []any{"a"}, "o": map[string]any{"k": "v"}},
		},
		{
			name: "JSON with another charset is read as UTF-8",
			req:  paramReq{ctype: "application/json; charset=latin-1", body: `{"user":"müller"}`},
			want: map[string]any{"user": "müller"},
		},
		{
			name: "JSON with an invalid media parameter",
			req:  paramReq{ctype: "application/json; charset", body: `{"user":"alice"}`},
			want: map[string]any{"user": "alice"},
		},
		{
			name: "vendor +json type",
			req:  paramReq{ctype: "application/vnd.x+json", body: `{"user":"alice"}`},
			want: map[string]any{"user": "alice"},
		},
		{
			name: "JSON byte order mark",
			req:  paramReq{ctype: ctJSONBody, body: "\ufeff{\"user\":\"alice\"}"},
			want: map[string]any{"user": "alice"},
		},
		{
			name: "empty JSON body",
			req:  paramReq{target: "/x?a=1", ctype: ctJSONBody},
			want: map[string]any{"a": "1"},
		},
		{
			name: "blank JSON body",
			req:  paramReq{target: "/x?a=1", ctype: ctJSONBody, body: " \r\n\t"},
			want: map[string]any{"a": "1"},
		},
		{
			name: "JSON at the depth limit",
			req:  paramReq{ctype: ctJSONBody, body: `{"a":` + strings.Repeat("[", server.MaxJSONDepth-1) + strings.Repeat("]", server.MaxJSONDepth-1) + "}"},
		},
		{
			name: "brackets inside JSON strings are not nesting",
			req:  paramReq{ctype: ctJSONBody, body: `{"a":"` + strings.Repeat(`[{\"`, 200) + `"}`},
		},
		{
			name: "text/plain body ignored",
			req:  paramReq{target: "/x?a=1", ctype: "text/plain", body: "user=alice"},
			want: map[string]any{"a": "1"},
			none: []string{"user"},
		},
		{
			name: "text/plain JSON body ignored",
			req:  paramReq{ctype: "text/plain", body: `{"user":"alice"}`},
			none: []string{"user"},
		},
		{
			name: "no Content-Type body ignored",
			req:  paramReq{target: "/x?a=1", body: "user=alice"},
			want: map[string]any{"a": "1"},
			none: []string{"user"},
		},
		{
			name: "form body under a JSON type is refused elsewhere, JSON under a form type is a key",
			req:  paramReq{ctype: ctFormBody, body: `{"user":"alice"}`},
			want: map[string]any{`{"user":"alice"}`: ""},
			none: []string{"user"},
		},
		{
			name: "form body on GET is read",
			req:  paramReq{method: http.MethodGet, ctype: ctFormBody, body: "user=alice"},
			want: map[string]any{"user": "alice"},
		},
		{
			name: "invalid UTF-8 in a form value",
			req:  paramReq{ctype: ctFormBody, body: "raw=a\xffb&esc=a%FFb&key\xff=1"},
			want: map[string]any{"raw": "a\uFFFDb", "esc": "a\uFFFDb", "key\uFFFD": "1"},
		},
		{
			name: "invalid UTF-8 in a query value",
			req:  paramReq{target: "/x?v=%C3%28"},
			want: map[string]any{"v": "\uFFFD("},
		},
		{
			name: "NUL bytes pass",
			req:  paramReq{ctype: ctFormBody, body: "v=a%00b"},
			want: map[string]any{"v": "a\x00b"},
		},
		{
			name: "identity Content-Encoding accepted",
			req:  paramReq{ctype: ctFormBody, body: "v=1", headers: map[string]string{"Content-Encoding": "identity"}},
			want: map[string]any{"v": "1"},
		},
		{
			name: "body at the limit",
			req:  paramReq{ctype: ctFormBody, body: "v=" + strings.Repeat("a", 64<<10-2), limit: server.BodyLimitAuth},
		},
		{
			name: "chunked body at the limit",
			req:  paramReq{ctype: ctFormBody, body: "v=" + strings.Repeat("a", 64<<10-2), limit: server.BodyLimitAuth, chunked: true},
		},
		{
			name: "empty multipart body",
			req:  paramReq{target: "/x?a=1", ctype: "multipart/form-data; boundary=B"},
			want: map[string]any{"a": "1"},
		},
		{
			name: "exactly the parameter limit",
			req:  paramReq{ctype: ctFormBody, body: manyFormPairs(server.MaxParams)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustDecodeParams(t, tt.req)
			wantParamValues(t, p, tt.want)
			for _, k := range tt.none {
				if p.Has(k) {
					t.Errorf("%s present, want absent", k)
				}
			}
		})
	}
	t.Run("multipart file", func(t *testing.T) {
		p := mustDecodeParams(t, paramReq{ctype: mpType, body: mp})
		data, name, ok := p.File("file")
		if !ok || string(data) != "serial,seed\n" || name != "tokens.csv" {
			t.Errorf("File = %q, %q, %v", data, name, ok)
		}
		if _, _, ok := p.File("user"); ok {
			t.Error("a field is reported as a file")
		}
	})
}

func manyFormPairs(n int) string {
	pairs := make([]string, n)
	for i := range pairs {
		pairs[i] = fmt.Sprintf("k%d=v", i)
	}
	return strings.Join(pairs, "&")
}

func jsonObjectOfSize(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"k%d":1`, i)
	}
	return "{" + strings.Join(keys, ",") + "}"
}

func TestDecodeParamsErrors(t *testing.T) {
	big := "pass=" + strings.Repeat("a", 65<<10)
	bigMP, bigMPType := multipartFormBody(t, [][2]string{{"pass", strings.Repeat("a", 65<<10)}}, nil)
	tests := []struct {
		name string
		req  paramReq
		want string // part of the error text
	}{
		{"JSON array", paramReq{ctype: ctJSONBody, body: `[{"user":"alice"}]`}, "must be an object"},
		{"JSON string", paramReq{ctype: ctJSONBody, body: `"user"`}, "must be an object"},
		{"JSON null", paramReq{ctype: ctJSONBody, body: `null`}, "must be an object"},
		{"JSON trailing garbage", paramReq{ctype: ctJSONBody, body: `{"user":"alice"}garbage`}, "data after its end"},
		{"JSON two objects", paramReq{ctype: ctJSONBody, body: `{} {}`}, "data after its end"},
		{"JSON invalid", paramReq{ctype: ctJSONBody, body: `{"user":}`}, "not valid JSON"},
		{"JSON truncated", paramReq{ctype: ctJSONBody, body: `{"user":"alice"`}, "not valid JSON"},
		{"form under a JSON type", paramReq{ctype: ctJSONBody, body: "user=alice"}, "not valid JSON"},
		{"JSON invalid UTF-8", paramReq{ctype: ctJSONBody, body: "{\"user\":\"a\xffb\"}"}, "not valid UTF-8"},
		{"JSON nested 100 levels", paramReq{ctype: ctJSONBody, body: `{"a":` + strings.Repeat("[", 99) + strings.Repeat("]", 99) + "}"}, "nested too deeply"},
		{"JSON nested one level too deep", paramReq{ctype: ctJSONBody, body: `{"a":` + strings.Repeat("[", server.MaxJSONDepth) + strings.Repeat("]", server.MaxJSONDepth) + "}"}, "nested too deeply"},
		{"JSON nested 10000 levels", paramReq{ctype: ctJSONBody, body: strings.Repeat(`{"a":`, 10000) + strings.Repeat("}", 10000)}, "nested too deeply"},
		{"65 KiB form body with the 64 KiB limit", paramReq{ctype: ctFormBody, body: big, limit: server.BodyLimitAuth}, "request body too large"},
		{"65 KiB chunked form body", paramReq{ctype: ctFormBody, body: big, limit: server.BodyLimitAuth, chunked: true}, "request body too large"},
		{"65 KiB chunked JSON body", paramReq{ctype: ctJSONBody, body: `{"pass":"` + big + `"}`, limit: server.BodyLimitAuth, chunked: true}, "request body too large"},
		{"65 KiB multipart body", paramReq{ctype: bigMPType, body: bigMP, limit: server.BodyLimitAuth}, "request body too large"},
		{"65 KiB chunked multipart body", paramReq{ctype: bigMPType, body: bigMP, limit: server.BodyLimitAuth, chunked: true}, "request body too large"},
		{"gzip Content-Encoding", paramReq{ctype: ctFormBody, body: "\x1f\x8b", headers: map[string]string{"Content-Encoding": "gzip"}}, `Content-Encoding "gzip" is not supported`},
		{"gzip among identity", paramReq{ctype: ctJSONBody, body: "{}", headers: map[string]string{"Content-Encoding": "identity, gzip"}}, "is not supported"},
		{"deflate without a body", paramReq{method: http.MethodGet, headers: map[string]string{"Content-Encoding": "deflate"}}, "is not supported"},
		{"multipart without boundary", paramReq{ctype: "multipart/form-data", body: "x"}, "without a boundary"},
		{"malformed multipart", paramReq{ctype: "multipart/form-data; boundary=B", body: "no boundary here"}, "malformed multipart"},
		{"multipart cut short", paramReq{ctype: "multipart/form-data; boundary=B", body: "--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nxyz"}, "malformed multipart"},
		{"1001 query parameters", paramReq{method: http.MethodGet, target: "/x?" + manyFormPairs(server.MaxParams+1)}, "too many parameters"},
		{"1001 form parameters", paramReq{ctype: ctFormBody, body: manyFormPairs(server.MaxParams + 1)}, "too many parameters"},
		{"10000 form parameters", paramReq{ctype: ctFormBody, body: manyFormPairs(10000)}, "too many parameters"},
		{"1001 repeats of one key", paramReq{ctype: ctFormBody, body: strings.Repeat("a=1&", server.MaxParams+1)}, "too many parameters"},
		{"query and form together", paramReq{target: "/x?" + manyFormPairs(600), ctype: ctFormBody, body: manyFormPairs(401)}, "too many parameters"},
		{"1001 JSON keys", paramReq{ctype: ctJSONBody, body: jsonObjectOfSize(server.MaxParams + 1)}, "too many parameters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.req.decode(t)
			wantParamError(t, err, tt.want)
			if p != nil {
				t.Errorf("params %v returned with the error", p)
			}
		})
	}
}

// conversionParams is a JSON body with every JSON type plus query strings.
func conversionParams(t *testing.T) *server.Params {
	t.Helper()
	return mustDecodeParams(t, paramReq{
		target: "/x?qs=abc&qempty=&qint=42&qneg=-7&qplus=%2B5&qjunk=4x2&qspace=%205&qhuge=99999999999999999999" +
			"&qtrue=True&qTRUE=TRUE&qone=1&qzero=0&qmixed=tRuE&qlist=%20a,%20b%20,,c,&qblank=%20,%20",
		ctype: ctJSONBody,
		body: `{"s":"str","n":123456,"f":1.5,"one":1,"onef":1.0,"two":2,"t":true,"fa":false,"nul":null,` +
			`"arr":["a"," b ",""],"arrn":["a",7],"arrb":["a",true],"obj":{"k":"v"},"empty":"","e20":1e20}`,
	})
}

func TestParamsStr(t *testing.T) {
	p := conversionParams(t)
	tests := []struct {
		key     string
		want    string
		wantErr bool
	}{
		{"missing", "", false},
		{"qs", "abc", false},
		{"qempty", "", false},
		{"s", "str", false},
		{"n", "123456", false},
		{"f", "1.5", false},
		{"e20", "1e20", false},
		{"t", "", true},
		{"fa", "", true},
		{"nul", "", true},
		{"arr", "", true},
		{"obj", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := p.Str(tt.key)
			if tt.wantErr {
				wantParamError(t, err, "Parameter "+tt.key+" must be a string")
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Str = %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestParamsRequired(t *testing.T) {
	p := conversionParams(t)
	tests := []struct {
		key, want, errText string
	}{
		{"qs", "abc", ""},
		{"n", "123456", ""},
		{"missing", "", "Missing parameter: missing"},
		{"qempty", "", "Missing parameter: qempty"},
		{"empty", "", "Missing parameter: empty"},
		{"nul", "", "Missing parameter: nul"},
		{"obj", "", "must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := p.Required(tt.key)
			if tt.errText != "" {
				wantParamError(t, err, tt.errText)
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Required = %q, %v, want %q", got, err, tt.want)
			}
		})
	}
	t.Run("missing is apierr.MissingParameter", func(t *testing.T) {
		_, err := p.Required("user")
		want := apierr.MissingParameter("user")
		e, ok := errors.AsType[*apierr.Error](err)
		if !ok || e.Message() != want.Message() {
			t.Errorf("got %v, want %v", err, want)
		}
	})
}

func TestParamsBoolean(t *testing.T) {
	p := conversionParams(t)
	tests := []struct {
		key     string
		want    bool
		wantErr bool
	}{
		{"missing", false, false},
		{"qtrue", true, false},
		{"qTRUE", true, false},
		{"qone", true, false},
		{"qzero", false, false},
		{"qmixed", false, false},
		{"qs", false, false},
		{"qempty", false, false},
		{"t", true, false},
		{"fa", false, false},
		{"one", true, false},
		{"onef", true, false},
		{"two", false, false},
		{"nul", false, false},
		{"s", false, false},
		{"arr", false, true},
		{"obj", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := p.Boolean(tt.key)
			if tt.wantErr {
				wantParamError(t, err, "must be a boolean")
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Boolean = %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

func TestParamsInteger(t *testing.T) {
	p := conversionParams(t)
	tests := []struct {
		key     string
		want    int
		errText string
	}{
		{"missing", 10, ""},
		{"qempty", 10, ""},
		{"nul", 10, ""},
		{"qint", 42, ""},
		{"qneg", -7, ""},
		{"qplus", 5, ""},
		{"n", 123456, ""},
		{"qjunk", 0, "must be an integer"},
		{"qspace", 0, "must be an integer"},
		{"qs", 0, "must be an integer"},
		{"f", 0, "must be an integer"},
		{"e20", 0, "must be an integer"},
		{"qhuge", 0, "out of range"},
		{"t", 0, "must be an integer"},
		{"arr", 0, "must be an integer"},
		{"obj", 0, "must be an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := p.Integer(tt.key, 10)
			if tt.errText != "" {
				wantParamError(t, err, tt.errText)
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Integer = %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

func TestParamsList(t *testing.T) {
	p := conversionParams(t)
	tests := []struct {
		key     string
		want    []string
		wantErr bool
	}{
		{"missing", nil, false},
		{"nul", nil, false},
		{"qlist", []string{"a", "b", "c"}, false},
		{"qblank", []string{}, false},
		{"qempty", []string{}, false},
		{"qs", []string{"abc"}, false},
		{"n", []string{"123456"}, false},
		{"arr", []string{"a", "b"}, false},
		{"arrn", []string{"a", "7"}, false},
		{"arrb", nil, true},
		{"t", nil, true},
		{"obj", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			got, err := p.List(tt.key)
			if tt.wantErr {
				wantParamError(t, err, "must be a list of strings")
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("List = %#v, %v, want %#v", got, err, tt.want)
			}
		})
	}
}

func TestParamsKeysPrefixedSet(t *testing.T) {
	p := mustDecodeParams(t, paramReq{target: "/x?type.BindPW=password&desc.BindPW=pw&BindPW=secret&type.=x&user=u"})
	if got, want := p.Keys(), []string{"BindPW", "desc.BindPW", "type.", "type.BindPW", "user"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Keys = %q, want %q", got, want)
	}
	if got, want := p.Prefixed("type."), map[string]any{"BindPW": "password"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Prefixed = %v, want %v", got, want)
	}
	if got := p.Prefixed("nothing."); len(got) != 0 {
		t.Errorf("Prefixed(nothing.) = %v", got)
	}
	p.Set("user", "imposed")
	p.Set("realm", "r")
	wantParamValues(t, p, map[string]any{"user": "imposed", "realm": "r"})

	var zero server.Params
	zero.Set("a", "b")
	if v, _ := zero.Str("a"); v != "b" {
		t.Errorf("Set on a zero Params: %q", v)
	}
}

func TestParamsStringRedacted(t *testing.T) {
	const secret = "s3cr3tVALUE"
	mp, mpType := multipartFormBody(t, [][2]string{{"pass", secret}}, [][3]string{{"upload", secret + ".csv", secret}})
	tests := []struct {
		name string
		req  paramReq
		keys []string
	}{
		{"form", paramReq{target: "/x?otp=" + secret, ctype: ctFormBody, body: "user=alice&pass=" + secret}, []string{"otp", "pass", "user"}},
		{"JSON", paramReq{ctype: ctJSONBody, body: `{"pass":"` + secret + `","nested":{"pin":"` + secret + `"},"list":["` + secret + `"]}`}, []string{"list", "nested", "pass"}},
		{"multipart", paramReq{ctype: mpType, body: mp}, []string{"pass", "upload"}},
		{"path", paramReq{path: httprouter.Params{{Key: "serial", Value: secret}}}, []string{"serial"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustDecodeParams(t, tt.req)
			for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
				for _, arg := range []any{p, *p} {
					out := fmt.Sprintf(format, arg)
					if strings.Contains(out, secret) {
						t.Errorf("%s of %T leaks the value: %s", format, arg, out)
					}
					for _, k := range tt.keys {
						if !strings.Contains(out, k) {
							t.Errorf("%s of %T lacks key %q: %s", format, arg, k, out)
						}
					}
				}
			}
			if out, err := json.Marshal(p); err != nil || strings.Contains(string(out), secret) {
				t.Errorf("json.Marshal = %s, %v", out, err)
			}
		})
	}
}

func BenchmarkDecodeParamsForm(b *testing.B) {
	body := []byte("user=alice&realm=example&pass=1234%25287082")
	rd := bytes.NewReader(body)
	r := httptest.NewRequest(http.MethodPost, "/validate/check", nil)
	r.Header.Set("Content-Type", ctFormBody)
	r.Header.Set("User-Agent", "PAM/1.1.0")
	r.ContentLength = int64(len(body))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		r.Body = io.NopCloser(rd)
		p, err := server.DecodeParams(r, nil, server.BodyLimitAuth)
		if err != nil {
			b.Fatal(err)
		}
		if v, _ := p.Str("pass"); v != "1234(7082" {
			b.Fatalf("pass = %q", v)
		}
	}
}
