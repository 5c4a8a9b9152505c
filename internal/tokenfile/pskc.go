package tokenfile

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// PSKCOptions hold what the administrator supplies to open a PSKC file. They
// carry secrets; String redacts them.
type PSKCOptions struct {
	PresharedKey []byte // 16-byte AES key (24 and 32 work too), or nil
	Password     string // for a document with a PBKDF2 DerivedKey, or ""
	ValidateMAC  string // MACCheckFailHard (default when ""), MACCheckFailSoft or MACNoCheck
}

// String describes o without its secrets.
func (o PSKCOptions) String() string {
	return fmt.Sprintf("{PresharedKey:[%d bytes redacted] Password:[%t] ValidateMAC:%s}",
		len(o.PresharedKey), o.Password != "", o.ValidateMAC)
}

// GoString redacts %#v as well.
func (o PSKCOptions) GoString() string { return "tokenfile.PSKCOptions" + o.String() }

// Values of PSKCOptions.ValidateMAC, spelled as privacyIDEA's validate_mac
// parameter.
const (
	// MACCheckFailHard refuses the whole file when one MAC does not match.
	MACCheckFailHard = "check_fail_hard"
	// MACCheckFailSoft reports a key whose MAC does not match as a Failure.
	MACCheckFailSoft = "check_fail_soft"
	// MACNoCheck ignores the MACs.
	MACNoCheck = "no_check"
)

// Bounds on values taken from a PSKC document.
const (
	maxIterations = 1_000_000 // PBKDF2; about a second of CPU
	maxTimeStep   = 86400
	minOTPLen     = 6 // privacyIDEA's shortest
	maxOTPLen     = 10
)

// ParsePSKC reads a PSKC document (RFC 6030), the format token vendors ship
// seeds of hardware tokens in.
//
// Each Key of each KeyPackage becomes one record: serial DeviceInfo/SerialNo
// (else Key@Id); type "hotp" or "totp" from the Algorithm URI (other
// algorithms are Failures); OTPLen from AlgorithmParameters/ResponseFormat
// Length (6 to 10, decimal); Counter and TimeStep from Data/Counter and
// Data/TimeInterval; HashLib from AlgorithmParameters/Suite when it names
// SHA-1, SHA-256 or SHA-512; Description from FriendlyName; and
// Info["tokenkind"] = "hardware".
//
// The secret is either a base64 PlainValue or an EncryptedValue in AES-CBC
// (xmlenc aes128-cbc, also aes192-cbc and aes256-cbc) with the IV in front
// and PKCS#7 padding. It is decrypted with opt.Password when the document has
// a PBKDF2 DerivedKey, else with opt.PresharedKey. When the document has a
// MACMethod (HMAC-SHA1, -SHA224, -SHA256, -SHA384 or -SHA512), each encrypted
// secret's ValueMAC is checked against the HMAC of its CipherValue (IV
// included) under the MACKey, which is encrypted like the secrets (a
// MACMethod without MACKey, as in drafts of RFC 6030, uses the encryption key
// itself). opt.ValidateMAC says what a mismatch does.
//
// Elements are matched by local name, so the PSKC namespace and its drafts'
// namespaces all work. A document with a DOCTYPE, a document that is not
// UTF-8 XML with a KeyContainer root holding at least one KeyPackage, a file
// where no encrypted secret decrypts (a wrong preshared key or password) and,
// with MACCheckFailHard, any MAC mismatch are ErrMalformed.
func ParsePSKC(r io.Reader, opt PSKCOptions, lim Limits) ([]Record, []Failure, error) {
	lim = lim.withDefaults()
	mode, err := macMode(opt.ValidateMAC)
	if err != nil {
		return nil, nil, err
	}
	data, err := readAll(r, lim.MaxBytes)
	if err != nil {
		return nil, nil, err
	}
	doc, err := decodePSKC(data, lim)
	if err != nil {
		return nil, nil, err
	}
	p := &pskcParser{doc: doc, opt: opt, mode: mode, col: newCollector(lim)}
	if err := p.run(); err != nil {
		return nil, nil, err
	}
	return p.col.records, p.col.failures, nil
}

