package subscription

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/authsrv/authsrv/apierr"
)

// Fields are the signed fields of a subscription file in the order of
// the canonical text (see the package documentation). The file also
// carries "signature".
var Fields = []string{
	"application", "for_name", "for_address", "for_email", "for_phone", "for_url", "for_comment",
	"by_name", "by_email", "by_address", "by_phone", "by_url",
	"date_from", "date_till", "num_users", "num_tokens", "num_clients", "level",
}

// The signature algorithms of the signature field.
const (
	AlgEd25519      = "ed25519"
	AlgRSAPSSSHA256 = "rsa-pss-sha256"
)

// canonicalHeader is the first line of the canonical text.
const canonicalHeader = "authsrv-subscription-v1"

// DateFormat is the format of date_from and date_till.
const DateFormat = "2006-01-02"

// Limits of a subscription file.
const (
	// MaxFileSize bounds an uploaded file.
	MaxFileSize = 64 << 10
	// maxValue bounds one text value (bytes).
	maxValue = 1024
	// maxNumber bounds num_users, num_tokens and num_clients.
	maxNumber = 1_000_000_000
	// minRSABits is the smallest RSA key accepted.
	minRSABits = 2048
)

// Errors of the signature check. They are 400 answers (privacyIDEA's
// SubscriptionError, 101).
var (
	// ErrNoKey: no public key is configured, so no file can be verified
	// and every upload is refused.
	ErrNoKey = apierr.New(apierr.Subscription,
		"No subscription key is configured: the server refuses every subscription file until its operator sets the vendor's public key (option -subscription-key).")
	// ErrNoSignature: the file has no signature field.
	ErrNoSignature = apierr.New(apierr.Subscription, "The subscription file has no signature.")
	// ErrBadSignature: the signature does not match the file's fields.
	ErrBadSignature = apierr.New(apierr.Subscription,
		"The signature of the subscription file does not match its contents: the file was changed or signed with another key.")
)

// Subscription is one subscription: who may use which application, from
// when to when, for how many users, tokens and clients. An empty text is
// a missing field; a nil number is a missing number.
type Subscription struct {
	// ID is the stored row's number (0 before it is stored).
	ID          int
	Application string
	ForName     string
	ForAddress  string
	ForEmail    string
	ForPhone    string
	ForURL      string
	ForComment  string
	ByName      string
	ByEmail     string
	ByAddress   string
	ByPhone     string
	ByURL       string
	// DateFrom and DateTill are days (midnight UTC).
	DateFrom   time.Time
	DateTill   time.Time
	NumUsers   *int
	NumTokens  *int
	NumClients *int
	Level      string
	// Signature is "<algorithm>:<base64>".
	Signature string
}

// text returns the text field name, nil for the other fields.
func (s *Subscription) text(name string) *string {
	switch name {
	case "application":
		return &s.Application
	case "for_name":
		return &s.ForName
	case "for_address":
		return &s.ForAddress
	case "for_email":
		return &s.ForEmail
	case "for_phone":
		return &s.ForPhone
	case "for_url":
		return &s.ForURL
	case "for_comment":
		return &s.ForComment
	case "by_name":
		return &s.ByName
	case "by_email":
		return &s.ByEmail
	case "by_address":
		return &s.ByAddress
	case "by_phone":
		return &s.ByPhone
	case "by_url":
		return &s.ByURL
	case "level":
		return &s.Level
	case "signature":
		return &s.Signature
	}
	return nil
}

// number returns the integer field name, nil for the other fields.
func (s *Subscription) number(name string) **int {
	switch name {
	case "num_users":
		return &s.NumUsers
	case "num_tokens":
		return &s.NumTokens
	case "num_clients":
		return &s.NumClients
	}
	return nil
}

// date returns the date field name, nil for the other fields.
func (s *Subscription) date(name string) *time.Time {
	switch name {
	case "date_from":
		return &s.DateFrom
	case "date_till":
		return &s.DateTill
	}
	return nil
}

// Value returns the field name as the canonical text writes it, and
// whether it is present.
func (s *Subscription) Value(name string) (string, bool) {
	if p := s.text(name); p != nil {
		return *p, *p != ""
	}
	if p := s.number(name); p != nil {
		if *p == nil {
			return "", false
		}
		return strconv.Itoa(**p), true
	}
	if p := s.date(name); p != nil {
		if p.IsZero() {
			return "", false
		}
		return p.UTC().Format(DateFormat), true
	}
	return "", false
}

