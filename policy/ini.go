package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
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

// ---- action strings (admin-config 1.2) ----

// iniAction is one item of an action string: a bare key (val true) or
// key=value (val a string).
type iniAction struct {
	key string
	val any
}

// iniIsSpace is Python's str.isspace, which str.strip uses.
func iniIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// iniActionItem reads one comma-separated part: stripped, split at the
// first '='. An empty part gives ok false.
func iniActionItem(part string) (a iniAction, ok bool) {
	part = strings.TrimFunc(part, iniIsSpace)
	if part == "" {
		return a, false
	}
	if k, v, found := strings.Cut(part, "="); found {
		return iniAction{k, v}, true
	}
	return iniAction{part, true}, true
}

// iniActionItems splits an action string in order, keeping duplicates.
func iniActionItems(s string) []iniAction {
	var out []iniAction
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && (s[i] != ',' || (i > 0 && s[i-1] == '\\')) {
			continue
		}
		if a, ok := iniActionItem(s[start:i]); ok {
			out = append(out, a)
		}
		start = i + 1
	}
	return out
}

// iniActionsOrdered is iniActionItems with dict semantics: one entry per
// key at its first position, holding the last value (as a Python dict
// built from the string would).
func iniActionsOrdered(s string) []iniAction {
	items := iniActionItems(s)
	pos := map[string]int{}
	var out []iniAction
	for _, a := range items {
		if i, ok := pos[a.key]; ok {
			out[i].val = a.val
			continue
		}
		pos[a.key] = len(out)
		out = append(out, a)
	}
	return out
}

// ParseActions parses an action string as privacyIDEA does: split on
// commas not preceded by a backslash, strip each part, split it at the
// first '='. A bare key maps to true, key=value to the string value (a
// "\," inside it stays as written). Empty parts are skipped; a repeated
// key keeps its last value.
func ParseActions(s string) map[string]any {
	out := map[string]any{}
	for _, a := range iniActionItems(s) {
		out[a.key] = a.val
	}
	return out
}