func macMode(s string) (string, error) {
	switch s {
	case "":
		return MACCheckFailHard, nil
	case MACCheckFailHard, MACCheckFailSoft, MACNoCheck:
		return s, nil
	}
	return "", fmt.Errorf("%w: MAC validation must be %s, %s or %s, not %s",
		ErrMalformed, MACCheckFailHard, MACCheckFailSoft, MACNoCheck, quote(s))
}

// The XML structures below name elements and attributes by local name only:
// encoding/xml then matches them in any namespace, which covers RFC 6030's
// pskc, xmldsig, xmlenc, xenc11 and pkcs5 namespaces and the drafts' as well.

type pskcDoc struct {
	encKey   *xEncryptionKey
	mac      *xMACMethod
	packages []xKeyPackage
}

type xEncryptionKey struct {
	KeyName    string       `xml:"KeyName"`
	DerivedKey *xDerivedKey `xml:"DerivedKey"`
}

type xDerivedKey struct {
	Method struct {
		Algorithm string   `xml:"Algorithm,attr"`
		Params    *xPBKDF2 `xml:"PBKDF2-params"`
	} `xml:"KeyDerivationMethod"`
}

type xPBKDF2 struct {
	Salt           *string     `xml:"Salt>Specified"`
	IterationCount string      `xml:"IterationCount"`
	KeyLength      string      `xml:"KeyLength"`
	PRF            *xAlgorithm `xml:"PRF"`
}

type xAlgorithm struct {
	Algorithm string `xml:"Algorithm,attr"`
}

type xMACMethod struct {
	Algorithm string      `xml:"Algorithm,attr"`
	MACKey    *xEncrypted `xml:"MACKey"`
}

type xEncrypted struct {
	Method      xAlgorithm `xml:"EncryptionMethod"`
	CipherValue string     `xml:"CipherData>CipherValue"`
}

type xKeyPackage struct {
	line     int
	SerialNo string `xml:"DeviceInfo>SerialNo"`
	Keys     []xKey `xml:"Key"`
}

type xKey struct {
	ID           string `xml:"Id,attr"`
	Algorithm    string `xml:"Algorithm,attr"`
	FriendlyName string `xml:"FriendlyName"`
	Params       struct {
		Suite          string `xml:"Suite"`
		ResponseFormat *struct {
			Length   string `xml:"Length,attr"`
			Encoding string `xml:"Encoding,attr"`
		} `xml:"ResponseFormat"`
	} `xml:"AlgorithmParameters"`
	Data struct {
		Secret       *xValue `xml:"Secret"`
		Counter      *xValue `xml:"Counter"`
		TimeInterval *xValue `xml:"TimeInterval"`
	} `xml:"Data"`
}

type xValue struct {
	PlainValue     *string     `xml:"PlainValue"`
	EncryptedValue *xEncrypted `xml:"EncryptedValue"`
	ValueMAC       *string     `xml:"ValueMAC"`
}

// hasDoctype reports whether data declares a DOCTYPE or an entity.
// encoding/xml neither expands entities nor fetches external ones, so a
// billion-laughs or XXE document cannot hurt it; but PSKC has no use for a
// DTD, and refusing one outright keeps the behaviour obvious and independent
// of the XML library's internals. The check ignores case, although XML
// keywords are upper-case, to leave no spelling to argue about.
func hasDoctype(data []byte) bool {
	for _, kw := range [][]byte{[]byte("<!doctype"), []byte("<!entity")} {
		for i := 0; ; {
			j := bytes.Index(data[i:], []byte("<!"))
			if j < 0 {
				break
			}
			i += j
			if len(data)-i >= len(kw) && bytes.EqualFold(data[i:i+len(kw)], kw) {
				return true
			}
			i += 2
		}
	}
	return false
}

// errDTD refuses DOCTYPE, ENTITY and other DTD declarations.
var errDTD = malformed("DTD declarations (DOCTYPE, ENTITY, ...) are not allowed in PSKC")

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
}

// xmlError turns a decoder error into a message without document content:
// syntax errors may quote the text they choke on, which can be a seed.
func xmlError(err error) error {
	if se, ok := errors.AsType[*xml.SyntaxError](err); ok {
		return malformed("not a valid XML document (line %d)", se.Line)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return malformed("not a valid XML document (truncated)")
	}
	return malformed("not a valid XML document")
}

