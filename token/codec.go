package token

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/authsrv/authsrv/user"
)

// The stored token record. save writes the compact binary form below;
// load reads it and the JSON records older versions wrote (a JSON record
// starts with '{' or white space, never with recordMarker), so existing
// data files keep working and each token moves to the binary form on its
// next write.
//
// Binary form, after the marker byte:
//
//	uvarint schema
//	uvarint ID, str Serial, str Type, str Description
//	byte    flags (1 Active, 2 Revoked, 4 Locked, 8 Owner present)
//	str     RolloutState
//	varint  OTPLen, uvarint Count, varint CountWindow, SyncWindow, FailCount, MaxFail
//	uvarint n, then n × (str key, str value)            Info, keys sorted
//	uvarint n+1 (0: nil), then n × str                  Realms
//	[4 × str Login, Realm, Resolver, UID]               Owner, when flag 8
//	str     PIN
//	uvarint n+1 (0: nil), then n bytes                  PINSealed
//	uvarint n+1 (0: nil), then n × (str key, bytes)     Sealed, keys sorted
//
// where str and bytes are a uvarint length and the bytes. Sealed values are
// the ciphertexts exactly as the sealer made them.
const recordMarker = 0x01

const (
	flagActive = 1 << iota
	flagRevoked
	flagLocked
	flagOwner
	flagsKnown = flagActive | flagRevoked | flagLocked | flagOwner
)

var errRecordShort = errors.New("truncated record")

// encodeRecord returns t's stored form.
func encodeRecord(t *Token) []byte {
	n := 64 + len(t.Serial) + len(t.Type) + len(t.Description) + len(t.RolloutState) + len(t.PIN) + len(t.PINSealed)
	for k, v := range t.Info {
		n += len(k) + len(v) + 4
	}
	for _, r := range t.Realms {
		n += len(r) + 2
	}
	for k, v := range t.Sealed {
		n += len(k) + len(v) + 4
	}
	if t.Owner != nil {
		n += len(t.Owner.Login) + len(t.Owner.Realm) + len(t.Owner.Resolver) + len(t.Owner.UID) + 4
	}
	b := make([]byte, 0, n)
	b = append(b, recordMarker)
	b = binary.AppendUvarint(b, schema)
	b = binary.AppendUvarint(b, t.ID)
	b = appendStr(b, t.Serial)
	b = appendStr(b, t.Type)
	b = appendStr(b, t.Description)
	var flags byte
	if t.Active {
		flags |= flagActive
	}
	if t.Revoked {
		flags |= flagRevoked
	}
	if t.Locked {
		flags |= flagLocked
	}
	if t.Owner != nil {
		flags |= flagOwner
	}
	b = append(b, flags)
	b = appendStr(b, t.RolloutState)
	b = binary.AppendVarint(b, int64(t.OTPLen))
	b = binary.AppendUvarint(b, t.Count)
	b = binary.AppendVarint(b, int64(t.CountWindow))
	b = binary.AppendVarint(b, int64(t.SyncWindow))
	b = binary.AppendVarint(b, int64(t.FailCount))
	b = binary.AppendVarint(b, int64(t.MaxFail))
	b = binary.AppendUvarint(b, uint64(len(t.Info)))
	var buf [24]string
	for _, k := range sortedKeys(buf[:0], t.Info) {
		b = appendStr(b, k)
		b = appendStr(b, t.Info[k])
	}
	if t.Realms == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(t.Realms))+1)
		for _, r := range t.Realms {
			b = appendStr(b, r)
		}
	}
	if o := t.Owner; o != nil {
		b = appendStr(b, o.Login)
		b = appendStr(b, o.Realm)
		b = appendStr(b, o.Resolver)
		b = appendStr(b, o.UID)
	}
	b = appendStr(b, t.PIN)
	b = appendNilBytes(b, t.PINSealed)
	if t.Sealed == nil {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(t.Sealed))+1)
		for _, k := range sortedKeys(buf[:0], t.Sealed) {
			b = appendStr(b, k)
			b = binary.AppendUvarint(b, uint64(len(t.Sealed[k])))
			b = append(b, t.Sealed[k]...)
		}
	}
	return b
}

// sortedKeys appends m's keys to keys in order, so that equal tokens
// encode to equal bytes (the caller's keys is a stack buffer for the usual
// handful of keys).
func sortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func appendNilBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(v))+1)
	return append(b, v...)
}

// decodeRecord reads a stored record of either form. Malformed input gives
// an error, never a panic.
func decodeRecord(serial string, raw []byte) (*Token, error) {
	if len(raw) > 0 && raw[0] == recordMarker {
		t, err := decodeBinary(raw[1:])
		if err != nil {
			return nil, fmt.Errorf("token: decode %s: %w", serial, err)
		}
		return t, nil
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("token: decode %s: %w", serial, err)
	}
	if r.Info == nil {
		r.Info = map[string]string{}
	}
	return &r.Token, nil
}

