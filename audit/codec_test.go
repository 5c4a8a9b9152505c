package audit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func codecEntries() []record {
	full := Entry{
		Number: 1 << 40, Date: time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC),
		StartDate: time.Date(2026, 3, 1, 11, 59, 59, 1, time.UTC), Duration: 1.234567, Action: "POST /validate/check",
		Success: true, Authentication: "ACCEPT", Serial: "HOTP0001", TokenType: "hotp", User: "Ärger \u212Aelvin",
		Realm: "realm1", Resolver: "r1", Administrator: "admin", ActionDetail: "d", Info: strings.Repeat("i", 300),
		Node: "node1", Client: "10.0.0.1", UserAgent: "privacyidea-cp", UserAgentVersion: "2.0", Policies: "a,b",
		ThreadID: "140",
	}
	far := full
	far.Date, far.StartDate, far.Duration, far.Success = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Unix(-3e10, 5).UTC(), -0.5, false
	return []record{
		{Schema: schema, Entry: Entry{Number: 1}, Hash: bytes.Repeat([]byte{1}, 32), Sig: bytes.Repeat([]byte{2}, 64)},
		{Schema: schema, Entry: full, Prev: bytes.Repeat([]byte{0xc3}, 32), Hash: bytes.Repeat([]byte{0xff}, 32), Sig: bytes.Repeat([]byte{0x80}, 64)},
		{Schema: schema, Entry: far, Prev: []byte{1}, Hash: []byte{2}, Sig: []byte{3}},
	}
}

// TestCodecRoundTrip: the compact encoding gives back exactly what was
// written, and what the JSON encoding gives back, so the hashes that
// Verify recomputes are the same for both.
func TestCodecRoundTrip(t *testing.T) {
	for i, rec := range codecEntries() {
		rec.Entry = canonical(rec.Entry)
		raw := appendRecord(nil, &rec)
		var got record
		if err := decodeRecord(raw, &got, decodeAll); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if !reflect.DeepEqual(got, rec) {
			t.Errorf("%d: round trip\n got %+v\nwant %+v", i, got, rec)
		}
		js, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var fromJSON record
		if err := decodeRecord(js, &fromJSON, decodeAll); err != nil {
			t.Fatalf("%d: JSON: %v", i, err)
		}
		if !bytes.Equal(hashEntry(fromJSON.Prev, fromJSON.Entry), hashEntry(got.Prev, got.Entry)) {
			t.Errorf("%d: the JSON and compact forms hash differently", i)
		}
		if len(raw) >= len(js) {
			t.Errorf("%d: compact %d bytes, JSON %d", i, len(raw), len(js))
		}
		for _, depth := range []int{decodeDate, decodeColumns} {
			var part record
			if err := decodeRecord(raw, &part, depth); err != nil {
				t.Fatalf("%d depth %d: %v", i, depth, err)
			}
			if !part.Entry.Date.Equal(rec.Entry.Date) || part.Entry.Number != rec.Entry.Number {
				t.Errorf("%d depth %d: %+v", i, depth, part.Entry)
			}
			if depth == decodeColumns && part.Entry != rec.Entry {
				t.Errorf("%d: columns %+v, want %+v", i, part.Entry, rec.Entry)
			}
		}
	}
}

// TestCodecRefuses: every cut of a compact record, trailing bytes,
// unknown flags, strings that are not UTF-8, an unknown version byte and
// a JSON record of another schema are errors, never a panic or a record.
func TestCodecRefuses(t *testing.T) {
	rec := codecEntries()[1]
	raw := appendRecord(nil, &rec)
	for n := range len(raw) {
		var got record
		if err := decodeRecord(raw[:n], &got, decodeAll); err == nil {
			t.Errorf("a record cut to %d of %d bytes decodes", n, len(raw))
		}
	}
	bad := map[string][]byte{
		"trailing": append(bytes.Clone(raw), 0),
		"version":  append([]byte{0x02}, raw[1:]...),
		"schema":   []byte(`{"schema":2,"entry":{"number":1}}`),
		"garbage":  []byte("\x00\x01"),
	}
	utf := rec
	utf.Entry.User = "\xff"
	bad["utf8"] = appendRecord(nil, &utf)
	flags := bytes.Clone(raw)
	// version, number (6 bytes), two times, the duration: then the flags.
	off := 1 + 6 + len(appendTime(nil, rec.Entry.Date)) + len(appendTime(nil, rec.Entry.StartDate)) + 8
	flags[off] = 0x80
	bad["flags"] = flags
	for name, b := range bad {
		var got record
		if err := decodeRecord(b, &got, decodeAll); err == nil {
			t.Errorf("%s: decodes", name)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, rec := range codecEntries() {
		f.Add(appendRecord(nil, &rec))
	}
	f.Add([]byte(`{"schema":1,"entry":{"number":3}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var rec record
		if decodeRecord(raw, &rec, decodeAll) != nil || len(raw) == 0 || raw[0] != recordV1 {
			return
		}
		// What decodes encodes to a record that decodes the same.
		var again record
		if err := decodeRecord(appendRecord(nil, &rec), &again, decodeAll); err != nil {
			t.Fatalf("re-encoding %x: %v", raw, err)
		}
		if !reflect.DeepEqual(again, rec) {
			t.Errorf("re-encoding %x: %+v, want %+v", raw, again, rec)
		}
	})
}

// TestColumnText: the columns' part of a compact record holds every
// string column verbatim, and nothing of the hashes.
func TestColumnText(t *testing.T) {
	for i, rec := range codecEntries() {
		raw := appendRecord(nil, &rec)
		text, ok := columnText(raw)
		if !ok {
			t.Fatalf("%d: no column text", i)
		}
		for _, s := range rec.Entry.strings() {
			if !bytes.Contains(text, []byte(s)) {
				t.Errorf("%d: column %q missing", i, s)
			}
		}
		if len(rec.Sig) > 8 && bytes.Contains(text, rec.Sig) {
			t.Errorf("%d: the signature is part of the column text", i)
		}
		if _, ok := columnText(raw[:len(raw)/2]); ok && len(raw)/2 < len(text) {
			t.Errorf("%d: a cut record gives column text", i)
		}
	}
	if _, ok := columnText([]byte(`{"schema":1}`)); ok {
		t.Error("a JSON record gives column text")
	}
}
