package policy_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
)

// The flag has its own name so that it cannot clash with another golden
// test of this package.
var iniUpdate = flag.Bool("ini.update", false, "rewrite testdata/ini/export.golden")

func TestParseActions(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want map[string]any
	}{
		{"spec example", `enable, disable, otppin=userstore, smstext='Your OTP: {otp}\, bye', tokentype=hotp totp`,
			map[string]any{"enable": true, "disable": true, "otppin": "userstore", "smstext": `'Your OTP: {otp}\, bye'`, "tokentype": "hotp totp"}},
		{"empty", "", map[string]any{}},
		{"blank parts", " , enable,, ,", map[string]any{"enable": true}},
		{"no further trimming", "otppin = userstore", map[string]any{"otppin ": " userstore"}},
		{"first equals", "mangle=user/(.*)@x/\\1/=", map[string]any{"mangle": "user/(.*)@x/\\1/="}},
		{"empty value", "tokenlabel=", map[string]any{"tokenlabel": ""}},
		{"empty key", "=x", map[string]any{"": "x"}},
		{"last wins", "otppin=userstore, otppin=none", map[string]any{"otppin": "none"}},
		{"escaped comma in key", `a\,b`, map[string]any{`a\,b`: true}},
		{"leading comma escaped", `\,x, y`, map[string]any{`\,x`: true, "y": true}},
		{"negation and star", "*, !delete, -reset", map[string]any{"*": true, "!delete": true, "-reset": true}},
		{"python whitespace", "\x1cenable\u00a0,\tdisable\n", map[string]any{"enable": true, "disable": true}},
		{"trailing backslash", `x=a\`, map[string]any{"x": `a\`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := policy.ParseActions(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParseActions(%q) = %#v, want %#v", tc.in, got, tc.want)
			}
		})
	}
}

func TestFormatActions(t *testing.T) {
	cases := []struct {
		name string
		in   map[string]any
		want string
	}{
		{"sorted", map[string]any{"enable": true, "disable": true, "otppin": "userstore"}, "disable, enable, otppin=userstore"},
		{"empty", map[string]any{}, ""},
		{"nil", nil, ""},
		{"comma escaped", map[string]any{"smstext": "a, b"}, `smstext=a\, b`},
		{"escaped stays", map[string]any{"smstext": `'a\, b'`}, `smstext='a\, b'`},
		{"two commas", map[string]any{"x": ",,"}, `x=\,\,`},
		{"non-strings", map[string]any{"a": false, "b": nil, "c": 8, "d": 8.0, "e": 1.5, "f": []any{"x", "y"}},
			`a=False, b=None, c=8, d=8, e=1.5, f=['x'\, 'y']`},
		{"trailing backslash", map[string]any{"a": `x\`, "b": true}, `a=x\ , b`},
		{"normalised", map[string]any{" a ": true, "k=v": true, "": true, "x": " y "}, "a, k=v, x= y"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := policy.FormatActions(tc.in)
			if got != tc.want {
				t.Errorf("FormatActions = %q, want %q", got, tc.want)
			}
			// What FormatActions writes is a fixed point.
			if again := policy.FormatActions(policy.ParseActions(got)); again != got {
				t.Errorf("not stable: %q -> %q", got, again)
			}
		})
	}
	if got := policy.ParseActions(`a=x\ , b`); !reflect.DeepEqual(got, map[string]any{"a": `x\`, "b": true}) {
		t.Errorf("trailing backslash does not parse back: %#v", got)
	}
}

// iniSample is the policy set of export.golden.
func iniSample() []policy.Policy {
	return []policy.Policy{
		{
			Name: "pol1", Scope: "admin", Active: true, Priority: 1,
			Action:     "enable, otp_pin_maxlength=8, set_custom_user_attributes=:dep: sales hr",
			Realm:      []string{"realm1"},
			User:       []string{"*", "!admin"},
			AdminRealm: []string{"super"},
			Client:     []string{"10.0.0.0/8", "!10.0.0.1"},
			Time:       "Mon-Fri: 08:00-18:00",
			Conditions: []policy.Condition{{Section: "userinfo", Key: "groups", Comparator: "contains", Value: "vpn", Active: true, MissingData: policy.MissingRaise}},
		},
		{
			Name: "auth sms", Scope: "authentication", Active: false, Priority: 3,
			Description:         "SMS text with a comma, and 'quotes'",
			Action:              `otppin=userstore, smstext='Your OTP: {otp}\, bye', challenge_response=hotp totp`,
			Realm:               []string{"realm1", "realm,2"},
			Resolver:            []string{"ldap1"},
			PINode:              []string{"node1"},
			UserAgents:          []string{"privacyidea-cp"},
			CheckAllResolvers:   true,
			UserCaseInsensitive: true,
			Conditions: []policy.Condition{
				{Section: policy.SectionHeader, Key: "X-Forwarded-For", Comparator: "matches", Value: `10\..*`, Active: false, MissingData: policy.MissingFalse},
			},
		},
		{Name: "empty", Scope: "user", Priority: 1},
	}
}

func TestIniExportGolden(t *testing.T) {
	got := policy.Export(iniSample())
	path := filepath.Join("testdata", "ini", "export.golden")
	if *iniUpdate {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Export differs from %s (run with -ini.update):\n%s", path, got)
	}
	if out := policy.Export(nil); len(out) != 0 {
		t.Errorf("Export(nil) = %q", out)
	}
}

// iniNormalize makes nil lists empty, as Import returns them.
func iniNormalize(ps []policy.Policy) []policy.Policy {
	out := make([]policy.Policy, len(ps))
	for i, p := range ps {
		for _, l := range []*[]string{&p.Realm, &p.Resolver, &p.User, &p.AdminRealm, &p.AdminUser, &p.Client, &p.PINode, &p.UserAgents} {
			if *l == nil {
				*l = []string{}
			}
		}
		if p.Conditions == nil {
			p.Conditions = []policy.Condition{}
		}
		p.Action = policy.FormatActions(policy.ParseActions(p.Action))
		out[i] = p
	}
	return out
}

func TestIniRoundTrip(t *testing.T) {
	tricky := []policy.Policy{
		{
			Name: "tricky", Scope: "authentication", Active: true, Priority: 7,
			Description: "line1\nline2\r\n\ttab 'single' \"double\" back\\slash \x00 nul \x7f é ü 日本 😀 \u2028 \ufeff",
			Action:      `smstext='Hi {user}\, your OTP is {otp}'\, ok, emailsubject=a "b" 'c', passthru=userstore, mangle=user/(.*)@x/\1/, text=\\`,
			Realm:       []string{"a,b", "c", " spaced ", ""},
			User:        []string{`it's`, `"q"`, `both ' "`, `\`},
			Resolver:    []string{},
			Client:      []string{"10.0.0.0/8"},
			UserAgents:  []string{"ÄÖÜ"},
			Time:        "Mon-Fri: 8-18, Sat: 9-12",
			Conditions: []policy.Condition{
				{Section: policy.SectionRequestData, Key: "a,b", Comparator: "in", Value: `"x, y", z`, Active: true, MissingData: policy.MissingTrue},
				{Section: policy.SectionUserinfo, Key: "k", Comparator: "equals", Value: "None", Active: false, MissingData: policy.MissingRaise},
			},
		},
		{Name: "odd ]name[ #1", Scope: "admin", Priority: -3, Description: "None"},
		{Name: "quote'name", Scope: "user"},
		{Name: " lead", Scope: "user", Action: "x=\\"},
	}
	data := policy.Export(tricky)
	got, err := policy.Import(data)
	if err != nil {
		t.Fatalf("Import: %v\n%s", err, data)
	}
	if want := iniNormalize(tricky); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %#v\nwant %#v\nfile:\n%s", got, want, data)
	}
	// After one import the action string is canonical, so the next
	// export and import are exact.
	data2 := policy.Export(got)
	got2, err := policy.Import(data2)
	if err != nil || !bytes.Equal(policy.Export(got2), data2) {
		t.Errorf("second round trip differs (%v):\n%s", err, data2)
	}
	// The action of the first policy keeps its comma values.
	a := policy.ParseActions(got[0].Action)
	if a["smstext"] != `'Hi {user}\, your OTP is {otp}'\, ok` || a["text"] != `\\` {
		t.Errorf("actions = %#v", a)
	}
}

