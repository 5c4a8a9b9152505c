package policy

import (
	"bytes"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
)

// Bounds of Import, so that a hostile file costs little work.
const (
	// MaxImportSize is the largest policy file Import reads.
	MaxImportSize = 10 << 20
	// MaxImportPolicies is the most sections (policies) of one file.
	MaxImportPolicies = 10000
	// iniMaxDepth is the deepest nesting of lists and dicts in a value.
	iniMaxDepth = 8
	// iniMaxIntLen bounds an integer literal (Python's own limit for
	// decimal conversion is 4300 digits).
	iniMaxIntLen = 4300
)

// Import errors with privacyIDEA's messages.
var (
	// ErrImportEmpty is an empty (or blank) policy file.
	ErrImportEmpty = apierr.New(apierr.Parameter, "Error loading policy. File empty!")
	// ErrImportBinary is a policy file that is not UTF-8.
	ErrImportBinary = apierr.New(apierr.Parameter, "Unable to convert file contents. Binary data is not supported")
)

// ---- Export ----

// iniPlainName matches section names written without quotes.
var iniPlainName = regexp.MustCompile(`^[A-Za-z0-9_.-](?:[A-Za-z0-9_. -]*[A-Za-z0-9_.-])?$`)

// Export writes policies in privacyIDEA's export format: one [name]
// section per policy with `key = <Python literal>` lines in privacyIDEA's
// key order. Strings are Python string literals (privacyIDEA writes name,
// scope and time unquoted; its reader unquotes both), lists are Python
// lists, action is a dict, conditions are lists of six elements and an
// empty description is None. A name that is not a plain policy name is
// quoted in the section header. Names should be unique, as stored ones
// are. No policies give empty output.
func Export(policies []Policy) []byte {
	var b bytes.Buffer
	line := func(k, v string) {
		b.WriteString(k)
		b.WriteString(" = ")
		b.WriteString(v)
		b.WriteByte('\n')
	}
	for _, p := range policies {
		if iniPlainName.MatchString(p.Name) {
			b.WriteString("[" + p.Name + "]\n")
		} else {
			b.WriteString("[" + pyQuote(p.Name) + "]\n")
		}
		line("name", pyQuote(p.Name))
		line("user_case_insensitive", pyBool(p.UserCaseInsensitive))
		line("active", pyBool(p.Active))
		line("scope", pyQuote(p.Scope))
		line("realm", pyStr(iniList(p.Realm)))
		line("adminrealm", pyStr(iniList(p.AdminRealm)))
		line("adminuser", pyStr(iniList(p.AdminUser)))
		line("resolver", pyStr(iniList(p.Resolver)))
		line("pinode", pyStr(iniList(p.PINode)))
		line("check_all_resolvers", pyBool(p.CheckAllResolvers))
		line("user", pyStr(iniList(p.User)))
		line("client", pyStr(iniList(p.Client)))
		line("time", pyQuote(p.Time))
		conds := make([]any, len(p.Conditions))
		for i, c := range p.Conditions {
			missing := c.MissingData
			if missing == "" {
				missing = MissingRaise
			}
			conds[i] = []any{c.Section, c.Key, c.Comparator, c.Value, c.Active, missing}
		}
		line("conditions", pyStr(conds))
		line("priority", strconv.Itoa(p.Priority))
		if p.Description == "" {
			line("description", "None")
		} else {
			line("description", pyQuote(p.Description))
		}
		line("user_agents", pyStr(iniList(p.UserAgents)))
		d := &pyDict{}
		for _, a := range iniActionsOrdered(p.Action) {
			d.keys = append(d.keys, a.key)
			d.vals = append(d.vals, a.val)
		}
		line("action", pyStr(d))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func iniList(items []string) []string {
	if items == nil {
		return []string{}
	}
	return items
}

// ---- INI reading ----

type iniEntry struct {
	line  int
	value string
}

type iniSection struct {
	name string
	line int
	keys map[string]iniEntry
}

// iniError is a malformed file: Error loading policy: line N: ...
func iniError(line int, format string, args ...any) error {
	return apierr.New(apierr.Parameter, fmt.Sprintf("Error loading policy: line %d: ", line)+fmt.Sprintf(format, args...))
}

// iniSections splits a file into sections of key = value lines.
func iniSections(text string) ([]*iniSection, error) {
	var out []*iniSection
	seen := map[string]int{}
	var cur *iniSection
	for n, ln := range strings.Split(text, "\n") {
		n++
		t := strings.TrimFunc(ln, iniIsSpace)
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		if t[0] == '[' {
			name, err := iniHeader(t)
			if err != nil {
				return nil, iniError(n, "%s", err)
			}
			if first, dup := seen[name]; dup {
				return nil, iniError(n, "section %q appears twice (first on line %d)", name, first)
			}
			if len(out) >= MaxImportPolicies {
				return nil, iniError(n, "more than %d policies", MaxImportPolicies)
			}
			seen[name] = n
			cur = &iniSection{name: name, line: n, keys: map[string]iniEntry{}}
			out = append(out, cur)
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			return nil, iniError(n, "expected [section] or key = value")
		}
		k = strings.TrimFunc(k, iniIsSpace)
		if k == "" {
			return nil, iniError(n, "missing key before '='")
		}
		if cur == nil {
			return nil, iniError(n, "key %q outside a section", iniClip(k))
		}
		if e, dup := cur.keys[k]; dup {
			return nil, iniError(n, "section %q: key %q appears twice (first on line %d)", cur.name, iniClip(k), e.line)
		}
		cur.keys[k] = iniEntry{line: n, value: strings.TrimFunc(v, iniIsSpace)}
	}
	return out, nil
}

// iniHeader reads "[name]" or "['quoted name']", with an optional comment.
func iniHeader(t string) (string, error) {
	if strings.HasPrefix(t, "[[") {
		return "", fmt.Errorf("nested sections are not supported")
	}
	p := &pyParser{s: t, pos: 1}
	p.ws()
	var name string
	if p.pos < len(t) && (t[p.pos] == '\'' || t[p.pos] == '"') {
		v, err := p.strs()
		if err != nil {
			return "", fmt.Errorf("section name: %w", err)
		}
		name = v.(string)
		p.ws()
		if p.pos >= len(t) || t[p.pos] != ']' {
			return "", fmt.Errorf("expected ']' after the section name")
		}
	} else {
		end := strings.IndexByte(t, ']')
		if end < 0 {
			return "", fmt.Errorf("expected ']' after the section name")
		}
		name = strings.TrimFunc(t[1:end], iniIsSpace)
		if strings.ContainsAny(name, "[") {
			return "", fmt.Errorf("invalid section name %q", iniClip(name))
		}
		p.pos = end
	}
	p.pos++
	p.ws()
	if p.pos < len(t) && t[p.pos] != '#' {
		return "", fmt.Errorf("unexpected %q after the section header", iniClip(t[p.pos:]))
	}
	if name == "" {
		return "", fmt.Errorf("empty section name")
	}
	return name, nil
}

// iniRaw is an unquoted value as text: a # at its start or after a blank
// starts a comment.
func iniRaw(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] == '#' && (i == 0 || v[i-1] == ' ' || v[i-1] == '\t') {
			return strings.TrimFunc(v[:i], iniIsSpace)
		}
	}
	return v
}