// reader reads the binary form; the first error sticks and every later
// read returns zero values. s is the input as one string and own a copy
// of it from ownAt on (made at the first byte value): the decoded strings
// and byte values are slices of these, one allocation each instead of one
// per field.
type reader struct {
	b     []byte
	s     string
	own   []byte
	ownAt int
	err   error
}

// pos is the offset of v, a slice the reader just returned, in the input.
func (r *reader) pos(v []byte) int { return len(r.s) - len(r.b) - len(v) }

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errRecordShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) int() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errRecordShort)
		return 0
	}
	if int64(int(v)) != v {
		r.fail(errors.New("integer out of range"))
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail(errRecordShort)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// bytes returns the next n bytes (aliasing the input).
func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(errRecordShort)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string {
	v := r.bytes(r.uvarint())
	if r.err != nil || len(v) == 0 {
		return ""
	}
	if !utf8.Valid(v) {
		r.fail(errors.New("a text field is not UTF-8"))
		return ""
	}
	at := r.pos(v)
	return r.s[at : at+len(v)]
}

// ownBytes is bytes for a value the token keeps: a slice of the reader's
// own copy of the input, never of the caller's buffer (a store's page).
func (r *reader) ownBytes(n uint64) []byte {
	v := r.bytes(n)
	if r.err != nil {
		return nil
	}
	at := r.pos(v)
	if r.own == nil { // the byte values come last: copy from the first on
		r.own, r.ownAt = []byte(r.s[at:]), at
	}
	at -= r.ownAt
	return r.own[at : at+len(v) : at+len(v)]
}

// count reads a number of entries of at least min bytes each, bounded by
// what is left, so a forged count cannot make a large allocation.
func (r *reader) count(n uint64, min int) int {
	if r.err != nil {
		return 0
	}
	if n > uint64(len(r.b)/min) {
		r.fail(errRecordShort)
		return 0
	}
	return int(n)
}

// nilCount reads n+1 (0: nil) and reports whether the value is present.
func (r *reader) nilCount(min int) (int, bool) {
	v := r.uvarint()
	if v == 0 {
		return 0, false
	}
	return r.count(v-1, min), r.err == nil
}

func decodeBinary(b []byte) (*Token, error) {
	r := &reader{b: b, s: string(b)}
	if v := r.uvarint(); r.err == nil && (v == 0 || v > schema) {
		return nil, fmt.Errorf("unknown record schema %d", v)
	}
	t := &Token{}
	t.ID = r.uvarint()
	t.Serial = r.str()
	t.Type = r.str()
	if t.Type == legacyQuestionType {
		t.Type = Questionnaire{}.Name()
	}
	t.Description = r.str()
	flags := r.byte()
	if flags&^flagsKnown != 0 {
		r.fail(fmt.Errorf("unknown flags %#x", flags))
	}
	t.Active = flags&flagActive != 0
	t.Revoked = flags&flagRevoked != 0
	t.Locked = flags&flagLocked != 0
	t.RolloutState = r.str()
	t.OTPLen = r.int()
	t.Count = r.uvarint()
	t.CountWindow = r.int()
	t.SyncWindow = r.int()
	t.FailCount = r.int()
	t.MaxFail = r.int()
	n := r.count(r.uvarint(), 2)
	t.Info = make(map[string]string, n)
	for range n {
		k := r.str()
		t.Info[k] = r.str()
	}
	if r.err == nil && len(t.Info) != n {
		r.fail(errors.New("a duplicate info key"))
	}
	if n, ok := r.nilCount(1); ok {
		t.Realms = make([]string, n)
		for i := range t.Realms {
			t.Realms[i] = r.str()
		}
	}
	if flags&flagOwner != 0 {
		o := &user.User{}
		o.Login = r.str()
		o.Realm = r.str()
		o.Resolver = r.str()
		o.UID = r.str()
		t.Owner = o
	}
	t.PIN = r.str()
	if v := r.uvarint(); v > 0 {
		t.PINSealed = r.ownBytes(v - 1)
	}
	if n, ok := r.nilCount(2); ok {
		t.Sealed = make(map[string][]byte, n)
		for range n {
			k := r.str()
			t.Sealed[k] = r.ownBytes(r.uvarint())
		}
		if r.err == nil && len(t.Sealed) != n {
			r.fail(errors.New("a duplicate sealed field"))
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail(errors.New("trailing bytes"))
	}
	if r.err != nil {
		return nil, r.err
	}
	return t, nil
}
