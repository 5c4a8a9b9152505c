package otp

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Param is one extra otpauth URL parameter; a slice keeps their order.
type Param struct {
	Name, Value string
}

// URLParams describes an otpauth URL. Key is secret: String redacts it.
type URLParams struct {
	Type   string // token type, lower-cased: hotp, totp, daypassword, email, …
	Label  string // already substituted from the tokenlabel policy
	Issuer string // already substituted from the tokenissuer policy
	Serial string
	Key    []byte
	Digits int  // the otplen request parameter; 0 means 6
	Hash   Hash // "" or sha1 adds no algorithm parameter
	Period int  // totp and daypassword only; 0 means 30 (totp) or 86400
	Extras []Param
}

// String describes p without its key.
func (p URLParams) String() string {
	return fmt.Sprintf("otpauth{type=%q label=%q serial=%q key=REDACTED}", p.Type, p.Label, p.Serial)
}

// maxURLPrefix is privacyIDEA's budget for the label: it is cut to
// maxURLPrefix − len("otpauth://<type>/?secret=<B32>&counter=1") characters.
const maxURLPrefix = 180

// OtpauthURL builds the key-URI of privacyIDEA's
// create_google_authenticator_url, byte for byte:
//
//	otpauth://<type>/<label>?secret=<B32>[&counter=1][&algorithm=<ALG>][&period=<s>]&digits=<n>&creator=privacyidea&issuer=<issuer>&serial=<serial>[&<extra>=<v>…]
//
// counter=1 is always present for hotp (privacyIDEA's quirk; harmless since
// the server window starts at 0). Label, issuer, serial and extras are
// percent-encoded as Python's quote(s, safe="/"), and the label is first cut
// to privacyIDEA's length budget.
func OtpauthURL(p URLParams) string {
	typ := strings.ToLower(p.Type)
	secret := FormatBase32(p.Key)
	label := truncateRunes(p.Label, maxURLPrefix-len("otpauth://"+typ+"/?secret="+secret+"&counter=1"))

	var b strings.Builder
	b.WriteString("otpauth://" + typ + "/" + quote(label) + "?secret=" + secret)
	if typ == "hotp" {
		b.WriteString("&counter=1")
	}
	if alg, ok := p.Hash.algorithm(); ok && p.Hash != "" && p.Hash != SHA1 {
		b.WriteString("&algorithm=" + alg.String())
	}
	switch typ {
	case "totp":
		b.WriteString("&period=" + strconv.Itoa(cmpOr(p.Period, DefaultTimeStep)))
	case "daypassword":
		b.WriteString("&period=" + strconv.Itoa(cmpOr(p.Period, DefaultDayPasswordStep)))
	}
	b.WriteString("&digits=" + strconv.Itoa(cmpOr(p.Digits, 6)))
	b.WriteString("&creator=privacyidea&issuer=" + quote(p.Issuer) + "&serial=" + quote(p.Serial))
	for _, e := range p.Extras {
		b.WriteString("&" + quote(e.Name) + "=" + quote(e.Value))
	}
	return b.String()
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// truncateRunes keeps the first n characters of s (none when n <= 0).
func truncateRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// OathURL builds the oathtoken:// URL of privacyIDEA's init detail, for the
// iOS "OATH Token" app: key in hex, timeBased=true for TOTP. The label is
// percent-encoded like the otpauth label.
func OathURL(label string, key []byte, timeBased bool) string {
	u := "oathtoken:///addToken?name=" + quote(label) + "&lockdown=true&key=" + hex.EncodeToString(key)
	if timeBased {
		u += "&timeBased=true"
	}
	return u
}

// quote percent-encodes s as UTF-8 the way Python's urllib.parse.quote(s,
// safe="/") does: letters, digits, "_.-~" and "/" stay, everything else
// becomes %XX with upper-case hex. Invalid UTF-8 bytes are escaped as they are.
func quote(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.-~/", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0x0f])
	}
	return b.String()
}