// decodePSKC checks the document's shape and decodes the parts the parser
// uses, counting KeyPackages as it goes so that MaxRecords stops the decoding
// early.
func decodePSKC(data []byte, lim Limits) (*pskcDoc, error) {
	if hasDoctype(data) {
		return nil, errDTD
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	var root xml.StartElement
	for found := false; !found; {
		tok, err := d.Token()
		if err == io.EOF {
			return nil, malformed("not a PSKC document (no XML element)")
		}
		if err != nil {
			return nil, xmlError(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			root, found = t, true
		case xml.Directive:
			return nil, errDTD
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return nil, malformed("not a valid XML document")
			}
		}
	}
	if root.Name.Local != "KeyContainer" {
		return nil, malformed("not a PSKC document (the root element is not KeyContainer)")
	}
	doc := &pskcDoc{}
	for closed := false; !closed; {
		tok, err := d.Token()
		if err != nil {
			return nil, xmlError(err)
		}
		switch t := tok.(type) {
		case xml.EndElement:
			closed = true
		case xml.Directive:
			return nil, errDTD
		case xml.StartElement:
			switch t.Name.Local {
			case "EncryptionKey":
				if doc.encKey != nil {
					return nil, malformed("more than one EncryptionKey")
				}
				doc.encKey = &xEncryptionKey{}
				err = d.DecodeElement(doc.encKey, &t)
			case "MACMethod":
				if doc.mac != nil {
					return nil, malformed("more than one MACMethod")
				}
				doc.mac = &xMACMethod{}
				err = d.DecodeElement(doc.mac, &t)
			case "KeyPackage":
				if len(doc.packages) >= lim.MaxRecords {
					return nil, tooManyRecords(lim.MaxRecords)
				}
				line, _ := d.InputPos()
				kp := xKeyPackage{line: line}
				if err = d.DecodeElement(&kp, &t); err == nil {
					doc.packages = append(doc.packages, kp)
				}
			default:
				err = d.Skip()
			}
			if err != nil {
				return nil, xmlError(err)
			}
		}
	}
	// Nothing but comments, processing instructions and white space may
	// follow the root element.
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, xmlError(err)
		}
		switch t := tok.(type) {
		case xml.StartElement, xml.Directive:
			return nil, malformed("not a valid XML document (content after the root element)")
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return nil, malformed("not a valid XML document (content after the root element)")
			}
		}
	}
	if len(doc.packages) == 0 {
		return nil, malformed("the PSKC document has no KeyPackage")
	}
	return doc, nil
}

// outcome classifies a key that could not be read.
type outcome int

const (
	fine       outcome = iota
	failed             // a Failure, nothing more
	undecrypt          // decryption failed: counts towards "wrong key"
	macFailure         // MAC mismatch: whole file under check_fail_hard
)

type pskcParser struct {
	doc  *pskcDoc
	opt  PSKCOptions
	mode string
	col  *collector
	keys keyCache
}

func (p *pskcParser) run() error {
	var decrypted, undecrypted int
	for _, kp := range p.doc.packages {
		if len(kp.Keys) == 0 {
			if err := p.col.count(); err != nil {
				return err
			}
			p.col.fail(serialOrEmpty(strings.TrimSpace(kp.SerialNo)), kp.line, "key package has no Key")
			continue
		}
		for i := range kp.Keys {
			if err := p.col.count(); err != nil {
				return err
			}
			rec, encrypted, reason, out := p.key(&kp, &kp.Keys[i])
			switch out {
			case fine:
				if encrypted {
					decrypted++
				}
				p.col.add(rec, kp.line)
				continue
			case undecrypt:
				undecrypted++
			case macFailure:
				if p.mode == MACCheckFailHard {
					return malformed("key %s: %s", serialOrUnknown(rec.Serial), reason)
				}
			}
			p.col.fail(rec.Serial, kp.line, reason)
		}
	}
	if undecrypted > 0 && decrypted == 0 {
		return malformed("no encrypted key could be decrypted: wrong preshared key or password?")
	}
	return nil
}

func serialOrEmpty(s string) string {
	if validSerial(s) {
		return s
	}
	return ""
}

func serialOrUnknown(s string) string {
	if s == "" {
		return "without serial"
	}
	return s
}

