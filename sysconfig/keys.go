package sysconfig

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/authsrv/authsrv/apierr"
)

// Kind is the type of a setting's value.
type Kind int

// The kinds of values.
const (
	// String is free text (one line).
	String Kind = iota
	// Bool is privacyIDEA's boolean: stored as "True" or "False".
	Bool
	// Int is a decimal integer within Min and Max, or one of Choices
	// when they are given.
	Int
	// Choice is one of Choices (compared without case, stored as listed).
	Choice
)

// String names the kind as GET /system/ documents it.
func (k Kind) String() string {
	switch k {
	case Bool:
		return "bool"
	case Int:
		return "int"
	case Choice:
		return "choice"
	}
	return "string"
}

// maxText bounds a text value and a description (privacyIDEA's Config
// column holds 2000 characters).
const maxText = 2000

// Key describes one known setting.
type Key struct {
	// Name is privacyIDEA's key ("DefaultOtpLen", "totp.hashlib").
	Name string
	Kind Kind
	// Min and Max bound an Int (inclusive).
	Min, Max int
	// Choices are the allowed values of a Choice, or of an Int when set.
	Choices []string
	// Unit says what an Int counts ("seconds", "minutes"), for the
	// description only.
	Unit string
	// Default is the value when nothing is stored and the root hands in
	// no default of its own ("" for none).
	Default string
	// Public settings are readable by the user role too.
	Public bool
	// Optional settings are listed only when stored (the per-type
	// challenge validity times, which fall back on another setting).
	Optional bool
	// Desc is a one-line description.
	Desc string
	// check validates a String value further.
	check func(string) error
}

// hashlibs are the hash algorithms of HOTP and TOTP tokens.
var hashlibs = []string{"sha1", "sha256", "sha512"}

// builtin are the settings authsrv knows, by privacyIDEA's names.
var builtin = []Key{
	{Name: "DefaultOtpLen", Kind: Int, Choices: []string{"6", "8"}, Default: "6",
		Desc: "OTP length of newly enrolled tokens (6 or 8)."},
	{Name: "DefaultCountWindow", Kind: Int, Min: 1, Max: 10000, Default: "10",
		Desc: "Count window of newly enrolled tokens: how many OTP values ahead are checked."},
	{Name: "DefaultSyncWindow", Kind: Int, Min: 1, Max: 1000000, Default: "1000",
		Desc: "Sync window of newly enrolled tokens: how far a resync or AutoResync looks ahead."},
	{Name: "DefaultMaxFailCount", Kind: Int, Min: 1, Max: 1000000, Default: "10",
		Desc: "Maximum failed authentications of newly enrolled tokens before they are blocked."},
	{Name: "DefaultResetFailCount", Kind: Bool, Default: "False",
		Desc: "Kept for privacyIDEA's setDefault; a successful authentication resets the fail counter whatever its value, as in privacyIDEA."},
	{Name: "failcounter_clear_timeout", Kind: Int, Min: 0, Max: 525600, Unit: "minutes", Default: "0",
		Desc: "Minutes after which a token blocked by its fail counter may try again (0: never)."},
	{Name: "DefaultChallengeValidityTime", Kind: Int, Min: 1, Max: 604800, Unit: "seconds", Default: "120",
		Desc: "Seconds a challenge stays valid."},
	{Name: "AutoResync", Kind: Bool, Default: "False",
		Desc: "Resynchronise a token during authentication from two consecutive OTP values."},
	{Name: "AutoResyncTimeout", Kind: Int, Min: 1, Max: 86400, Unit: "seconds", Default: "300",
		Desc: "Seconds within which the second value of an AutoResync must come."},
	{Name: "PrependPin", Kind: Bool, Default: "True", Public: true,
		Desc: "The PIN comes before the OTP value in the password (else after it)."},
	{Name: "splitAtSign", Kind: Bool, Default: "True", Public: true,
		Desc: "Split user@realm into the login and the realm."},
	{Name: "IncFailCountOnFalsePin", Kind: Bool, Default: "True", Public: true,
		Desc: "Raise the fail counter of all the user's tokens when no PIN matched."},
	{Name: "no_auth_counter", Kind: Bool, Default: "False",
		Desc: "Do not count authentications (count_auth, count_auth_success)."},
	{Name: "ReturnSamlAttributes", Kind: Bool, Default: "True", Public: true,
		Desc: "Return the user's attributes in a SAML check answer."},
	{Name: "ReturnSamlAttributesOnFail", Kind: Bool, Default: "False",
		Desc: "Return the user's attributes in a SAML check answer also when it failed."},
	{Name: "OverrideAuthorizationClient", Kind: String,
		Desc:  "Proxies (addresses or networks, comma separated, proxy chains with >) allowed to name another client.",
		check: checkProxies},
	{Name: "hotp.hashlib", Kind: Choice, Choices: hashlibs, Default: "sha1",
		Desc: "Hash algorithm of new HOTP tokens enrolled without hashlib."},
	{Name: "totp.hashlib", Kind: Choice, Choices: hashlibs, Default: "sha1",
		Desc: "Hash algorithm of new TOTP tokens enrolled without hashlib."},
	{Name: "totp.timeStep", Kind: Int, Choices: []string{"30", "60"}, Unit: "seconds", Default: "30",
		Desc: "Time step of new TOTP tokens (30 or 60 seconds)."},
	{Name: "totp.timeWindow", Kind: Int, Min: 1, Max: 86400, Unit: "seconds", Default: "180",
		Desc: "Seconds around now in which TOTP values are checked."},
	{Name: "email.identifier", Kind: String, check: checkIdentifier,
		Desc: "SMTP server of e-mail tokens that name none."},
	{Name: "email.validtime", Kind: Int, Min: 1, Max: 604800, Unit: "seconds", Default: "120",
		Desc: "Seconds an e-mailed OTP value stays valid."},
	{Name: "sms.identifier", Kind: String, check: checkIdentifier,
		Desc: "SMS gateway of SMS tokens that name none."},
	{Name: "sms.providerTimeout", Kind: Int, Min: 1, Max: 604800, Unit: "seconds", Default: "300",
		Desc: "Seconds an OTP value sent by SMS stays valid."},
	{Name: "question.num_answers", Kind: Int, Min: 1, Max: 50, Default: "1",
		Desc: "How many questions a questionnaire token needs answered at enrollment."},
}