// SignedText is the canonical text the signature covers.
func SignedText(s Subscription) []byte {
	var b bytes.Buffer
	b.WriteString(canonicalHeader + "\n")
	for _, name := range Fields {
		if v, ok := s.Value(name); ok {
			b.WriteString(name + "=" + v + "\n")
		}
	}
	return b.Bytes()
}

// invalid is the error of a malformed file.
func invalid(format string, args ...any) error {
	return apierr.Newf(apierr.Parameter, "Invalid subscription file: "+format, args...)
}

// Parse reads a subscription file and checks its fields (not its
// signature: see Verify). It returns a 400 error (ERR905) that says what
// is wrong.
func Parse(data []byte) (Subscription, error) {
	var sub Subscription
	if len(bytes.TrimSpace(data)) == 0 {
		return sub, invalid("the file is empty.")
	}
	if len(data) > MaxFileSize {
		return sub, invalid("the file is larger than %d bytes.", MaxFileSize)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return sub, invalid("it is not YAML (%s).", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return sub, invalid("it must be a YAML mapping of the subscription's fields.")
	}
	m := doc.Content[0]
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return sub, invalid("line %d: a field name must be a plain name.", k.Line)
		}
		name := k.Value
		if seen[name] {
			return sub, invalid("the field %q appears twice.", name)
		}
		seen[name] = true
		if name != "signature" && !knownField(name) {
			return sub, invalid("unknown field %q (known: %s, signature).", printable(name), strings.Join(Fields, ", "))
		}
		if v.Kind != yaml.ScalarNode {
			return sub, invalid("the field %q must be a single value.", name)
		}
		if v.Tag == "!!null" {
			continue
		}
		if err := sub.set(name, v.Value); err != nil {
			return Subscription{}, err
		}
	}
	switch {
	case sub.Application == "":
		return Subscription{}, invalid("the field \"application\" is missing.")
	case sub.DateFrom.IsZero():
		return Subscription{}, invalid("the field \"date_from\" is missing.")
	case sub.DateTill.IsZero():
		return Subscription{}, invalid("the field \"date_till\" is missing.")
	case sub.DateTill.Before(sub.DateFrom):
		return Subscription{}, invalid("date_till (%s) is before date_from (%s).",
			sub.DateTill.Format(DateFormat), sub.DateFrom.Format(DateFormat))
	}
	return sub, nil
}

func knownField(name string) bool {
	for _, f := range Fields {
		if f == name {
			return true
		}
	}
	return false
}

// printable shortens a name for an error text.
func printable(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// set stores the scalar v in the field name.
func (s *Subscription) set(name, v string) error {
	if name == "signature" {
		s.Signature = strings.Join(strings.Fields(v), "")
		return nil
	}
	if len(v) > maxValue || !utf8.ValidString(v) {
		return invalid("the field %q must be valid UTF-8 of at most %d bytes.", name, maxValue)
	}
	if strings.ContainsFunc(v, unicode.IsControl) {
		return invalid("the field %q holds a line break or another control character; write it on one line.", name)
	}
	if p := s.text(name); p != nil {
		*p = v
		return nil
	}
	if p := s.number(name); p != nil {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxNumber || strings.TrimLeft(v, "0123456789") != "" {
			return invalid("the field %q must be a whole number from 0 to %d, not %q.", name, maxNumber, printable(v))
		}
		*p = &n
		return nil
	}
	if p := s.date(name); p != nil {
		t, err := time.Parse(DateFormat, v)
		if err != nil {
			return invalid("the field %q must be a date YYYY-MM-DD, not %q.", name, printable(v))
		}
		*p = t
		return nil
	}
	return invalid("unknown field %q.", name)
}

// Format writes sub as a subscription file (YAML), its signature
// included when it has one.
func Format(sub Subscription) []byte {
	m := &yaml.Node{Kind: yaml.MappingNode}
	add := func(name, value, tag string) {
		m.Content = append(m.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: name},
			&yaml.Node{Kind: yaml.ScalarNode, Value: value, Tag: tag})
	}
	for _, name := range Fields {
		v, ok := sub.Value(name)
		if !ok {
			continue
		}
		tag := "!!str"
		switch {
		case sub.number(name) != nil:
			tag = "!!int"
		case sub.date(name) != nil:
			tag = "!!timestamp"
		}
		add(name, v, tag)
	}
	if sub.Signature != "" {
		add("signature", sub.Signature, "!!str")
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		// A mapping of scalars always encodes.
		panic(fmt.Sprintf("subscription: encoding a file: %v", err))
	}
	return out
}

