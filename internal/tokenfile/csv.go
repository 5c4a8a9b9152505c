package tokenfile

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// csvEntry is what a line parser makes of one CSV line: a record, a failure
// (reason set; rec.Serial set when known), or nothing (skip, e.g. a header).
type csvEntry struct {
	rec    Record
	reason string
	skip   bool
}

// parseCSV streams r through encoding/csv and hands every non-empty,
// non-comment line to line. It stops at MaxRecords entries without reading
// further, and checks MaxBytes at the end, so a huge file costs at most
// MaxBytes of reading and MaxRecords of memory.
func parseCSV(r io.Reader, lim Limits, line func(fields []string, n int) csvEntry) ([]Record, []Failure, error) {
	lim = lim.withDefaults()
	cr := &countingReader{r: io.LimitReader(r, lim.MaxBytes+1)}
	br := bufio.NewReader(cr)
	// A UTF-8 byte order mark (spreadsheet exports) would glue to the first
	// serial.
	if bom, err := br.Peek(3); err == nil && bytes.Equal(bom, []byte("\xef\xbb\xbf")) {
		_, _ = br.Discard(3)
	}
	c := csv.NewReader(br)
	c.FieldsPerRecord = -1
	c.TrimLeadingSpace = true
	c.LazyQuotes = false
	c.Comment = '#'
	c.ReuseRecord = true

	col := newCollector(lim)
	last := int64(-1)
	for {
		fields, err := c.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return nil, nil, fmt.Errorf("tokenfile: reading import file: %w", err)
			}
			// encoding/csv consumes the bad line and goes on with the next
			// one; should it ever stop making progress, give up on the file.
			off := c.InputOffset()
			if off == last {
				return nil, nil, fmt.Errorf("%w: not valid CSV at line %d", ErrMalformed, pe.Line)
			}
			last = off
			if err := col.count(); err != nil {
				return nil, nil, err
			}
			col.fail("", pe.StartLine, "not valid CSV: "+pe.Err.Error())
			continue
		}
		last = c.InputOffset()
		n, _ := c.FieldPos(0)
		empty := true
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
			if fields[i] != "" {
				empty = false
			}
		}
		// Blank lines, whitespace-only lines and indented comments.
		if empty || fields[0] != "" && fields[0][0] == '#' {
			continue
		}
		e := line(fields, n)
		if e.skip {
			continue
		}
		detach(&e.rec)
		if err := col.count(); err != nil {
			return nil, nil, err
		}
		if e.reason != "" {
			col.fail(e.rec.Serial, n, e.reason)
			continue
		}
		col.add(e.rec, n)
	}
	if cr.n > lim.MaxBytes {
		return nil, nil, tooManyBytes(lim.MaxBytes)
	}
	return col.records, col.failures, nil
}

// detach copies the strings of rec out of the CSV line they were cut from,
// so that a kept serial does not keep the line's hex seed alive in memory.
func detach(rec *Record) {
	rec.Serial = strings.Clone(rec.Serial)
	rec.User = strings.Clone(rec.User)
	rec.Realm = strings.Clone(rec.Realm)
	rec.Description = strings.Clone(rec.Description)
	for k, v := range rec.Info {
		rec.Info[k] = strings.Clone(v)
	}
}

// field returns column i, or "" when the line is shorter.
func field(fields []string, i int) string {
	if i < len(fields) {
		return fields[i]
	}
	return ""
}

// hexKey decodes a hex seed; the reason never repeats the input.
func hexKey(s, what string) ([]byte, string) {
	if s == "" {
		return nil, "missing " + what
	}
	k, err := hex.DecodeString(s)
	if err != nil {
		return nil, what + " is not hex"
	}
	return k, ""
}

// ParseOATHCSV reads privacyIDEA's "oathcsv" import format, the simplest way
// to bring software or hardware OATH tokens over from another system.
//
// Each line is one token, comma separated, with whitespace around fields
// trimmed:
//
//	serial, key, type, otplen, timestep|ignored, user, realm
//
// key is the seed in hex; type is "hotp" (the default) or "totp"; otplen is
// 6 (the default) or 8; for TOTP the fifth column is the time step, 30 (the
// default) or 60, for HOTP it is ignored; the optional sixth and seventh
// columns name the owner. Empty lines, lines starting with '#' and a header
// line whose first field is "serial" are skipped. A bad line becomes a
// Failure and the others are still returned.
func ParseOATHCSV(r io.Reader, lim Limits) ([]Record, []Failure, error) {
	return parseCSV(r, lim, oathLine)
}

func oathLine(f []string, _ int) csvEntry {
	serial := f[0]
	if lowerTrim(serial) == "serial" {
		return csvEntry{skip: true}
	}
	switch {
	case serial == "":
		return csvEntry{reason: "missing serial"}
	case !validSerial(serial):
		return csvEntry{reason: badSerial}
	}
	fail := func(reason string) csvEntry {
		return csvEntry{rec: Record{Serial: serial}, reason: reason}
	}
	key, reason := hexKey(field(f, 1), "key")
	if reason != "" {
		return fail(reason)
	}
	rec := Record{Serial: serial, Key: key, Type: "hotp", OTPLen: 6}
	switch t := lowerTrim(field(f, 2)); t {
	case "", "hotp":
	case "totp":
		rec.Type = t
		rec.TimeStep = 30
	default:
		return fail("unsupported token type " + quote(t) + " (want hotp or totp)")
	}
	if s := field(f, 3); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n != 6 && n != 8 {
			return fail("otplen must be 6 or 8")
		}
		rec.OTPLen = n
	}
	if s := field(f, 4); s != "" && rec.Type == "totp" {
		n, err := strconv.Atoi(s)
		if err != nil || n != 30 && n != 60 {
			return fail("time step must be 30 or 60")
		}
		rec.TimeStep = n
	}
	rec.User, rec.Realm = field(f, 5), field(f, 6)
	if !utf8.ValidString(rec.User) || !utf8.ValidString(rec.Realm) {
		return fail("user or realm is not valid UTF-8")
	}
	return csvEntry{rec: rec}
}