// iniPIFile is written the way privacyIDEA exports (admin-config §1.5):
// name, scope and time unquoted, description None or bare text.
const iniPIFile = `# exported by privacyIDEA
[pol1]
name = pol1
user_case_insensitive = False
active = True
scope = admin
realm = ['realm1']
adminrealm = ['super']
adminuser = []
resolver = []
pinode = []
check_all_resolvers = False
user = ['*', '!admin']
client = []
time = Mon-Fri: 08:00-18:00
conditions = [['userinfo', 'groups', 'contains', 'vpn', True, 'raise_error']]
priority = 1
description = None
user_agents = []
action = {'enable': True, 'otp_pin_maxlength': '8'}

[sms]
name = sms
user_case_insensitive = False
active = False
scope = authentication
realm = ['realm1', 'realm2']
adminrealm = []
adminuser = []
resolver = ['ldap1']
pinode = []
check_all_resolvers = False
user = []
client = ['10.0.0.0/8']
time = 
conditions = [['HTTP Request header', 'X-Test', 'equals', 'yes', False]]
priority = 2
description = text of the admin
user_agents = ['privacyidea-cp']
action = {'smstext': "'Your OTP: {otp}\\, bye'", 'otppin': 'userstore', 'tokentype': 'hotp totp'}
`