// Builtin returns the settings authsrv knows.
func Builtin() []Key { return slices.Clone(builtin) }

// ChallengeValidityKey is the per-type challenge validity of token type
// typ (privacyIDEA's "<Type>ChallengeValidityTime", e.g.
// "HotpChallengeValidityTime"); unset, DefaultChallengeValidityTime
// applies.
func ChallengeValidityKey(typ string) Key {
	name := strings.ToLower(typ)
	if name != "" {
		r, n := utf8.DecodeRuneInString(name)
		name = string(unicode.ToUpper(r)) + name[n:]
	}
	return Key{Name: name + "ChallengeValidityTime", Kind: Int, Min: 1, Max: 604800, Unit: "seconds", Optional: true,
		Desc: "Seconds a challenge of " + strings.ToLower(typ) + " tokens stays valid (unset: DefaultChallengeValidityTime)."}
}

// Normalize checks value for k and returns it as it is stored: booleans
// as "True"/"False", integers in decimal, choices as listed.
func (k Key) Normalize(value string) (string, error) {
	v := strings.TrimSpace(value)
	switch k.Kind {
	case Bool:
		switch v {
		case "1", "true", "True", "TRUE":
			return "True", nil
		case "0", "false", "False", "FALSE":
			return "False", nil
		}
		return "", apierr.Newf(apierr.Parameter, "The value of %s must be True or False.", k.Name)
	case Int:
		n, err := strconv.Atoi(v)
		if err != nil {
			return "", apierr.Newf(apierr.Parameter, "The value of %s must be an integer.", k.Name)
		}
		v = strconv.Itoa(n)
		if len(k.Choices) > 0 {
			if !slices.Contains(k.Choices, v) {
				return "", apierr.Newf(apierr.Parameter, "The value of %s must be one of %s.", k.Name, strings.Join(k.Choices, ", "))
			}
			return v, nil
		}
		if n < k.Min || n > k.Max {
			return "", apierr.Newf(apierr.Parameter, "The value of %s must be between %d and %d.", k.Name, k.Min, k.Max)
		}
		return v, nil
	case Choice:
		for _, c := range k.Choices {
			if strings.EqualFold(c, v) {
				return c, nil
			}
		}
		return "", apierr.Newf(apierr.Parameter, "The value of %s must be one of %s.", k.Name, strings.Join(k.Choices, ", "))
	}
	if err := checkText(k.Name, value); err != nil {
		return "", err
	}
	if k.check != nil && value != "" {
		if err := k.check(value); err != nil {
			return "", apierr.Newf(apierr.Parameter, "The value of %s is not valid: %v.", k.Name, err)
		}
	}
	return value, nil
}

// checkText refuses text that is too long, not UTF-8 or has control
// characters.
func checkText(name, v string) error {
	if len(v) > maxText || !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
		return apierr.Newf(apierr.Parameter, "The value of %s must be one line of text of at most %d bytes.", name, maxText)
	}
	return nil
}

// checkIdentifier accepts the name of a configured object.
func checkIdentifier(v string) error {
	if strings.TrimSpace(v) != v || strings.ContainsAny(v, "/,") {
		return fmt.Errorf("an identifier has no surrounding spaces, '/' or ','")
	}
	return nil
}

// checkProxies accepts privacyIDEA's proxy list: entries separated by
// commas, each an address or a network, or a chain of them joined by '>'.
func checkProxies(v string) error {
	for entry := range strings.SplitSeq(v, ",") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		for hop := range strings.SplitSeq(entry, ">") {
			hop = strings.TrimSpace(hop)
			if _, err := netip.ParsePrefix(hop); err == nil {
				continue
			}
			if _, err := netip.ParseAddr(hop); err != nil {
				return fmt.Errorf("%q is neither an IP address nor a network", hop)
			}
		}
	}
	return nil
}
