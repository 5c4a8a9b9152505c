package otp

// ParseContents exposes the contents-code parser to the fuzz test, which
// checks Generate's output against the alphabet and required groups.
func ParseContents(s string) (alphabet []rune, required [][]rune, err error) {
	cs, err := parseContents(s)
	return cs.alphabet, cs.required, err
}
