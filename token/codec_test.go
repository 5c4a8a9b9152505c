package token

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/user"
)

// fillAll sets every field of the struct v points to a non-zero value
// derived from seed, by reflection: a field added to Token (or user.User)
// gets a value here, and the round trip fails until the codec carries it.
func fillAll(t *testing.T, v reflect.Value, seed string) {
	t.Helper()
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		val := seed + "-" + name
		switch f.Kind() {
		case reflect.String:
			f.SetString(val + "-é")
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int, reflect.Int64, reflect.Int32:
			f.SetInt(int64(-1000 - 7*i))
		case reflect.Uint64, reflect.Uint, reflect.Uint32:
			f.SetUint(1<<40 + uint64(i))
		case reflect.Slice:
			switch f.Type().Elem().Kind() {
			case reflect.String:
				f.Set(reflect.ValueOf([]string{val + "a", "", val + "b"}))
			case reflect.Uint8:
				f.SetBytes([]byte{0, 1, 0xff, byte(i)})
			default:
				t.Fatalf("fillAll: no value for field %s of %s", name, f.Type())
			}
		case reflect.Map:
			m := reflect.MakeMap(f.Type())
			for j, k := range []string{"b", "a", "", "c\x00d"} {
				var e reflect.Value
				switch f.Type().Elem().Kind() {
				case reflect.String:
					e = reflect.ValueOf(strings.Repeat(val, j))
				case reflect.Slice:
					e = reflect.ValueOf([]byte(strings.Repeat(val, j)))
				default:
					t.Fatalf("fillAll: no value for field %s of %s", name, f.Type())
				}
				m.SetMapIndex(reflect.ValueOf(k), e)
			}
			f.Set(m)
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			fillAll(t, p.Elem(), val)
			f.Set(p)
		default:
			t.Fatalf("fillAll: no value for field %s of kind %s", name, f.Kind())
		}
		if f.IsZero() {
			t.Fatalf("fillAll: field %s left zero", name)
		}
	}
}

func roundTrip(t *testing.T, tok *Token) *Token {
	t.Helper()
	raw := encodeRecord(tok)
	if raw[0] != recordMarker {
		t.Fatalf("the record starts with %#x", raw[0])
	}
	got, err := decodeRecord(tok.Serial, raw)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !bytes.Equal(encodeRecord(got), raw) {
		t.Fatal("a decoded token encodes to other bytes")
	}
	return got
}

// Every field of every token type survives the binary form, and the
// binary form decodes to exactly what the JSON form did.
func TestRecordRoundTripEveryField(t *testing.T) {
	for _, typ := range DefaultRegistry().Names() {
		t.Run(typ, func(t *testing.T) {
			tok := &Token{}
			fillAll(t, reflect.ValueOf(tok).Elem(), typ)
			tok.Type = typ
			got := roundTrip(t, tok)
			if !reflect.DeepEqual(got, tok) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tok)
			}
			js, err := json.Marshal(record{store.Versioned{Schema: schema}, *tok})
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := decodeRecord(tok.Serial, js)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, fromJSON) {
				t.Fatalf("binary and JSON decode differently:\nbinary %+v\n  json %+v", got, fromJSON)
			}
		})
	}
}

// Nil and empty slices and maps, no owner, zero and extreme numbers keep
// what the JSON form kept: Info is never nil after a load, an empty
// Realms stays empty (not nil), a missing one stays nil.
func TestRecordRoundTripEdges(t *testing.T) {
	cases := []*Token{
		{Serial: "E1", Info: map[string]string{}},
		{Serial: "E2", Info: map[string]string{}, Realms: []string{}, Sealed: map[string][]byte{}, PINSealed: []byte{}},
		{Serial: "E3", Info: map[string]string{"k": ""}, Owner: &user.User{}, Count: ^uint64(0), ID: ^uint64(0),
			OTPLen: -1 << 62, MaxFail: 1<<62 - 1, Sealed: map[string][]byte{"otpkey": {}}},
	}
	for _, tok := range cases {
		if got := roundTrip(t, tok); !reflect.DeepEqual(got, tok) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, tok)
		}
	}
	got := roundTrip(t, &Token{Serial: "E4"})
	if got.Info == nil || len(got.Info) != 0 {
		t.Fatalf("a token without info loads with Info %#v", got.Info)
	}
}

