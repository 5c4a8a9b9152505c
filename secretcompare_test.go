package authsrv_test

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// Catalogue S4's code check: a secret (PIN, OTP value, password, seed,
// key, hash, MAC, signature, API key) is never compared with == or !=,
// bytes.Equal, bytes.Compare, strings.EqualFold, strings.Compare or
// slices.Equal, whose time tells how much of it matched; the module
// compares secrets with internal/secret.Equal and EqualString (or
// crypto/subtle) instead.
//
// The checker reads the syntax only. An operand looks secret when the
// last word of its name (userPIN, wantHash, otpKey; keyLen and
// passOnNoUser do not) is one of secretWords. Comparisons with a literal,
// nil, a constant-looking name or len(...) reveal nothing about the
// secret and pass.

// secretWords are the head nouns of secret names, lowercase.
var secretWords = map[string]bool{
	"pin": true, "otp": true, "pass": true, "password": true, "passwd": true, "passphrase": true,
	"pw": true, "pwd": true, "secret": true, "seed": true, "key": true, "apikey": true,
	"hash": true, "hmac": true, "mac": true, "signature": true, "sig": true, "digest": true,
}

// plainCompareFuncs are the comparisons that stop at the first difference.
var plainCompareFuncs = map[string]bool{
	"bytes.Equal": true, "bytes.Compare": true, "bytes.EqualFold": true,
	"strings.EqualFold": true, "strings.Compare": true, "slices.Equal": true,
}

// secretCompareAllowed are reviewed findings, keyed by
// "path: function: expression" (or a prefix of it, "path: " for a whole
// file), each with why it is no timing leak.
var secretCompareAllowed = map[string]string{
	"piimport/read.go: reader.readConfig: strings.Compare(a.Key, b.Key)": "a.Key is the name of a privacyIDEA setting (the config table's Key column), sorted for a stable order; not key material",
	"store/copy.go: verifyCopy: got.keys != w.keys":                      "keys is a bucket's key count, compared after a copy; no secret and no caller-supplied guess",
	"token/service.go: UpgradePIN: t.PIN == old":                         "both sides are the stored PHC hash (salted), read by the server after a successful PIN check, as in admin's rehash; no caller-supplied guess is compared",
	"admin/admin.go: Service.rehash: rec.Hash != old":                    "both sides are the stored PHC hash (salted), read by the server after a successful login; no caller-supplied guess is compared",
	"audit/verify.go: ":           "the audit log's hash chain: digests of entries any auditor may read, compared by the verifier; no secret and no caller-supplied guess",
	"audit/audit.go: checkSeal: ": "a commit's seal digest over entry hashes any auditor may read, compared for sig_check and before retention seals a cut commit anew; no secret and no caller-supplied guess",
	"policy/condition.go: condHeader: strings.EqualFold(k, key)":      "key is an HTTP header name (a map key), not key material",
	"resolver/scim/store.go: lookup: strings.EqualFold(k, key)":       "key is a SCIM attribute name (a map key), not key material",
	"server/policies.go: call.queryParam: strings.EqualFold(k, key)":  "key is a query parameter name (a map key), not key material",
	"token/stats.go: peekHead: bytes.Equal(k, infoKindKey)":           "k is the name of a tokeninfo key in the stored record (tokenkind), compared with a constant name; no key material",
	"resolver/resolvertest/resolvertest.go: Run: ok != opt.Passwords": "opt.Passwords is a bool option of the test kit (whether the store checks passwords)",
}

// allowedCompare returns the allow-list entry that covers key.
func allowedCompare(key string) (string, bool) {
	for k := range secretCompareAllowed {
		if key == k || (strings.HasSuffix(k, ": ") && strings.HasPrefix(key, k)) {
			return k, true
		}
	}
	return "", false
}

// enumWords are last words of names that hold a kind, not a value
// (cfg.mode == modePIN, t.Type == typeHOTP): such a comparison is of an
// enumeration.
var enumWords = map[string]bool{"mode": true, "kind": true, "type": true, "typ": true, "state": true, "status": true, "scheme": true, "format": true, "algo": true, "alg": true}

// secretCompare is one finding.
type secretCompare struct {
	pos  token.Position
	fn   string // enclosing function
	expr string
}

