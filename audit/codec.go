package audit

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Stored entries are encoded compactly: a version byte, then every field
// in a fixed order, numbers as varints and strings and hashes with a
// varint length. Entries written before this encoding are JSON objects
// (their first byte is '{'), and stay readable: the chain hash and the
// signatures cover the columns, never the encoding, so a log holds both
// kinds and verifies alike.

// recordV1 is the version byte of the compact encoding.
const recordV1 = 0x01

// errRecordShort is returned for a compact record cut short.
var errRecordShort = errors.New("compact record is cut short")

// appendRecord appends rec in the compact encoding to dst.
func appendRecord(dst []byte, rec *record) []byte {
	e := &rec.Entry
	dst = append(dst, recordV1)
	dst = binary.AppendUvarint(dst, e.Number)
	dst = appendTime(dst, e.Date)
	dst = appendTime(dst, e.StartDate)
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(e.Duration))
	var flags byte
	if e.Success {
		flags |= 1
	}
	dst = append(dst, flags)
	for _, s := range e.strings() {
		dst = appendBytes(dst, s)
	}
	dst = appendBytes(dst, rec.Prev)
	dst = appendBytes(dst, rec.Hash)
	return appendBytes(dst, rec.Sig)
}

// strings are the entry's string columns in the order of the encoding.
func (e *Entry) strings() [16]string {
	return [16]string{e.Action, e.Authentication, e.Serial, e.TokenType, e.User, e.Realm, e.Resolver,
		e.Administrator, e.ActionDetail, e.Info, e.Node, e.Client, e.UserAgent, e.UserAgentVersion,
		e.Policies, e.ThreadID}
}

// stringPtrs are pointers to the string columns, in the same order.
func (e *Entry) stringPtrs() [16]*string {
	return [16]*string{&e.Action, &e.Authentication, &e.Serial, &e.TokenType, &e.User, &e.Realm, &e.Resolver,
		&e.Administrator, &e.ActionDetail, &e.Info, &e.Node, &e.Client, &e.UserAgent, &e.UserAgentVersion,
		&e.Policies, &e.ThreadID}
}

func appendTime(dst []byte, t time.Time) []byte {
	dst = binary.AppendVarint(dst, t.Unix())
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

func appendBytes[T string | []byte](dst []byte, s T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// How far decodeRecord decodes.
const (
	decodeDate    = iota // the number and the date
	decodeColumns        // every column, not the hashes
	decodeAll            // everything
)

// decodeRecord decodes a stored entry of either encoding into rec, as far
// as depth asks. It fails for bytes that are neither, for a JSON record
// of an unknown schema, and for a compact one with trailing bytes or
// strings that are not UTF-8 (the writer stores only valid UTF-8).
func decodeRecord(raw []byte, rec *record, depth int) error {
	if len(raw) == 0 {
		return errors.New("empty record")
	}
	switch raw[0] {
	case '{':
		return decodeJSON(raw, rec, depth)
	case recordV1:
		return decodeV1(raw[1:], rec, depth)
	}
	return fmt.Errorf("unknown record encoding 0x%02x", raw[0])
}

// columnsOnly is a JSON record without its hashes, which are not decoded.
type columnsOnly struct {
	Schema int   `json:"schema"`
	Entry  Entry `json:"entry"`
}

// dateOnly is a JSON record of which only the number and date are
// decoded.
type dateOnly struct {
	Schema int `json:"schema"`
	Entry  struct {
		Number uint64    `json:"number"`
		Date   time.Time `json:"date"`
	} `json:"entry"`
}

// decodeJSON decodes an entry written before the compact encoding.
func decodeJSON(raw []byte, rec *record, depth int) error {
	*rec = record{}
	switch depth {
	case decodeDate:
		var r dateOnly
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		rec.Schema, rec.Entry.Number, rec.Entry.Date = r.Schema, r.Entry.Number, r.Entry.Date
	case decodeColumns:
		var r columnsOnly
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		rec.Schema, rec.Entry = r.Schema, r.Entry
	default:
		if err := json.Unmarshal(raw, rec); err != nil {
			return err
		}
	}
	if rec.Schema != schema {
		return fmt.Errorf("unknown schema %d", rec.Schema)
	}
	return nil
}

// decoder reads the compact encoding.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errRecordShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errRecordShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) time() time.Time {
	sec, nsec := d.varint(), d.uvarint()
	if d.err == nil && nsec >= 1e9 {
		d.err = errors.New("compact record has a bad time")
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errRecordShort
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	v := d.bytes()
	if d.err == nil && !utf8.Valid(v) {
		d.err = errors.New("compact record holds a string that is not UTF-8")
	}
	return string(v)
}

func decodeV1(b []byte, rec *record, depth int) error {
	d := decoder{b: b}
	*rec = record{Schema: schema}
	e := &rec.Entry
	e.Number = d.uvarint()
	e.Date = d.time()
	if depth == decodeDate {
		return d.err
	}
	e.StartDate = d.time()
	if d.err == nil && len(d.b) < 9 {
		d.err = errRecordShort
	}
	if d.err != nil {
		return d.err
	}
	e.Duration = math.Float64frombits(binary.BigEndian.Uint64(d.b))
	if math.IsNaN(e.Duration) || math.IsInf(e.Duration, 0) {
		// JSON has neither; the writer never makes them.
		return errors.New("compact record has a duration that is not a number")
	}
	flags := d.b[8]
	d.b = d.b[9:]
	if flags&^1 != 0 {
		return errors.New("compact record has unknown flags")
	}
	e.Success = flags&1 != 0
	for _, p := range e.stringPtrs() {
		*p = d.string()
	}
	if depth == decodeColumns {
		return d.err
	}
	rec.Prev = cloneBytes(d.bytes())
	rec.Hash = cloneBytes(d.bytes())
	rec.Sig = cloneBytes(d.bytes())
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("compact record has trailing bytes")
	}
	return d.err
}

// cloneBytes copies b out of the transaction's memory (nil stays nil, as
// JSON decodes an empty prev).
func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// columnText returns the part of a compact record that holds its string
// columns, each verbatim after its length (for the search's pre-check),
// or false when raw is not a well-formed compact record.
func columnText(raw []byte) ([]byte, bool) {
	if len(raw) == 0 || raw[0] != recordV1 {
		return nil, false
	}
	d := decoder{b: raw[1:]}
	d.uvarint()
	d.varint()
	d.uvarint()
	d.varint()
	d.uvarint()
	if d.err != nil || len(d.b) < 9 {
		return nil, false
	}
	d.b = d.b[9:]
	start := len(raw) - len(d.b)
	for range 16 {
		d.bytes()
	}
	if d.err != nil {
		return nil, false
	}
	return raw[start : len(raw)-len(d.b)], true
}
