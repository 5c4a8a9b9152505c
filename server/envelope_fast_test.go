package server

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// encodeReflect is what writeJSON writes for v: encoding/json's bytes.
func encodeReflect(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAppendEnvelopeMatchesEncodingJSON: every envelope the fast encoder
// takes comes out byte for byte as encoding/json writes it, and one it
// does not take is left untouched for encoding/json.
func TestAppendEnvelopeMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "plain", "with \"quote\"", `back\slash`, "<script>&amp;", "tab\tnewline\n", "\x00\x1f",
		"ünïcödé", "\u2028\u2029", "bad utf8 \xff\xfe", "emoji 😀", "~ DEL\x7f"}
	floats := []float64{0, 1, 1764112345.123456, 1764112345, 0.5, 1e-6, 123456789012345678901.0, 1e20}
	values := []any{nil, true, false, "CHALLENGE", 0, int64(-3), int32(7), uint64(1 << 63), map[string]any(nil)}
	var envs []envelope
	for i, s := range strs {
		detail := map[string]any{"message": s, s: "key", "threadid": int64(i), "otplen": 6, "serial": "HOTP0001",
			"pin_change": false, "user-realm": nil, "neg": -1}
		envs = append(envs,
			envelope{ID: 2, JSONRPC: "2.0", Result: envResult{Status: true, Authentication: "ACCEPT", Value: true},
				Version: versionText + s, VersionNumber: "3.13", Time: floats[i%len(floats)], Detail: detail},
			envelope{ID: 1, JSONRPC: "2.0", Result: envResult{Status: false, Error: &envError{Code: 905, Message: s}},
				Version: "", Time: floats[(i+3)%len(floats)], Detail: noDetail},
			envelope{ID: 1, JSONRPC: s, Result: envResult{Status: true, Value: s}, Time: 1, Detail: map[string]any{}},
		)
	}
	for i, v := range values {
		envs = append(envs, envelope{ID: 2, JSONRPC: "2.0", Result: envResult{Status: true, Value: v},
			Time: floats[i%len(floats)], Detail: map[string]any{"v": v, "nested": map[string]any{"a": v, "b": "x"}}})
	}
	for _, env := range envs {
		got, ok := appendEnvelope([]byte("prefix"), &env)
		if !ok {
			t.Errorf("appendEnvelope refused %+v", env)
			continue
		}
		want := append([]byte("prefix"), encodeReflect(t, env)...)
		if !bytes.Equal(got, want) {
			t.Errorf("appendEnvelope:\n got %s\nwant %s", got, want)
		}
	}

	// What the fast encoder does not know is left to encoding/json whole.
	others := []envelope{
		{ID: 1, JSONRPC: "2.0", Result: envResult{Status: true, Value: []any{1, "a"}}, Time: 1},
		{ID: 1, JSONRPC: "2.0", Result: envResult{Status: true, Value: 1.5}, Time: 1},
		{ID: 1, JSONRPC: "2.0", Result: envResult{Status: true}, Time: 1, Detail: map[string]any{"x": []string{"a"}}},
		{ID: 1, JSONRPC: "2.0", Result: envResult{Status: true}, Time: 1, Detail: json.RawMessage(`{"a": 1}`)},
		{ID: 1, JSONRPC: "2.0", Result: envResult{Status: true}, Time: 1e-9},
		{ID: 1, JSONRPC: "2.0", Result: envResult{Status: true}, Time: 1e21},
		{ID: 1, JSONRPC: "2.0", Result: envResult{Status: true}, Time: math.NaN()},
	}
	for _, env := range others {
		got, ok := appendEnvelope([]byte("prefix"), &env)
		if ok || string(got) != "prefix" {
			t.Errorf("appendEnvelope took %+v: %q, %v", env, got, ok)
		}
	}
}
