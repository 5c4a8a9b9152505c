package validate

// ParsePassthruAssign returns the parts of a passthru_assign value.
func ParsePassthruAssign(v string) (pinFirst bool, otpLen, window int, ok bool) {
	s, ok := parsePassthruAssign(v)
	return s.pinFirst, s.otpLen, s.window, ok
}