// iniValue is one value with what the literal parser made of it.
type iniValue struct {
	text   string
	lit    any
	litErr error
}

func (v iniValue) raw() string { return iniRaw(v.text) }

func (v iniValue) str() string {
	if v.litErr == nil {
		switch s := v.lit.(type) {
		case string:
			return s
		case nil:
			return ""
		}
	}
	return v.raw()
}

// iniCSV splits a comma-separated text into stripped non-empty items.
func iniCSV(s string) []string {
	out := []string{}
	for it := range strings.SplitSeq(s, ",") {
		if it = strings.TrimFunc(it, iniIsSpace); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// iniScalar converts a list item or condition value to a string.
func iniScalar(v any) (string, bool) {
	switch v.(type) {
	case []any, *pyDict:
		return "", false
	}
	return pyStr(v), true
}

func (v iniValue) list() ([]string, error) {
	if v.litErr != nil {
		if r := v.raw(); strings.HasPrefix(r, "[") || strings.HasPrefix(r, "(") {
			return nil, v.litErr
		}
		return iniCSV(v.raw()), nil
	}
	switch l := v.lit.(type) {
	case nil:
		return []string{}, nil
	case string:
		return iniCSV(l), nil
	case []any:
		out := make([]string, 0, len(l))
		for _, it := range l {
			s, ok := iniScalar(it)
			if !ok {
				return nil, fmt.Errorf("expected a list of strings")
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("expected a list of strings")
}

func (v iniValue) boolean(def bool) (bool, error) {
	if v.litErr == nil {
		switch b := v.lit.(type) {
		case bool:
			return b, nil
		case nil:
			return def, nil
		case *big.Int:
			switch b.String() {
			case "0":
				return false, nil
			case "1":
				return true, nil
			}
			return false, fmt.Errorf("expected True or False")
		case string:
			return iniWord(b)
		}
		return false, fmt.Errorf("expected True or False")
	}
	return iniWord(v.raw())
}

func iniWord(s string) (bool, error) {
	switch strings.ToLower(strings.TrimFunc(s, iniIsSpace)) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("expected True or False")
}

func (v iniValue) integer(def int) (int, error) {
	if v.litErr == nil {
		switch n := v.lit.(type) {
		case nil:
			return def, nil
		case *big.Int:
			if !n.IsInt64() || int64(int(n.Int64())) != n.Int64() {
				return 0, fmt.Errorf("integer out of range")
			}
			return int(n.Int64()), nil
		case string:
			return iniAtoi(n)
		}
		return 0, fmt.Errorf("expected an integer")
	}
	return iniAtoi(v.raw())
}

func iniAtoi(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimFunc(s, iniIsSpace))
	if err != nil {
		return 0, fmt.Errorf("expected an integer")
	}
	return n, nil
}

func (v iniValue) conditions() ([]Condition, error) {
	if v.litErr != nil {
		return nil, v.litErr
	}
	if v.lit == nil {
		return []Condition{}, nil
	}
	l, ok := v.lit.([]any)
	if !ok {
		return nil, fmt.Errorf("expected a list of conditions")
	}
	out := make([]Condition, 0, len(l))
	for i, it := range l {
		c, ok := it.([]any)
		if !ok {
			return nil, fmt.Errorf("condition %d is not a list", i+1)
		}
		if len(c) != 5 && len(c) != 6 {
			return nil, fmt.Errorf("condition %d has %d values, but should have 5 or 6", i+1, len(c))
		}
		var strs [4]string
		for j := range strs {
			s, ok := c[j].(string)
			if j == 3 && !ok {
				s, ok = iniScalar(c[j])
			}
			if !ok {
				return nil, fmt.Errorf("condition %d: value %d must be a string", i+1, j+1)
			}
			strs[j] = s
		}
		active, ok := c[4].(bool)
		if !ok {
			return nil, fmt.Errorf("condition %d: active must be True or False", i+1)
		}
		missing := MissingRaise
		if len(c) == 6 {
			m, ok := c[5].(string)
			if !ok && c[5] != nil {
				return nil, fmt.Errorf("condition %d: handle_missing_data must be a string", i+1)
			}
			if m != "" {
				missing = m
			}
		}
		out = append(out, Condition{
			Section: strs[0], Key: strs[1], Comparator: strs[2], Value: strs[3],
			Active: active, MissingData: missing,
		})
	}
	return out, nil
}

// action turns a dict, a list of actions or an action string into the
// canonical action string (FormatActions).
func (v iniValue) action() (string, error) {
	if v.litErr != nil {
		if r := v.raw(); strings.HasPrefix(r, "{") || strings.HasPrefix(r, "[") || strings.HasPrefix(r, "(") {
			return "", v.litErr
		}
		return FormatActions(ParseActions(v.raw())), nil
	}
	switch a := v.lit.(type) {
	case nil:
		return "", nil
	case string:
		return FormatActions(ParseActions(a)), nil
	case *pyDict:
		m := make(map[string]any, len(a.keys))
		for i, k := range a.keys {
			ks, ok := k.(string)
			if !ok {
				return "", fmt.Errorf("action names must be strings")
			}
			m[ks] = a.vals[i]
		}
		return FormatActions(m), nil
	case []any:
		parts := make([]string, 0, len(a))
		for _, it := range a {
			s, ok := it.(string)
			if !ok {
				return "", fmt.Errorf("expected a list of action strings")
			}
			parts = append(parts, s)
		}
		return FormatActions(ParseActions(strings.Join(parts, ", "))), nil
	}
	return FormatActions(ParseActions(v.raw())), nil
}

// Import reads a policy file in privacyIDEA's export format (ConfigObj
// style: [section] headers, key = value lines, whole-line # and ;
// comments) and returns its policies in file order; the section header is
// the policy name. Values are Python literals or bare text; list values
// may also be comma-separated text. Unlike privacyIDEA, which imports only
// scope, action, realm, user, resolver, client, pinode, user_agents, time
// and priority, every field Export writes is read, so an export imports
// back unchanged; missing keys take privacyIDEA's defaults (active true,
// priority 1) and unknown keys are ignored. The action dict becomes the
// action string FormatActions writes. Any error imports nothing. The
// policies are not validated here.
func Import(data []byte) ([]Policy, error) {
	if len(data) == 0 {
		return nil, ErrImportEmpty
	}
	if len(data) > MaxImportSize {
		return nil, apierr.New(apierr.Parameter, fmt.Sprintf("Error loading policy: the file is larger than %d bytes", MaxImportSize))
	}
	if !utf8.Valid(data) {
		return nil, ErrImportBinary
	}
	text := strings.TrimPrefix(string(data), "\ufeff")
	if strings.TrimFunc(text, iniIsSpace) == "" {
		return nil, ErrImportEmpty
	}
	sections, err := iniSections(text)
	if err != nil {
		return nil, err
	}
	out := make([]Policy, 0, len(sections))
	for _, sec := range sections {
		p, err := iniPolicy(sec)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func iniPolicy(sec *iniSection) (Policy, error) {
	p := Policy{
		Name: sec.name, Active: true, Priority: 1,
		Realm: []string{}, Resolver: []string{}, User: []string{}, AdminRealm: []string{},
		AdminUser: []string{}, Client: []string{}, PINode: []string{}, UserAgents: []string{},
		Conditions: []Condition{},
	}
	get := func(key string) (iniValue, int, bool) {
		e, ok := sec.keys[key]
		if !ok || e.value == "" {
			return iniValue{}, e.line, false
		}
		lit, err := pyParseValue(e.value)
		return iniValue{text: e.value, lit: lit, litErr: err}, e.line, true
	}
	fail := func(line int, key string, err error) error {
		return iniError(line, "section %q: %s: %s", sec.name, key, err)
	}
	if v, line, ok := get("name"); ok && v.str() != sec.name {
		return p, iniError(line, "section %q: name %q differs from the section name", sec.name, iniClip(v.str()))
	}
	for key, dst := range map[string]*string{"scope": &p.Scope, "time": &p.Time, "description": &p.Description} {
		if v, _, ok := get(key); ok {
			*dst = v.str()
		}
	}
	lists := map[string]*[]string{
		"realm": &p.Realm, "resolver": &p.Resolver, "user": &p.User, "adminrealm": &p.AdminRealm,
		"adminuser": &p.AdminUser, "client": &p.Client, "pinode": &p.PINode, "user_agents": &p.UserAgents,
	}
	for _, key := range iniKeyOrder {
		if dst, isList := lists[key]; isList {
			if v, line, ok := get(key); ok {
				l, err := v.list()
				if err != nil {
					return p, fail(line, key, err)
				}
				*dst = l
			}
		}
	}
	bools := []struct {
		key string
		dst *bool
	}{
		{"active", &p.Active}, {"check_all_resolvers", &p.CheckAllResolvers},
		{"user_case_insensitive", &p.UserCaseInsensitive},
	}
	for _, b := range bools {
		if v, line, ok := get(b.key); ok {
			val, err := v.boolean(*b.dst)
			if err != nil {
				return p, fail(line, b.key, err)
			}
			*b.dst = val
		}
	}
	if v, line, ok := get("priority"); ok {
		n, err := v.integer(1)
		if err != nil {
			return p, fail(line, "priority", err)
		}
		p.Priority = n
	}
	if v, line, ok := get("conditions"); ok {
		c, err := v.conditions()
		if err != nil {
			return p, fail(line, "conditions", err)
		}
		p.Conditions = c
	}
	if v, line, ok := get("action"); ok {
		a, err := v.action()
		if err != nil {
			return p, fail(line, "action", err)
		}
		p.Action = a
	}
	return p, nil
}

// iniKeyOrder is the key order of privacyIDEA's export.
var iniKeyOrder = []string{
	"name", "user_case_insensitive", "active", "scope", "realm", "adminrealm", "adminuser",
	"resolver", "pinode", "check_all_resolvers", "user", "client", "time", "conditions",
	"priority", "description", "user_agents", "action",
}
