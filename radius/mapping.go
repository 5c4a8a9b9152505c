package radius

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	rad "layeh.com/radius"
)

// Mapping copies one value of the decision into Access-Accept and
// Access-Challenge answers, as the [Mapping] and [Mapping user] sections of
// privacyIDEA's FreeRADIUS plugin do.
type Mapping struct {
	// Key names a key of the decision's detail ("serial", "type",
	// "otplen", "message"), or "user.NAME" for the user's attribute NAME
	// (present when the policy add_user_in_response is set). A list value
	// gives one attribute per element.
	Key string
	// Attribute is a standard RADIUS attribute: one of Attributes().
	Attribute string
}

// attrDef is a reply attribute a mapping may fill.
type attrDef struct {
	typ     rad.Type
	integer bool
}

// replyAttrs are the attributes a mapping may name (RFC 2865, 2869).
var replyAttrs = map[string]attrDef{
	"Reply-Message":   {18, false},
	"Filter-Id":       {11, false},
	"Callback-Number": {19, false},
	"Callback-Id":     {20, false},
	"Framed-Route":    {22, false},
	"Class":           {25, false},
	"Framed-Pool":     {88, false},
	"Session-Timeout": {27, true},
	"Idle-Timeout":    {28, true},
}

// Attributes lists the attribute names a Mapping may name, sorted.
func Attributes() []string { return slices.Sorted(maps.Keys(replyAttrs)) }

// Validate reports a mapping that names no known attribute or no key.
func (m Mapping) Validate() error {
	if m.Key == "" || strings.HasSuffix(m.Key, ".") || strings.ContainsAny(m.Key, " \t") {
		return fmt.Errorf("mapping %q: bad key", m.Key)
	}
	if _, ok := lookupAttr(m.Attribute); !ok {
		return fmt.Errorf("mapping %s: unknown attribute %q (known: %s)", m.Key, m.Attribute, strings.Join(Attributes(), ", "))
	}
	return nil
}

func lookupAttr(name string) (attrDef, bool) {
	for n, d := range replyAttrs {
		if strings.EqualFold(n, name) {
			return d, true
		}
	}
	return attrDef{}, false
}

// LoadMapping reads a mapping file (see ParseMapping).
func LoadMapping(path string) ([]Mapping, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseMapping(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ParseMapping parses mapping lines "KEY = Attribute-Name" ("serial =
// Class", "user.email = Reply-Message"); blank lines and lines starting
// with # are ignored.
func ParseMapping(data []byte) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, a, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: want KEY = Attribute-Name", n)
		}
		m := Mapping{Key: strings.TrimSpace(k), Attribute: strings.TrimSpace(a)}
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// mapValues returns the strings the detail holds under key.
func mapValues(detail map[string]any, key string) []string {
	var v any
	if name, ok := strings.CutPrefix(key, "user."); ok {
		u, _ := detail["user"].(map[string]any)
		v = u[name]
	} else {
		v = detail[key]
	}
	switch x := v.(type) {
	case nil:
		return nil
	case []string:
		return x
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, scalar(e)...)
		}
		return out
	default:
		return scalar(x)
	}
}

func scalar(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case bool:
		return []string{strconv.FormatBool(x)}
	case int, int64, int32, uint32, uint64, float64, fmt.Stringer:
		return []string{fmt.Sprint(x)}
	}
	return nil
}

// addMapped adds the mapped attributes of a decision's detail to p.
func addMapped(p *rad.Packet, maps []Mapping, detail map[string]any) {
	for _, m := range maps {
		def, _ := lookupAttr(m.Attribute)
		for _, s := range mapValues(detail, m.Key) {
			if def.integer {
				n, err := strconv.ParseUint(s, 10, 32)
				if err != nil {
					continue
				}
				p.Add(def.typ, rad.NewInteger(uint32(n)))
				continue
			}
			if s == "" || len(s) > 253 {
				continue
			}
			p.Add(def.typ, rad.Attribute(s))
		}
	}
}