func (c secretCompare) key() string {
	return filepath.ToSlash(c.pos.Filename) + ": " + c.fn + ": " + c.expr
}

// nameWords splits an identifier into lowercase words at underscores and
// case changes (userPIN: user, pin; APIKey: api, key; otp_value: otp,
// value).
func nameWords(name string) []string {
	var words []string
	rs := []rune(name)
	start := 0
	flush := func(end int) {
		if end > start {
			words = append(words, strings.ToLower(string(rs[start:end])))
		}
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '_' || unicode.IsDigit(r):
			flush(i)
			start = i + 1
		case i > start && unicode.IsUpper(r) &&
			(unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))):
			flush(i)
			start = i
		}
	}
	flush(len(rs))
	return words
}

// secretName reports whether an identifier names a secret: its last word
// (or the word before a last "value") is a secret word, singular or
// plural.
func secretName(name string) bool {
	w := nameWords(name)
	if len(w) == 0 {
		return false
	}
	last := w[len(w)-1]
	if (last == "value" || last == "values") && len(w) > 1 {
		last = w[len(w)-2] // otpValue, pin_value
	}
	return secretWords[last] || (strings.HasSuffix(last, "s") && secretWords[strings.TrimSuffix(last, "s")])
}

// constantName reports whether an identifier is a predeclared constant.
func constantName(name string) bool {
	return name == "true" || name == "false" || name == "nil" || name == "iota"
}

// harmless reports whether e reveals nothing when compared: a literal,
// nil, a constant-looking identifier (an exported name, or true/false),
// an exported name of an imported package (notify.Censored), len(...) or
// cap(...).
func harmless(e ast.Expr, imports map[string]bool) bool {
	if w := nameWords(exprName(e)); len(w) > 0 && enumWords[w[len(w)-1]] {
		return true
	}
	switch x := ast.Unparen(e).(type) {
	case *ast.BasicLit, *ast.CompositeLit:
		return true
	case *ast.Ident:
		return constantName(x.Name) || unicode.IsUpper(rune(x.Name[0]))
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		return ok && imports[id.Name] && x.Sel.IsExported()
	case *ast.CallExpr:
		if id, ok := x.Fun.(*ast.Ident); ok && (id.Name == "len" || id.Name == "cap") {
			return true
		}
	}
	return false
}

// looksSecret reports whether e names a secret value: an identifier,
// field, index or dereference with a secret name, a conversion of one
// (string(pin), []byte(key)), or a getter with a secret name (t.PIN()).
func looksSecret(e ast.Expr) bool {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		return secretName(x.Name)
	case *ast.SelectorExpr:
		return secretName(x.Sel.Name)
	case *ast.IndexExpr:
		return looksSecret(x.X)
	case *ast.StarExpr:
		return looksSecret(x.X)
	case *ast.SliceExpr:
		return looksSecret(x.X)
	case *ast.CallExpr:
		switch f := x.Fun.(type) {
		case *ast.ArrayType:
			return len(x.Args) == 1 && looksSecret(x.Args[0])
		case *ast.Ident:
			if f.Name == "string" {
				return len(x.Args) == 1 && looksSecret(x.Args[0])
			}
			return len(x.Args) == 0 && secretName(f.Name)
		case *ast.SelectorExpr:
			return len(x.Args) == 0 && secretName(f.Sel.Name)
		}
	}
	return false
}

// exprName returns the name an operand is known by (the identifier or
// the selected field), or "".
func exprName(e ast.Expr) string {
	switch x := ast.Unparen(e).(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return x.Sel.Name
	}
	return ""
}

// importNames returns the names f's imports are known by.
func importNames(f *ast.File) map[string]bool {
	names := map[string]bool{}
	for _, im := range f.Imports {
		path := strings.Trim(im.Path.Value, `"`)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		names[name] = true
	}
	return names
}

