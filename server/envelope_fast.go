package server

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
)

// The envelope of the hot answers (/validate/check and its kin: a bool or
// string value and a detail of a few strings and numbers) is written here
// byte for byte as encoding/json writes it, without reflection: the fixed
// parts are constants, the detail's keys are sorted as encoding/json sorts
// them, strings that need no escaping are copied as they are and anything
// else goes through encoding/json. An envelope holding a value this file
// does not know is left to encoding/json whole (appendEnvelope reports
// false), so every answer keeps exactly the bytes it had.

// envBufs recycles the buffers answers are encoded into.
var envBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledBuf is the largest buffer put back into envBufs: a rare huge
// answer does not stay pinned.
const maxPooledBuf = 64 << 10

// appendEnvelope appends env as json.Encoder.Encode writes it (with the
// trailing newline) and reports whether it could; when it could not, b is
// returned unchanged in length.
func appendEnvelope(b []byte, env *envelope) ([]byte, bool) {
	start := len(b)
	fail := func() ([]byte, bool) { return b[:start], false }
	if env.AuthItems != nil {
		return fail()
	}
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(env.ID), 10)
	b = append(b, `,"jsonrpc":`...)
	var ok bool
	if b, ok = appendJSONString(b, env.JSONRPC); !ok {
		return fail()
	}
	b = append(b, `,"result":{"status":`...)
	b = strconv.AppendBool(b, env.Result.Status)
	if env.Result.Authentication != "" {
		b = append(b, `,"authentication":`...)
		if b, ok = appendJSONString(b, env.Result.Authentication); !ok {
			return fail()
		}
	}
	if env.Result.Value != nil {
		b = append(b, `,"value":`...)
		if b, ok = appendJSONValue(b, env.Result.Value); !ok {
			return fail()
		}
	}
	if e := env.Result.Error; e != nil {
		b = append(b, `,"error":{"code":`...)
		b = strconv.AppendInt(b, int64(e.Code), 10)
		b = append(b, `,"message":`...)
		if b, ok = appendJSONString(b, e.Message); !ok {
			return fail()
		}
		b = append(b, '}')
	}
	b = append(b, '}')
	if env.Version != "" {
		b = append(b, `,"version":`...)
		if b, ok = appendJSONString(b, env.Version); !ok {
			return fail()
		}
	}
	if env.VersionNumber != "" {
		b = append(b, `,"versionnumber":`...)
		if b, ok = appendJSONString(b, env.VersionNumber); !ok {
			return fail()
		}
	}
	b = append(b, `,"time":`...)
	if b, ok = appendJSONFloat(b, env.Time); !ok {
		return fail()
	}
	if env.Detail != nil {
		b = append(b, `,"detail":`...)
		if b, ok = appendJSONValue(b, env.Detail); !ok {
			return fail()
		}
	}
	return append(b, "}\n"...), true
}

// appendJSONValue appends the values the hot answers hold; it reports
// false for any other type.
func appendJSONValue(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case string:
		return appendJSONString(b, x)
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case int32:
		return strconv.AppendInt(b, int64(x), 10), true
	case uint64:
		return strconv.AppendUint(b, x, 10), true
	case json.RawMessage:
		// Only the literal null the error envelope uses: other raw
		// messages are compacted by encoding/json.
		if string(x) == "null" {
			return append(b, "null"...), true
		}
		return b, false
	case map[string]any:
		if x == nil {
			return append(b, "null"...), true
		}
		return appendJSONObject(b, x)
	default:
		return b, false
	}
}

// keyBufs recycles the key slices detail objects are sorted with.
var keyBufs = sync.Pool{New: func() any { k := make([]string, 0, 16); return &k }}

// appendJSONObject appends m with its keys sorted, as encoding/json does.
func appendJSONObject(b []byte, m map[string]any) ([]byte, bool) {
	kp := keyBufs.Get().(*[]string)
	keys := (*kp)[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ok := true
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendJSONString(b, k); !ok {
			break
		}
		b = append(b, ':')
		if b, ok = appendJSONValue(b, m[k]); !ok {
			break
		}
	}
	clear(keys)
	*kp = keys[:0]
	keyBufs.Put(kp)
	if !ok {
		return b, false
	}
	return append(b, '}'), true
}

// appendJSONString appends s quoted. Printable ASCII other than the
// characters encoding/json escapes (quote, backslash and, with its default
// HTML escaping, <, > and &) is copied; any other string is encoded by
// encoding/json itself.
func appendJSONString(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil {
				return b, false
			}
			return append(b, q...), true
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// appendJSONFloat appends f as encoding/json writes a float64 in the range
// where it uses plain decimal notation (the envelope's time); other values
// are left to encoding/json.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		return b, false
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64), true
}