// CheckKey says whether key can verify subscription files: an Ed25519
// public key, or an RSA public key of at least 2048 bits.
func CheckKey(key crypto.PublicKey) error {
	switch k := key.(type) {
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return errors.New("subscription key: an Ed25519 public key has 32 bytes")
		}
	case *rsa.PublicKey:
		if k == nil || k.N == nil || k.N.BitLen() < minRSABits {
			return fmt.Errorf("subscription key: an RSA key needs at least %d bits", minRSABits)
		}
	case nil:
		return errors.New("subscription key: none given")
	default:
		return fmt.Errorf("subscription key: %T is not supported (use an Ed25519 or RSA public key)", key)
	}
	return nil
}

// ParsePublicKeyPEM reads the public key of PEM data: a "PUBLIC KEY"
// (PKIX), an "RSA PUBLIC KEY" (PKCS #1) or a "CERTIFICATE" block.
func ParsePublicKeyPEM(data []byte) (crypto.PublicKey, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("subscription key: no PEM public key (PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE block) found")
		}
		var key crypto.PublicKey
		var err error
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				key = cert.PublicKey
			}
		default:
			if strings.Contains(block.Type, "PRIVATE KEY") {
				return nil, errors.New("subscription key: the file holds a private key; give the vendor's public key")
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("subscription key: %s block: %w", block.Type, err)
		}
		return key, CheckKey(key)
	}
}

// Verify checks the signature of sub against key. It returns ErrNoKey
// without a key, ErrNoSignature without a signature, ErrBadSignature
// when it does not match, or another Subscription error that says what is
// wrong with the signature field.
func Verify(sub Subscription, key crypto.PublicKey) error {
	if key == nil {
		return ErrNoKey
	}
	if sub.Signature == "" {
		return ErrNoSignature
	}
	alg, enc, ok := strings.Cut(sub.Signature, ":")
	if !ok {
		return apierr.Newf(apierr.Subscription, "The signature of the subscription file must be %q or %q, a colon and base64.", AlgEd25519, AlgRSAPSSSHA256)
	}
	sig, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return apierr.New(apierr.Subscription, "The signature of the subscription file is not valid base64.")
	}
	msg := SignedText(sub)
	switch k := key.(type) {
	case ed25519.PublicKey:
		if alg != AlgEd25519 {
			return wrongAlg(alg, AlgEd25519)
		}
		if len(k) != ed25519.PublicKeySize || !ed25519.Verify(k, msg, sig) {
			return ErrBadSignature
		}
	case *rsa.PublicKey:
		if alg != AlgRSAPSSSHA256 {
			return wrongAlg(alg, AlgRSAPSSSHA256)
		}
		sum := sha256.Sum256(msg)
		if rsa.VerifyPSS(k, crypto.SHA256, sum[:], sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto}) != nil {
			return ErrBadSignature
		}
	default:
		return CheckKey(key)
	}
	return nil
}

func wrongAlg(got, want string) error {
	return apierr.Newf(apierr.Subscription, "The subscription file is signed with %q, but the configured key verifies %q signatures.", printable(got), want)
}

// Sign signs sub's fields with key (an Ed25519 or RSA private key) and
// returns the value of its signature field. Vendors and tests use it;
// the server only verifies.
func Sign(sub Subscription, key crypto.Signer) (string, error) {
	msg := SignedText(sub)
	switch key.Public().(type) {
	case ed25519.PublicKey:
		sig, err := key.Sign(rand.Reader, msg, crypto.Hash(0))
		if err != nil {
			return "", err
		}
		return AlgEd25519 + ":" + base64.StdEncoding.EncodeToString(sig), nil
	case *rsa.PublicKey:
		sum := sha256.Sum256(msg)
		sig, err := key.Sign(rand.Reader, sum[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256})
		if err != nil {
			return "", err
		}
		return AlgRSAPSSSHA256 + ":" + base64.StdEncoding.EncodeToString(sig), nil
	}
	return "", fmt.Errorf("subscription: cannot sign with a %T key", key.Public())
}