// findSecretCompares returns the plain comparisons of secrets in f.
func findSecretCompares(fset *token.FileSet, f *ast.File) []secretCompare {
	var out []secretCompare
	imports := importNames(f)
	src := func(e ast.Node) string {
		var b bytes.Buffer
		_ = printer.Fprint(&b, fset, e)
		return b.String()
	}
	for _, d := range f.Decls {
		fn := "(package)"
		if fd, ok := d.(*ast.FuncDecl); ok {
			fn = fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				fn = strings.TrimPrefix(src(fd.Recv.List[0].Type), "*") + "." + fn
			}
		}
		ast.Inspect(d, func(n ast.Node) bool {
			var a, b ast.Expr
			switch x := n.(type) {
			case *ast.BinaryExpr:
				if x.Op != token.EQL && x.Op != token.NEQ {
					return true
				}
				a, b = x.X, x.Y
			case *ast.CallExpr:
				sel, ok := x.Fun.(*ast.SelectorExpr)
				if !ok || len(x.Args) != 2 {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); !ok || !plainCompareFuncs[pkg.Name+"."+sel.Sel.Name] {
					return true
				}
				a, b = x.Args[0], x.Args[1]
			default:
				return true
			}
			if harmless(a, imports) || harmless(b, imports) || (!looksSecret(a) && !looksSecret(b)) {
				return true
			}
			out = append(out, secretCompare{pos: fset.Position(n.Pos()), fn: fn, expr: src(n)})
			return true
		})
	}
	return out
}

// TestNoPlainSecretCompare parses every non-test Go file of the module
// and fails on each plain comparison of a secret that the reviewed
// allow-list does not hold; it also fails on allow-list entries that no
// longer match anything, so the list cannot rot.
func TestNoPlainSecretCompare(t *testing.T) {
	fset := token.NewFileSet()
	var found []secretCompare
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		found = append(found, findSecretCompares(fset, f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("parsed only %d files", files)
	}
	used := map[string]bool{}
	for _, c := range found {
		if k, ok := allowedCompare(c.key()); ok {
			used[k] = true
			continue
		}
		t.Errorf("%s: %s compares a secret in variable time; use internal/secret.Equal or EqualString (or add a reviewed entry to secretCompareAllowed: %q)", c.pos, c.expr, c.key())
	}
	for _, k := range slices.Sorted(mapKeys(secretCompareAllowed)) {
		if !used[k] {
			t.Errorf("secretCompareAllowed holds %q, which matches nothing any more: remove it", k)
		}
	}
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestSecretCompareChecker: the checker finds the plain comparisons of a
// snippet and passes the harmless ones.
func TestSecretCompareChecker(t *testing.T) {
	const src = `package p

import (
	"bytes"
	"strings"

	"example.com/notify"
)

const Censored = "__CENSORED__"

type tok struct{ PIN string; otpKey []byte; keyLen int; PassOnNoUser bool; mode int }

const modePIN = 1

func bad(t tok, pin, otp string, wantHash, gotHash []byte, apiKey string, c struct{ OTP string }) bool {
	return t.PIN == pin ||
		otp != c.OTP ||
		bytes.Equal(wantHash, gotHash) ||
		strings.EqualFold(apiKey, "x"+otp) ||
		string(t.otpKey) == otp ||
		strings.Compare(t.PIN, pin) == 0
}

func good(t tok, pin string, key []byte, n int, user string) bool {
	return pin == "" || key == nil || len(key) == 32 || t.keyLen == n || t.PIN == Censored ||
		pin != notify.Censored || user == "admin" || t.PassOnNoUser == true || bytes.Equal(key, nil) ||
		t.mode == modePIN
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range findSecretCompares(fset, f) {
		got = append(got, c.fn+": "+c.expr)
	}
	want := []string{
		"bad: t.PIN == pin",
		"bad: otp != c.OTP",
		"bad: bytes.Equal(wantHash, gotHash)",
		`bad: strings.EqualFold(apiKey, "x"+otp)`,
		"bad: string(t.otpKey) == otp",
		"bad: strings.Compare(t.PIN, pin)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for name, want := range map[string]bool{
		"userPIN": true, "APIKey": true, "otp_value": true, "tokenValue": false, "wantHash": true, "keyLen": false,
		"passOnNoUser": false, "hashType": false, "seeds": true, "Signature": true, "monkey": false,
	} {
		if got := secretName(name); got != want {
			t.Errorf("secretName(%q) = %v, want %v", name, got, want)
		}
	}
}