// key reads one Key. rec.Serial is set whenever the serial is valid, also on
// failure, so that the Failure can name it.
func (p *pskcParser) key(kp *xKeyPackage, k *xKey) (rec Record, encrypted bool, reason string, out outcome) {
	serial := strings.TrimSpace(kp.SerialNo)
	if serial == "" {
		serial = strings.TrimSpace(k.ID)
	}
	switch {
	case serial == "":
		return rec, false, "missing serial (no DeviceInfo/SerialNo and no Key Id)", failed
	case !validSerial(serial):
		return rec, false, badSerial, failed
	}
	rec = Record{Serial: serial, Info: map[string]string{"tokenkind": "hardware"}}
	fail := func(reason string) (Record, bool, string, outcome) {
		return Record{Serial: serial}, false, reason, failed
	}

	alg := lowerTrim(k.Algorithm)
	switch {
	case alg == "":
		return fail("key has no Algorithm")
	case strings.HasSuffix(alg, "hotp"):
		rec.Type = "hotp"
	case strings.HasSuffix(alg, "totp"):
		rec.Type = "totp"
	default:
		return fail("unsupported algorithm " + quote(strings.TrimSpace(k.Algorithm)) + " (want HOTP or TOTP)")
	}
	if rf := k.Params.ResponseFormat; rf != nil {
		if enc := lowerTrim(rf.Encoding); enc != "" && enc != "decimal" {
			return fail("unsupported ResponseFormat Encoding " + quote(rf.Encoding) + " (want DECIMAL)")
		}
		if s := strings.TrimSpace(rf.Length); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < minOTPLen || n > maxOTPLen {
				return fail(fmt.Sprintf("ResponseFormat Length must be %d to %d", minOTPLen, maxOTPLen))
			}
			rec.OTPLen = n
		}
	}
	rec.HashLib = suiteHash(k.Params.Suite)
	rec.Description = strings.TrimSpace(k.FriendlyName)

	if v := k.Data.Counter; v != nil {
		s, reason := plainOnly(v, "Counter")
		if reason != "" {
			return fail(reason)
		}
		if s != "" {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fail("Counter is not a non-negative integer")
			}
			rec.Counter = n
		}
	}
	if v := k.Data.TimeInterval; v != nil {
		s, reason := plainOnly(v, "TimeInterval")
		if reason != "" {
			return fail(reason)
		}
		if s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > maxTimeStep {
				return fail(fmt.Sprintf("TimeInterval must be 1 to %d seconds", maxTimeStep))
			}
			rec.TimeStep = n
		}
	}

	sec := k.Data.Secret
	switch {
	case sec == nil || sec.PlainValue == nil && sec.EncryptedValue == nil:
		return fail("key has no Secret")
	case sec.PlainValue != nil:
		key, err := decodeBase64(*sec.PlainValue)
		if err != nil {
			return fail("Secret PlainValue is not base64")
		}
		rec.Key = key
	default:
		key, reason, out := p.secret(sec)
		if out != fine {
			return Record{Serial: serial}, true, reason, out
		}
		rec.Key, encrypted = key, true
	}
	if len(rec.Key) == 0 {
		return fail("Secret is empty")
	}
	return rec, encrypted, "", fine
}

// plainOnly returns the trimmed PlainValue of v, refusing encrypted values:
// no vendor encrypts counters, and supporting it would add a path to test.
func plainOnly(v *xValue, what string) (string, string) {
	if v.PlainValue == nil {
		if v.EncryptedValue != nil {
			return "", "encrypted " + what + " is not supported"
		}
		return "", ""
	}
	return strings.TrimSpace(*v.PlainValue), ""
}

// suiteSeparators are left out of a Suite before it is matched (built
// once: a Replacer's first use builds its tables).
var suiteSeparators = strings.NewReplacer("-", "", "_", "", " ", "")

// suiteHash reads the HMAC hash from AlgorithmParameters/Suite, where vendors
// put it for SHA-256 and SHA-512 tokens ("HMAC-SHA256", "SHA-256", ...).
func suiteHash(suite string) string {
	if strings.TrimSpace(suite) == "" {
		return ""
	}
	s := suiteSeparators.Replace(lowerTrim(suite))
	switch {
	case strings.Contains(s, "sha512"):
		return "sha512"
	case strings.Contains(s, "sha256"):
		return "sha256"
	case strings.Contains(s, "sha1"):
		return "sha1"
	}
	return ""
}
