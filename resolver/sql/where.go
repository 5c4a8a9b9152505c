package sql

import (
	"fmt"
	"regexp"
	"strings"
)

// condition is one term of Where: column op value, with value bound as a
// parameter.
type condition struct {
	column string
	op     string // =, LIKE, >, <
	value  string
}

var (
	andRE  = regexp.MustCompile(`(?i)\s+and\s+`)
	likeRE = regexp.MustCompile(`(?i)\s+like\s+`)
)

// maxWhere bounds the Where text (it is admin input, but it is parsed on
// every save).
const maxWhere = 4096

// parseWhere reads privacyIDEA's Where: "col OP val [and col OP val ...]"
// with OP one of ==, like, > and <. Values are literal text to the end of
// the term (no quoting: "active == 1" compares with "1"); a like value is
// an SQL pattern the admin wrote (% and _ are wildcards there). Anything
// else, such as "1=1 OR x=y", a bad column name, >=, <> or !=, is refused.
func parseWhere(text string) ([]condition, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, nil
	}
	if len(text) > maxWhere {
		return nil, fmt.Errorf("the Where filter is longer than %d characters", maxWhere)
	}
	var out []condition
	for _, term := range andRE.Split(text, -1) {
		c, err := parseTerm(strings.TrimSpace(term))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func parseTerm(term string) (condition, error) {
	if term == "" {
		return condition{}, fmt.Errorf("the Where filter has an empty condition")
	}
	// The operator is the first of ==, >, < or a whitespace-delimited like.
	at, end, op := -1, -1, ""
	consider := func(i, j int, o string) {
		if i >= 0 && (at < 0 || i < at) {
			at, end, op = i, j, o
		}
	}
	if i := strings.Index(term, "=="); i >= 0 {
		consider(i, i+2, "=")
	}
	if i := strings.IndexByte(term, '>'); i >= 0 {
		consider(i, i+1, ">")
	}
	if i := strings.IndexByte(term, '<'); i >= 0 {
		consider(i, i+1, "<")
	}
	if m := likeRE.FindStringIndex(term); m != nil {
		consider(m[0], m[1], "LIKE")
	}
	if at < 0 {
		return condition{}, fmt.Errorf("the Where condition %q has no operator (use ==, like, > or <)", term)
	}
	if (op == ">" || op == "<") && end < len(term) && strings.ContainsRune("=<>", rune(term[end])) {
		return condition{}, fmt.Errorf("the Where condition %q uses an unsupported operator (use ==, like, > or <)", term)
	}
	col := strings.TrimSpace(term[:at])
	if !validIdent(col) {
		return condition{}, fmt.Errorf("the Where column %q is not a valid column name (letters, digits and _)", col)
	}
	return condition{column: col, op: op, value: strings.TrimSpace(term[end:])}, nil
}