// Equal tokens encode to equal bytes, whatever the map order.
func TestRecordEncodingIsDeterministic(t *testing.T) {
	tok := &Token{Serial: "D1", Info: map[string]string{}, Sealed: map[string][]byte{}}
	for i := range 50 {
		tok.Info[strings.Repeat("k", i+1)] = "v"
		tok.Sealed[strings.Repeat("s", i+1)] = []byte{byte(i)}
	}
	first := encodeRecord(tok)
	for range 20 {
		if !bytes.Equal(encodeRecord(tok.Clone()), first) {
			t.Fatal("two encodings of one token differ")
		}
	}
}

// A record an older version wrote as JSON loads, the index rebuild reads
// it, and the next save writes the binary form.
func TestRecordJSONMigrates(t *testing.T) {
	svc := New(Config{Store: storetest.Open(t)})
	ctx := t.Context()
	old := `{"schema":1,"id":7,"serial":"OLD1","type":"hotp","description":"from json","active":true,"revoked":false,"locked":false,` +
		`"rollout_state":"","otplen":6,"count":42,"count_window":10,"sync_window":1000,"failcount":1,"maxfail":10,` +
		`"info":{"hashlib":"sha1","count_auth":"3"},"realms":["r1"],"owner":{"login":"alice","realm":"r1","resolver":"res","uid":"1000"},` +
		`"pin":"$argon2id$x","sealed":{"otpkey":"AAEC/w=="}}`
	if err := svc.cfg.Store.Update(ctx, func(tx store.Tx) error {
		return tx.Bucket(bucketTokens).Put([]byte("OLD1"), []byte(old))
	}); err != nil {
		t.Fatal(err)
	}
	want := &Token{ID: 7, Serial: "OLD1", Type: "hotp", Description: "from json", Active: true, OTPLen: 6, Count: 42,
		CountWindow: 10, SyncWindow: 1000, FailCount: 1, MaxFail: 10, Info: map[string]string{"hashlib": "sha1", "count_auth": "3"},
		Realms: []string{"r1"}, Owner: &user.User{Login: "alice", Realm: "r1", Resolver: "res", UID: "1000"},
		PIN: "$argon2id$x", Sealed: map[string][]byte{"otpkey": {0, 1, 2, 0xff}}}
	got, err := svc.Get(ctx, "OLD1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("JSON record loads as\n%+v\nwant\n%+v", got, want)
	}
	if err := svc.BuildIndexes(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := svc.cfg.Store.View(ctx, func(tx store.Tx) error {
		if tx.Bucket(bucketAttr).Get([]byte("OLD1")) == nil {
			t.Error("the index rebuild left the JSON record out")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Update(ctx, "OLD1", false, func(t *Token) error { t.Count++; return nil }); err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := svc.cfg.Store.View(ctx, func(tx store.Tx) error {
		raw = bytes.Clone(tx.Bucket(bucketTokens).Get([]byte("OLD1")))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 || raw[0] != recordMarker {
		t.Fatalf("the save after a JSON load wrote %q", raw)
	}
	fresh := New(Config{Store: svc.cfg.Store})
	got, err = fresh.Get(ctx, "OLD1")
	if err != nil {
		t.Fatal(err)
	}
	want.Count = 43
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after the binary save:\n%+v\nwant\n%+v", got, want)
	}
}

// The decoder rejects malformed records with an error: truncations,
// forged lengths and counts, unknown schema and flags, trailing bytes.
func TestRecordDecodeRejects(t *testing.T) {
	tok := &Token{Serial: "R1", Type: "hotp", Info: map[string]string{"a": "b"}, Realms: []string{"r"},
		Owner: &user.User{Login: "l"}, Sealed: map[string][]byte{"otpkey": {1, 2, 3}}, PINSealed: []byte{9}}
	raw := encodeRecord(tok)
	empty := encodeRecord(&Token{})
	if _, err := decodeRecord("", empty); err != nil || len(empty) != 19 || empty[14] != 0 {
		t.Fatalf("the empty record %v: %v", empty, err)
	}
	flags := bytes.Clone(empty)
	flags[6] = 0x80
	for i := 1; i < len(raw); i++ {
		if _, err := decodeRecord("R1", raw[:i]); err == nil {
			t.Fatalf("a record cut at %d of %d bytes decoded", i, len(raw))
		}
	}
	bad := map[string][]byte{
		"trailing":       append(bytes.Clone(raw), 0),
		"schema 0":       {recordMarker, 0},
		"schema 2":       {recordMarker, 2},
		"huge string":    {recordMarker, 1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"empty":          {recordMarker},
		"not JSON":       []byte("{"),
		"invalid UTF-8":  {recordMarker, 1, 0, 1, 0xff},
		"unknown flags":  flags,
		"duplicate info": slices.Concat(empty[:14], []byte{2, 1, 'a', 0, 1, 'a', 0}, empty[15:]),
		"duplicate seal": slices.Concat(empty[:len(empty)-1], []byte{3, 1, 'a', 0, 1, 'a', 0}),
	}
	for name, b := range bad {
		if _, err := decodeRecord("R1", b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// Malformed input gives an error, never a panic; whatever decodes encodes
// again to a record that decodes to the same token.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(&Token{Serial: "F1", Info: map[string]string{}}))
	f.Add(encodeRecord(&Token{Serial: "F2", Type: "hotp", Info: map[string]string{"a": "b"}, Realms: []string{"r"},
		Owner: &user.User{Login: "l"}, Sealed: map[string][]byte{"otpkey": {1, 2, 3}}, PINSealed: []byte{9}}))
	f.Add([]byte(`{"serial":"F3","info":{"a":"b"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decodeRecord("F", raw)
		if err != nil {
			return
		}
		again, err := decodeRecord("F", encodeRecord(got))
		if err != nil {
			t.Fatalf("a decoded token's encoding does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoding changed the token:\n%+v\n%+v", again, got)
		}
	})
}

// benchToken is an HOTP token as enrollment and a few authentications
// leave it.
func benchToken() *Token {
	return &Token{ID: 1234, Serial: "OATH0001A2B3", Type: "hotp", Active: true, OTPLen: 6, Count: 4711, CountWindow: 10,
		SyncWindow: 1000, MaxFail: 10, Realms: []string{"bench"},
		Info: map[string]string{InfoCreationDate: "2026-11-25T23:00:00+00:00", InfoTokenKind: KindSoftware, InfoHashlib: "sha1",
			InfoCountAuth: "4711", InfoCountAuthSuccess: "4711", InfoLastAuth: "2026-11-25 23:59:59.123456+0000"},
		Owner:  &user.User{Login: "bench001", Realm: "bench", Resolver: "benchres", UID: "1001"},
		Sealed: map[string][]byte{FieldKey: make([]byte, 48)}}
}

// The stored record both ways: json is the form older versions wrote.
func BenchmarkRecordEncode(b *testing.B) {
	tok := benchToken()
	b.Run("binary", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = encodeRecord(tok)
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(record{store.Versioned{Schema: schema}, *tok}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRecordDecode(b *testing.B) {
	tok := benchToken()
	js, err := json.Marshal(record{store.Versioned{Schema: schema}, *tok})
	if err != nil {
		b.Fatal(err)
	}
	for name, raw := range map[string][]byte{"binary": encodeRecord(tok), "json": js} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeRecord(tok.Serial, raw); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(raw)), "record-bytes")
		})
	}
}

// TestCodecLegacyQuestionType: a record written while the question type
// was named "questionnaire" reads as privacyIDEA's "question".
func TestCodecLegacyQuestionType(t *testing.T) {
	raw := encodeRecord(&Token{ID: 7, Serial: "QUST1", Type: "questionnaire", Info: map[string]string{}})
	got, err := decodeRecord("QUST1", raw)
	if err != nil {
		t.Fatal(err)
	}
	if got.Type != "question" {
		t.Fatalf("type %q, want question", got.Type)
	}
}
