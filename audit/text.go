package audit

import "strings"

// SplitAgent splits a User-Agent into its product name and version
// ("PAM/1.1.0 x" -> "PAM", "1.1.0"), as the audit records them.
func SplitAgent(ua string) (string, string) {
	first, _, _ := strings.Cut(strings.TrimSpace(ua), " ")
	name, version, _ := strings.Cut(first, "/")
	return name, version
}

// Text keeps a value for the audit short and on one line.
func Text(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > max {
		s = s[:max]
	}
	return s
}
