package policy

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/authsrv/authsrv/apierr"
)

// CheckPIN applies the PIN rules otp_pin_minlength, otp_pin_maxlength and
// otp_pin_contents (values as the policies give them; "" means no rule)
// to a new PIN, with privacyIDEA's messages. Wherever a PIN is set (token
// enrollment and setpin, a PIN change through /validate/check) the same
// rules hold.
func CheckPIN(pin, minLen, maxLen, contents string) error {
	n := len([]rune(pin))
	if v, err := strconv.Atoi(minLen); err == nil && n < v {
		return apierr.New(apierr.Policy, "The provided PIN is too short.")
	}
	if v, err := strconv.Atoi(maxLen); err == nil && n > v {
		return apierr.New(apierr.Policy, "The provided PIN is too long.")
	}
	if contents != "" && !PINContentsOK(pin, contents) {
		return apierr.New(apierr.Policy, "The provided PIN does not contain the required characters: "+contents)
	}
	return nil
}

// CheckPINRules is CheckPIN with the rules read through value, which
// returns the value of an action of the caller's scope ("" when unset):
// for each rule the <typ>_ variant wins over the general action.
func CheckPINRules(typ, pin string, value func(action string) (string, error)) error {
	var rules [3]string
	for i, action := range []string{"otp_pin_minlength", "otp_pin_maxlength", "otp_pin_contents"} {
		v, err := value(typ + "_" + action)
		if err == nil && v == "" {
			v, err = value(action)
		}
		if err != nil {
			return err
		}
		rules[i] = v
	}
	return CheckPIN(pin, rules[0], rules[1], rules[2])
}

// PINContentsOK checks privacyIDEA's otp_pin_contents: c letters, n
// digits, s special, o others; plain = all groups required, "+" = at
// least one of the groups, "-" = none of the groups.
func PINContentsOK(pin, spec string) bool {
	mode := byte(0)
	if spec != "" && (spec[0] == '+' || spec[0] == '-') {
		mode, spec = spec[0], spec[1:]
	}
	class := func(r rune) byte {
		switch {
		case unicode.IsLetter(r) && r < 128:
			return 'c'
		case unicode.IsDigit(r) && r < 128:
			return 'n'
		case strings.ContainsRune(`!"#$%&'()*+,-./:;<=>?@[\]^_{|}~`+"`", r):
			return 's'
		}
		return 'o'
	}
	have := map[byte]bool{}
	for _, r := range pin {
		have[class(r)] = true
	}
	switch mode {
	case '+':
		for i := 0; i < len(spec); i++ {
			if have[spec[i]] {
				return true
			}
		}
		return false
	case '-':
		for i := 0; i < len(spec); i++ {
			if have[spec[i]] {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(spec); i++ {
		if !have[spec[i]] {
			return false
		}
	}
	return true
}