func TestIniImportPrivacyIDEA(t *testing.T) {
	got, err := policy.Import([]byte(iniPIFile))
	if err != nil {
		t.Fatal(err)
	}
	want := []policy.Policy{
		{
			Name: "pol1", Scope: "admin", Active: true, Priority: 1,
			Action: "enable, otp_pin_maxlength=8",
			Realm:  []string{"realm1"}, AdminRealm: []string{"super"}, AdminUser: []string{},
			Resolver: []string{}, PINode: []string{}, User: []string{"*", "!admin"}, Client: []string{},
			UserAgents: []string{}, Time: "Mon-Fri: 08:00-18:00",
			Conditions: []policy.Condition{{Section: "userinfo", Key: "groups", Comparator: "contains", Value: "vpn", Active: true, MissingData: policy.MissingRaise}},
		},
		{
			Name: "sms", Scope: "authentication", Active: false, Priority: 2,
			Description: "text of the admin",
			Action:      `otppin=userstore, smstext='Your OTP: {otp}\, bye', tokentype=hotp totp`,
			Realm:       []string{"realm1", "realm2"}, AdminRealm: []string{}, AdminUser: []string{},
			Resolver: []string{"ldap1"}, PINode: []string{}, User: []string{}, Client: []string{"10.0.0.0/8"},
			UserAgents: []string{"privacyidea-cp"},
			Conditions: []policy.Condition{{Section: policy.SectionHeader, Key: "X-Test", Comparator: "equals", Value: "yes", Active: false, MissingData: policy.MissingRaise}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Import:\n got %#v\nwant %#v", got, want)
	}
}

func TestIniImportLenient(t *testing.T) {
	cases := []struct {
		name string
		file string
		want policy.Policy
	}{
		{"defaults and unknown keys", "[p]\nscope = admin\nfoo = [unparsable\n",
			policy.Policy{Name: "p", Scope: "admin", Active: true, Priority: 1}},
		{"bare CSV lists and action string", "[p]\nscope=user\nrealm = r1, r2 ,\naction = enable, otppin=none\nactive = false\npriority = '4'\n",
			policy.Policy{Name: "p", Scope: "user", Realm: []string{"r1", "r2"}, Action: "enable, otppin=none", Priority: 4}},
		{"comments, BOM, CRLF, indentation", "\ufeff; header\r\n  [ p ]  # c\r\n\tscope = 'admin' # c\r\n  time = Mon: 1-2 # c\r\n# end\r\n",
			policy.Policy{Name: "p", Scope: "admin", Time: "Mon: 1-2", Active: true, Priority: 1}},
		{"quoted header", "[\"a]#b\"]\nname = 'a]#b'\n",
			policy.Policy{Name: "a]#b", Active: true, Priority: 1}},
		{"literal forms", "[p]\nrealm = ('r1', u'r' '2', 3)\naction = ['enable', 'otppin=none']\nuser_case_insensitive = 1\ndescription = r'a\\b'\n",
			policy.Policy{Name: "p", Realm: []string{"r1", "r2", "3"}, Action: "enable, otppin=none", UserCaseInsensitive: true, Description: `a\b`, Active: true, Priority: 1}},
		{"dict values", "[p]\naction = {'a': False, 'b': 8, 'c': 1.50, 'd': None, 'e': ['x', 'y'], 'f': True, 'f': 'last'}\n",
			policy.Policy{Name: "p", Action: `a=False, b=8, c=1.5, d=None, e=['x'\, 'y'], f=last`, Active: true, Priority: 1}},
		{"five-element condition", "[p]\nconditions = [('userinfo', 'k', 'equals', 5, True)]\n",
			policy.Policy{Name: "p", Active: true, Priority: 1, Conditions: []policy.Condition{{Section: "userinfo", Key: "k", Comparator: "equals", Value: "5", Active: true, MissingData: policy.MissingRaise}}}},
		{"numbers", "[p]\nrealm = [0x_1F, 0o17, 0B1, 1_000, 1e3, .5, 5., 1E-7, 1e16, 00, -2, +3, 123456789012345678901234567890]\n",
			policy.Policy{Name: "p", Realm: []string{"31", "15", "1", "1000", "1000.0", "0.5", "5.0", "1e-07", "1e+16", "0", "-2", "3", "123456789012345678901234567890"}, Active: true, Priority: 1}},
		{"escapes", "[p]\ndescription = '\\x41\\101\\u00e9\\U0001F600\\n\\q'\n",
			policy.Policy{Name: "p", Description: "AAé😀\n\\q", Active: true, Priority: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := policy.Import([]byte(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			want := iniNormalize([]policy.Policy{tc.want})
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Import:\n got %#v\nwant %#v", got, want)
			}
		})
	}
	// Only comments: no policies, no error.
	if got, err := policy.Import([]byte("# nothing\n")); err != nil || len(got) != 0 {
		t.Errorf("comments only: %v %v", got, err)
	}
}

func TestIniImportErrors(t *testing.T) {
	var manyB strings.Builder
	for i := range policy.MaxImportPolicies + 1 {
		fmt.Fprintf(&manyB, "[p%d]\n", i)
	}
	cases := []struct {
		name string
		file string
		msg  string
	}{
		{"empty", "", "Error loading policy. File empty!"},
		{"blank", " \n\t\r\n", "Error loading policy. File empty!"},
		{"binary", "[p]\nscope = \xff\xfe\n", "Unable to convert file contents. Binary data is not supported"},
		{"too large", strings.Repeat("#", policy.MaxImportSize+1), "Error loading policy: the file is larger than 10485760 bytes"},
		{"too many", manyB.String(), "Error loading policy: line 10001: more than 10000 policies"},
		{"malformed literal", "[p]\nscope = admin\nrealm = ['a', 'b'\n", `Error loading policy: line 3: section "p": realm: missing ']'`},
		{"unterminated", "[p]\naction = {'a': 'b}\n", `Error loading policy: line 2: section "p": action: unterminated string`},
		{"too deep", "[p]\nrealm = " + strings.Repeat("[", 9) + strings.Repeat("]", 9) + "\n", `Error loading policy: line 2: section "p": realm: values nested deeper than 8`},
		{"list in list", "[p]\nrealm = [['a']]\n", `Error loading policy: line 2: section "p": realm: expected a list of strings`},
		{"set", "[p]\naction = {'a'}\n", `Error loading policy: line 2: section "p": action: expected ':' in a dict (sets are not supported)`},
		{"duplicate section", "[p]\nscope = a\n[q]\n[p]\n", `Error loading policy: line 4: section "p" appears twice (first on line 1)`},
		{"duplicate key", "[p]\nscope = a\nscope = b\n", `Error loading policy: line 3: section "p": key "scope" appears twice (first on line 2)`},
		{"key outside", "scope = admin\n[p]\n", `Error loading policy: line 1: key "scope" outside a section`},
		{"no equals", "[p]\njunk\n", "Error loading policy: line 2: expected [section] or key = value"},
		{"nested section", "[p]\n[[sub]]\n", "Error loading policy: line 2: nested sections are not supported"},
		{"empty section name", "[ ]\n", "Error loading policy: line 1: empty section name"},
		{"unclosed header", "[p\n", "Error loading policy: line 1: expected ']' after the section name"},
		{"name mismatch", "[p]\nname = q\n", `Error loading policy: line 2: section "p": name "q" differs from the section name`},
		{"bad bool", "[p]\nactive = maybe\n", `Error loading policy: line 2: section "p": active: expected True or False`},
		{"bad priority", "[p]\npriority = 1.5\n", `Error loading policy: line 2: section "p": priority: expected an integer`},
		{"huge priority", "[p]\npriority = 99999999999999999999\n", `Error loading policy: line 2: section "p": priority: integer out of range`},
		{"short condition", "[p]\nconditions = [['a', 'b', 'c', 'd']]\n", `Error loading policy: line 2: section "p": conditions: condition 1 has 4 values, but should have 5 or 6`},
		{"condition active", "[p]\nconditions = [['a', 'b', 'c', 'd', 'yes']]\n", `Error loading policy: line 2: section "p": conditions: condition 1: active must be True or False`},
		{"bare conditions", "[p]\nconditions = x\n", `Error loading policy: line 2: section "p": conditions: unknown name "x"`},
		{"leading zero", "[p]\nrealm = [01]\n", `Error loading policy: line 2: section "p": realm: invalid number "01]"`},
		{"double underscore", "[p]\nrealm = [1__0]\n", `Error loading policy: line 2: section "p": realm: invalid number "__0]"`},
		{"bare exponent", "[p]\nrealm = [1e]\n", `Error loading policy: line 2: section "p": realm: invalid number "e]"`},
		{"action key type", "[p]\naction = {1: True}\n", `Error loading policy: line 2: section "p": action: action names must be strings`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := policy.Import([]byte(tc.file))
			if err == nil {
				t.Fatalf("no error; got %d policies", len(got))
			}
			if got != nil {
				t.Errorf("policies returned with an error: %v", got)
			}
			ae, ok := errors.AsType[*apierr.Error](err)
			if !ok || ae.Code != apierr.Parameter {
				t.Errorf("error %v is not a parameter error", err)
			}
			if err.Error() != tc.msg {
				t.Errorf("error\n got %q\nwant %q", err.Error(), tc.msg)
			}
		})
	}
}

// FuzzImport: no panic; what imports exports and imports back unchanged.
func FuzzImport(f *testing.F) {
	f.Add([]byte(iniPIFile))
	f.Add(policy.Export(iniSample()))
	f.Add([]byte("[p]\naction = {'a': [1, (2, {3: None})], 'b': 1e999}\nrealm = r1, r2\n"))
	f.Add([]byte("['x\\'y']\ndescription = u'\\ud800' 'a'\npriority = -0x1F\n"))
	f.Add([]byte("[p]\nrealm = [0x_1F, .5, 5., 1_0, r'\\'', '''a''']\nactive = no\npriority = 01\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := policy.Import(data)
		if err != nil {
			if _, ok := errors.AsType[*apierr.Error](err); !ok {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		out := policy.Export(ps)
		again, err := policy.Import(out)
		if err != nil {
			if len(ps) == 0 {
				return // an empty export is an empty file
			}
			t.Fatalf("re-import: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(ps, again) {
			t.Fatalf("round trip differs:\n%#v\n%#v\n%s", ps, again, out)
		}
	})
}

// FuzzParseActions: FormatActions writes a string that parses to the same map.
func FuzzParseActions(f *testing.F) {
	for _, s := range []string{
		`enable, disable, otppin=userstore, smstext='Your OTP: {otp}\, bye', tokentype=hotp totp`,
		`x=a\, b=c`, `a\,,b`, "=,==,\\=", " k = v ", `\\,`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := policy.ParseActions(s)
		out := policy.FormatActions(m)
		if got := policy.ParseActions(out); !reflect.DeepEqual(got, m) {
			t.Fatalf("ParseActions(%q) = %#v\nFormatActions = %q\nre-parsed %#v", s, m, out, got)
		}
		if again := policy.FormatActions(policy.ParseActions(out)); again != out {
			t.Fatalf("FormatActions not stable: %q -> %q", out, again)
		}
	})
}