// FormatActions writes an action map back as an action string that
// ParseActions reads as the same map. Keys come out sorted; true gives a
// bare key, any other value key=value, with non-strings written as Python
// would print them (False, None, 8, ['a']). A comma not preceded by a
// backslash is written \, . Entries that cannot survive parsing as given
// are normalised the way ParseActions would read them: surrounding blanks
// are dropped and a key holding '=' is split there.
func FormatActions(m map[string]any) string {
	norm := make(map[string]any, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		text := k
		if b, ok := m[k].(bool); !ok || !b {
			text += "=" + pyStr(m[k])
		}
		if a, ok := iniActionItem(iniEscapeCommas(text)); ok {
			norm[a.key] = a.val
		}
	}
	var b strings.Builder
	prev := ""
	for i, k := range slices.Sorted(maps.Keys(norm)) {
		if i > 0 {
			// A part ending in a backslash would escape the separator.
			if strings.HasSuffix(prev, `\`) {
				b.WriteString(" , ")
			} else {
				b.WriteString(", ")
			}
		}
		prev = k
		if s, ok := norm[k].(string); ok {
			prev = k + "=" + s
		}
		b.WriteString(prev)
	}
	return b.String()
}

// iniEscapeCommas writes every comma not preceded by a backslash as \, .
func iniEscapeCommas(s string) string {
	if !strings.Contains(s, ",") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ',' && (i == 0 || s[i-1] != '\\') {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ---- Python literals: writing ----

// pyFloat is a float read from a Python literal; it prints as Python does.
type pyFloat float64

// pyDict is a Python dict literal, in order.
type pyDict struct {
	keys, vals []any
}

// pyQuote returns Python's repr of a string. Invalid UTF-8 is written as
// U+FFFD.
func pyQuote(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(q)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x80 || unicode.IsPrint(r):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

func pyBool(v bool) string {
	if v {
		return "True"
	}
	return "False"
}

// pyFloatRepr prints a float as Python's repr does.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// pyRepr returns a Python literal for v.
func pyRepr(v any) string {
	if s, ok := v.(string); ok {
		return pyQuote(s)
	}
	return pyStr(v)
}

// pyStr returns what Python's str() prints for v.
func pyStr(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return pyBool(v)
	case nil:
		return "None"
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case *big.Int:
		return v.String()
	case pyFloat:
		return pyFloatRepr(float64(v))
	case float64:
		if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
			return strconv.FormatInt(int64(v), 10)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case json.Number:
		return v.String()
	case []string:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = pyQuote(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []any:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = pyRepr(s)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *pyDict:
		parts := make([]string, len(v.keys))
		for i := range v.keys {
			parts[i] = pyRepr(v.keys[i]) + ": " + pyRepr(v.vals[i])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyQuote(k) + ": " + pyRepr(v[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	default:
		return fmt.Sprint(v)
	}
}

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

// ---- Python literals: reading ----

// pyParser reads one Python literal as ast.literal_eval would: strings
// (with u/r prefixes, escapes and implicit concatenation), ints, floats,
// True, False, None, lists, tuples (read as lists) and dicts, nested at
// most iniMaxDepth deep. Sets, bytes and complex numbers are refused.
type pyParser struct {
	s     string
	pos   int
	depth int
}

type pyError struct{ msg string }

func (e *pyError) Error() string { return e.msg }

func (p *pyParser) fail(format string, args ...any) error {
	return &pyError{fmt.Sprintf(format, args...)}
}

func (p *pyParser) ws() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\f':
			p.pos++
		default:
			return
		}
	}
}

// pyParseValue reads a whole value: one literal, optionally followed by a
// # comment.
func pyParseValue(s string) (any, error) {
	p := &pyParser{s: s}
	p.ws()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.pos < len(p.s) && p.s[p.pos] != '#' {
		return nil, p.fail("unexpected %q after the value", iniClip(p.s[p.pos:]))
	}
	return v, nil
}

func iniClip(s string) string {
	if len(s) > 20 {
		s = s[:20] + "..."
	}
	return s
}

func (p *pyParser) value() (any, error) {
	if p.pos >= len(p.s) {
		return nil, p.fail("missing value")
	}
	c := p.s[p.pos]
	switch {
	case c == '[':
		return p.sequence(']')
	case c == '(':
		return p.sequence(')')
	case c == '{':
		return p.dict()
	case c == '\'' || c == '"':
		return p.strs()
	case c == '+' || c == '-' || c == '.' || (c >= '0' && c <= '9'):
		return p.number()
	case c == '_' || unicode.IsLetter(rune(c)) || c >= 0x80:
		start := p.pos
		for p.pos < len(p.s) {
			r, size := utf8.DecodeRuneInString(p.s[p.pos:])
			if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				break
			}
			p.pos += size
		}
		word := p.s[start:p.pos]
		if p.pos < len(p.s) && (p.s[p.pos] == '\'' || p.s[p.pos] == '"') {
			switch strings.ToLower(word) {
			case "u", "r":
				p.pos = start
				return p.strs()
			}
			return nil, p.fail("unsupported string prefix %q", word)
		}
		switch word {
		case "True":
			return true, nil
		case "False":
			return false, nil
		case "None":
			return nil, nil
		}
		if word == "" {
			return nil, p.fail("unexpected %q", iniClip(p.s[p.pos:]))
		}
		return nil, p.fail("unknown name %q", iniClip(word))
	default:
		return nil, p.fail("unexpected %q", iniClip(p.s[p.pos:]))
	}
}

func (p *pyParser) enter() error {
	p.depth++
	if p.depth > iniMaxDepth {
		return p.fail("values nested deeper than %d", iniMaxDepth)
	}
	return nil
}

// sequence reads a list or tuple; "(x)" without a comma is x itself.
func (p *pyParser) sequence(end byte) (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.pos++
	out := []any{}
	comma := false
	for {
		p.ws()
		if p.pos >= len(p.s) {
			return nil, p.fail("missing %q", end)
		}
		if p.s[p.pos] == end {
			p.pos++
			if end == ')' && len(out) == 1 && !comma {
				return out[0], nil
			}
			return out, nil
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.ws()
		switch {
		case p.pos < len(p.s) && p.s[p.pos] == ',':
			p.pos++
			comma = true
		case p.pos < len(p.s) && p.s[p.pos] == end:
		case p.pos >= len(p.s):
			return nil, p.fail("missing %q", end)
		default:
			return nil, p.fail("expected ',' or %q", end)
		}
	}
}

func (p *pyParser) dict() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.pos++
	d := &pyDict{}
	index := map[string]int{}
	for {
		p.ws()
		if p.pos >= len(p.s) {
			return nil, p.fail("missing '}'")
		}
		if p.s[p.pos] == '}' {
			p.pos++
			return d, nil
		}
		k, err := p.value()
		if err != nil {
			return nil, err
		}
		switch k.(type) {
		case []any, *pyDict:
			return nil, p.fail("a list or dict cannot be a dict key")
		}
		p.ws()
		if p.pos >= len(p.s) || p.s[p.pos] != ':' {
			return nil, p.fail("expected ':' in a dict (sets are not supported)")
		}
		p.pos++
		p.ws()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if ks, ok := k.(string); ok {
			if i, dup := index[ks]; dup {
				d.vals[i] = v
			} else {
				index[ks] = len(d.keys)
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
			}
		} else {
			d.keys = append(d.keys, k)
			d.vals = append(d.vals, v)
		}
		p.ws()
		switch {
		case p.pos < len(p.s) && p.s[p.pos] == ',':
			p.pos++
		case p.pos < len(p.s) && p.s[p.pos] == '}':
		case p.pos >= len(p.s):
			return nil, p.fail("missing '}'")
		default:
			return nil, p.fail("expected ',' or '}'")
		}
	}
}

// strs reads one or more adjacent string literals and joins them.
func (p *pyParser) strs() (any, error) {
	var b strings.Builder
	for {
		if err := p.str(&b); err != nil {
			return nil, err
		}
		save := p.pos
		p.ws()
		if p.pos >= len(p.s) {
			break
		}
		c := p.s[p.pos]
		if c == '\'' || c == '"' {
			continue
		}
		if (c == 'u' || c == 'U' || c == 'r' || c == 'R') && p.pos+1 < len(p.s) && (p.s[p.pos+1] == '\'' || p.s[p.pos+1] == '"') {
			continue
		}
		p.pos = save
		break
	}
	return b.String(), nil
}

// str reads one string literal with an optional u or r prefix.
func (p *pyParser) str(b *strings.Builder) error {
	raw := false
	switch p.s[p.pos] {
	case 'u', 'U':
		p.pos++
	case 'r', 'R':
		raw = true
		p.pos++
	}
	q := p.s[p.pos]
	quote := string(q)
	if strings.HasPrefix(p.s[p.pos:], quote+quote+quote) {
		quote = quote + quote + quote
	}
	p.pos += len(quote)
	for {
		if p.pos >= len(p.s) {
			return p.fail("unterminated string")
		}
		if strings.HasPrefix(p.s[p.pos:], quote) {
			p.pos += len(quote)
			return nil
		}
		c := p.s[p.pos]
		if c == '\n' && len(quote) == 1 {
			return p.fail("unterminated string")
		}
		if c != '\\' {
			b.WriteByte(c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(p.s) {
			return p.fail("unterminated string")
		}
		e := p.s[p.pos+1]
		if raw {
			// A backslash keeps the next character, which then never
			// ends the string.
			b.WriteByte('\\')
			b.WriteByte(e)
			p.pos += 2
			continue
		}
		p.pos += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := int(e - '0')
			for i := 0; i < 2 && p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '7'; i++ {
				n = n*8 + int(p.s[p.pos]-'0')
				p.pos++
			}
			b.WriteRune(rune(n))
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if p.pos+width > len(p.s) {
				return p.fail("truncated \\%c escape", e)
			}
			n, err := strconv.ParseUint(p.s[p.pos:p.pos+width], 16, 32)
			if err != nil || strings.ContainsAny(p.s[p.pos:p.pos+width], "+-_") {
				return p.fail("truncated \\%c escape", e)
			}
			if n > unicode.MaxRune {
				return p.fail("illegal Unicode character")
			}
			p.pos += width
			// Surrogates have no UTF-8 form and become U+FFFD.
			b.WriteString(string(utf8.AppendRune(nil, rune(n))))
		case 'N':
			return p.fail(`\N{...} escapes are not supported`)
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
}

// pyScanDigits returns the end of digits[_digits...] starting at i, or i.
func pyScanDigits(s string, i int, digit func(byte) bool) int {
	if i >= len(s) || !digit(s[i]) {
		return i
	}
	i++
	for {
		switch {
		case i < len(s) && digit(s[i]):
			i++
		case i+1 < len(s) && s[i] == '_' && digit(s[i+1]):
			i += 2
		default:
			return i
		}
	}
}

func pyDec(c byte) bool { return c >= '0' && c <= '9' }
func pyOct(c byte) bool { return c >= '0' && c <= '7' }
func pyBin(c byte) bool { return c == '0' || c == '1' }
func pyHex(c byte) bool { return pyDec(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }

// pyScanNumber returns the length of the number literal at the start of
// s (0 if there is none) and whether it is a float.
func pyScanNumber(s string) (n int, float bool) {
	if len(s) > 2 && s[0] == '0' {
		var digit func(byte) bool
		switch s[1] | 0x20 {
		case 'x':
			digit = pyHex
		case 'o':
			digit = pyOct
		case 'b':
			digit = pyBin
		}
		if digit != nil {
			start := 2
			if s[2] == '_' {
				start = 3
			}
			if end := pyScanDigits(s, start, digit); end > start {
				return end, false
			}
			return 0, false
		}
	}
	i := pyScanDigits(s, 0, pyDec)
	intEnd := i
	if i < len(s) && s[i] == '.' {
		j := pyScanDigits(s, i+1, pyDec)
		if i == 0 && j == 1 {
			return 0, false
		}
		i, float = j, true
	} else if i == 0 {
		return 0, false
	}
	if i < len(s) && s[i]|0x20 == 'e' {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if k := pyScanDigits(s, j, pyDec); k > j {
			i, float = k, true
		}
	}
	if !float {
		// A decimal int has no leading zero unless it is all zeros.
		if d := strings.ReplaceAll(s[:intEnd], "_", ""); len(d) > 1 && d[0] == '0' && strings.Trim(d, "0") != "" {
			return 0, false
		}
	}
	return i, float
}

// number reads an int or float with an optional sign.
func (p *pyParser) number() (any, error) {
	neg := false
	if c := p.s[p.pos]; c == '+' || c == '-' {
		neg = c == '-'
		p.pos++
		p.ws()
	}
	rest := p.s[p.pos:]
	n, float := pyScanNumber(rest)
	if n == 0 {
		return nil, p.fail("invalid number %q", iniClip(rest))
	}
	m := rest[:n]
	var v any
	if float {
		f, err := strconv.ParseFloat(strings.ReplaceAll(m, "_", ""), 64)
		if err != nil && !isRangeErr(err) {
			return nil, p.fail("invalid number %q", iniClip(m))
		}
		if neg {
			f = -f
		}
		v = pyFloat(f)
	} else {
		if len(m) > iniMaxIntLen {
			return nil, p.fail("integer literal too long")
		}
		i, ok := new(big.Int).SetString(strings.ReplaceAll(m, "_", ""), 0)
		if !ok {
			return nil, p.fail("invalid number %q", iniClip(m))
		}
		if neg {
			i.Neg(i)
		}
		v = i
	}
	p.pos += n
	if p.pos < len(p.s) {
		if r, _ := utf8.DecodeRuneInString(p.s[p.pos:]); r == '_' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			return nil, p.fail("invalid number %q", iniClip(p.s[p.pos:]))
		}
	}
	return v, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
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
