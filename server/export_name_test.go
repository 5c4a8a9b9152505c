package server_test

import (
	"mime"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestPolicyExportName is catalogue B7 for GET /policy/export/{file}: the
// name is only a download name, and whatever it holds the answer carries
// one Content-Disposition header with one filename parameter that has no
// directory part, no line break or other control character, no quote and
// at most 128 bytes of valid UTF-8. A name with a slash never reaches the
// export.
func TestPolicyExportName(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	long := "x" + strings.Repeat("ä", 5*1024) // 10 KiB; the 128th byte is inside an ä
	cases := []struct {
		name, file, want string // want "" = only the invariants
	}{
		{"plain", "my-policies.cfg", "my-policies.cfg"},
		{"traversal", "../../etc/passwd", "404"},
		{"traversal without slashes", "....etcpasswd", "etcpasswd"},
		{"backslash traversal", `..\..\windows\win.ini`, "windowswin.ini"},
		{"header injection", "a\r\nSet-Cookie: x=y", "aSet-Cookie: x=y"},
		{"second filename parameter", `"; filename*=UTF-8''evil.sh`, "filename*=UTF-8''evil.sh"},
		{"second filename parameter with an ellipsis", "\"; filename*=…", "filename*=…"},
		{"bidi override", "cfg.\u202eexe.txt", "cfg.exe.txt"},
		{"C1 control", "a\u0085b", "ab"},
		{"10 KiB name", long, "x" + strings.Repeat("ä", 63)},
		{"only dots", "..", "policies.cfg"},
		{"invalid UTF-8", "a\xffb.cfg", "ab.cfg"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "GET", "/policy/export/"+url.PathEscape(tc.file), "", "", map[string]string{"Authorization": tok})
			if tc.want == "404" {
				// A name with a slash (even as %2F) is more than one path
				// segment: the export route never sees it.
				if r.status != 404 || r.header.Get("Content-Disposition") != "" {
					t.Fatalf("status %d, Content-Disposition %q", r.status, r.header.Get("Content-Disposition"))
				}
				return
			}
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if len(r.header.Values("Set-Cookie")) != 0 || len(r.header.Values("Content-Disposition")) != 1 {
				t.Fatalf("headers %v", r.header)
			}
			cd := r.header.Get("Content-Disposition")
			if strings.ContainsAny(cd, "\r\n") {
				t.Fatalf("Content-Disposition %q holds a line break", cd)
			}
			disp, params, err := mime.ParseMediaType(cd)
			if err != nil || disp != "attachment" || len(params) != 1 {
				t.Fatalf("Content-Disposition %q: %s %v %v", cd, disp, params, err)
			}
			got := params["filename"]
			if len(got) > 128 || !utf8.ValidString(got) || strings.ContainsAny(got, `/\";`) || strings.HasPrefix(got, ".") ||
				strings.IndexFunc(got, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0 {
				t.Errorf("filename %q from %q", got, cd)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("filename %q, want %q (header %q)", got, tc.want, cd)
			}
		})
	}
}

// TestTokenLoadNameIsNotAPath is catalogue B7 for token import file
// names: POST /token/load/{filename} takes the tokens from the request
// body only; the name is a label, never opened (a name of a readable
// system file with no body is "missing file"), and a name with a slash
// never reaches the import.
func TestTokenLoadNameIsNotAPath(t *testing.T) {
	e := newEnv(t)
	tok := e.login(t)
	for _, name := range []string{"/etc/passwd", "../../etc/passwd"} {
		r := e.do(t, "POST", "/token/load/"+url.PathEscape(name), formType, form("type", "oathcsv"), map[string]string{"Authorization": tok})
		if (r.status != 404 && r.status != 405) || strings.Contains(string(r.body), "imported") {
			t.Errorf("%s: status %d %s", name, r.status, r.body)
		}
	}
	r := e.do(t, "POST", "/token/load/passwd", formType, form("type", "oathcsv"), map[string]string{"Authorization": tok})
	if r.status != 400 || !strings.Contains(string(r.body), "Missing parameter: file") {
		t.Errorf("a name without a file: %d %s", r.status, r.body)
	}
}
