package tokenfile

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Record is one token read from an import file. Key holds the seed, so a
// Record must never be logged or encoded into a response; String redacts it.
type Record struct {
	Serial      string
	Type        string            // lower-case: "hotp", "totp", "yubikey", ...
	Key         []byte            // the raw seed bytes (never hex)
	OTPLen      int               // 0 = not given
	Counter     uint64            // initial counter (HOTP) if given
	TimeStep    int               // TOTP time step in seconds, 0 = not given
	HashLib     string            // "sha1", "sha256", "sha512" or ""
	Description string            // free text, "" when the format has none
	User        string            // owner login if the format carries one
	Realm       string            // owner realm if the format carries one
	Info        map[string]string // extra tokeninfo, may be nil
}

// String describes r without its key, so that a record that ends up in a log
// line or a test failure does not leak the seed.
func (r Record) String() string {
	return fmt.Sprintf("{Serial:%s Type:%s Key:[%d bytes redacted] OTPLen:%d Counter:%d TimeStep:%d HashLib:%s User:%s Realm:%s}",
		r.Serial, r.Type, len(r.Key), r.OTPLen, r.Counter, r.TimeStep, r.HashLib, r.User, r.Realm)
}

// GoString redacts the key from %#v as well, the verb tests like to print.
func (r Record) GoString() string { return "tokenfile.Record" + r.String() }

// Failure is one entry of the file that could not be read, reported so that
// the administrator can fix that entry while the others are imported.
type Failure struct {
	Serial string // "" when the entry has no usable serial
	Line   int    // 1-based line of the entry in the file, 0 if unknown
	Reason string // fit to show to an administrator; never holds a secret
}

// Limits bound the work one import may cause, because an import file is
// untrusted input.
type Limits struct {
	MaxBytes   int64 // whole file; DefaultMaxBytes when 0
	MaxRecords int   // entries (records plus failures); DefaultMaxRecords when 0
}

// Defaults of Limits, large enough for any real batch of hardware tokens.
const (
	DefaultMaxBytes   = 4 << 20
	DefaultMaxRecords = 50000
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxRecords <= 0 {
		l.MaxRecords = DefaultMaxRecords
	}
	return l
}

// Whole-file errors. Every error a parser returns wraps one of them (or is an
// error of the io.Reader), and its message can be shown to an administrator.
var (
	// ErrTooLarge is returned for a file over Limits.MaxBytes or with more
	// entries than Limits.MaxRecords.
	ErrTooLarge = errors.New("tokenfile: import file too large")
	// ErrMalformed is returned when the file as a whole cannot be used: it is
	// not of the format, or (PSKC) nothing decrypts or a MAC check fails
	// with check_fail_hard. It also reports invalid PSKCOptions.
	ErrMalformed = errors.New("tokenfile: malformed import file")
)

func tooManyRecords(max int) error {
	return fmt.Errorf("%w: more than %d tokens", ErrTooLarge, max)
}

func tooManyBytes(max int64) error {
	return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
}

// countingReader counts the bytes read through it, so that a streaming parser
// can tell whether the io.LimitReader below it cut the input.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// readAll reads the whole input, or fails with ErrTooLarge past max bytes.
func readAll(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("tokenfile: reading import file: %w", err)
	}
	if int64(len(data)) > max {
		return nil, tooManyBytes(max)
	}
	return data, nil
}

// validSerial reports whether s matches ^[0-9a-zA-Z\-_]+$, the serials
// privacyIDEA accepts on import.
func validSerial(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

const badSerial = "serial may only contain letters, digits, '-' and '_'"

// seen detects duplicate serials within one file; the first entry wins.
type seen map[string]int

// dup returns a reason when serial was already read, else records its line.
func (s seen) dup(serial string, line int) string {
	if first, ok := s[serial]; ok {
		if first > 0 {
			return "duplicate serial (first at line " + strconv.Itoa(first) + ")"
		}
		return "duplicate serial"
	}
	s[serial] = line
	return ""
}

// collector gathers the outcome of one parse and enforces MaxRecords.
type collector struct {
	max      int
	entries  int
	serials  seen
	records  []Record
	failures []Failure
}

func newCollector(lim Limits) *collector {
	return &collector{max: lim.MaxRecords, serials: seen{}}
}

// count registers one entry of the file and fails past MaxRecords.
func (c *collector) count() error {
	c.entries++
	if c.entries > c.max {
		return tooManyRecords(c.max)
	}
	return nil
}

func (c *collector) fail(serial string, line int, reason string) {
	c.failures = append(c.failures, Failure{Serial: serial, Line: line, Reason: reason})
}

// add keeps rec unless its serial is a duplicate.
func (c *collector) add(rec Record, line int) {
	if reason := c.serials.dup(rec.Serial, line); reason != "" {
		c.fail(rec.Serial, line, reason)
		return
	}
	c.records = append(c.records, rec)
}

// quote renders a short, non-secret value for a reason, cut to keep reasons
// readable when a file holds garbage.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}

// lowerTrim is the form in which names, types and modes are compared.
func lowerTrim(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
