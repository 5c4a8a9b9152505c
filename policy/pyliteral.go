package policy

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python literals, the values of privacyIDEA's policy export files (written
// by Python's repr, read back with ast.literal_eval rules).

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
