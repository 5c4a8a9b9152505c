package otp_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/otp"
)

// rfcKeyBase32Check is base32check of the RFC key, computed independently with
//
//	python3 -c "import base64,hashlib; p=b'12345678901234567890';
//	print(base64.b32encode(hashlib.sha1(p).digest()[:4]+p).decode().rstrip('='))"
const rfcKeyBase32Check = "PYFBEQRRGIZTINJWG44DSMBRGIZTINJWG44DSMA"

func TestParseKey(t *testing.T) {
	tests := []struct {
		name, in, format string
		want             []byte
		wantErr          error
	}{
		{"hex", "3132333435363738393031323334353637383930", "hex", rfcKey, nil},
		{"hex is the default", "3132333435363738393031323334353637383930", "", rfcKey, nil},
		{"upper-case hex", "DEADBEEF", "HEX", []byte{0xde, 0xad, 0xbe, 0xef}, nil},
		{"empty hex", "", "hex", nil, otp.ErrKeyFormat},
		{"odd hex", "abc", "hex", nil, otp.ErrKeyFormat},
		{"not hex", "zz", "hex", nil, otp.ErrKeyFormat},
		{"base32check (python)", rfcKeyBase32Check, "base32check", rfcKey, nil},
		{"base32check lower case", strings.ToLower(rfcKeyBase32Check), "base32check", rfcKey, nil},
		{"base32check padded", rfcKeyBase32Check + "=", "base32check", rfcKey, nil},
		{"base32check one byte (python)", "LOUTZHIA", "base32check", []byte{0}, nil},
		{"base32check wrong checksum", "A" + rfcKeyBase32Check[1:], "base32check", nil, otp.ErrKeyChecksum},
		{"base32check changed payload", rfcKeyBase32Check[:20] + "A" + rfcKeyBase32Check[21:], "base32check", nil, otp.ErrKeyChecksum},
		{"base32check checksum only", "PYFBEQQ", "base32check", nil, otp.ErrKeyFormat},
		{"base32check empty", "", "base32check", nil, otp.ErrKeyFormat},
		{"base32check not base32", "PYFBEQRR1", "base32check", nil, otp.ErrKeyFormat},
		{"unknown format", "00", "base64", nil, otp.ErrKeyFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := otp.ParseKey(tc.in, tc.format)
			if !errors.Is(err, tc.wantErr) || !bytes.Equal(got, tc.want) {
				t.Errorf("ParseKey = %x, %v; want %x, %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && tc.in != "" && strings.Contains(err.Error(), tc.in) {
				t.Errorf("error %q contains the key", err)
			}
		})
	}
}

func TestBase32CheckRoundTrip(t *testing.T) {
	for _, size := range []int{1, 10, 20, 32, 64} {
		key := bytes.Repeat([]byte{byte(size), 0xa5}, size)[:size]
		t.Run(strings.Repeat("k", size), func(t *testing.T) {
			s := otp.FormatBase32Check(key)
			if strings.Contains(s, "=") {
				t.Errorf("FormatBase32Check = %q is padded", s)
			}
			got, err := otp.ParseKey(s, otp.KeyFormatBase32Check)
			if err != nil || !bytes.Equal(got, key) {
				t.Errorf("ParseKey(FormatBase32Check) = %x, %v; want %x", got, err, key)
			}
		})
	}
	if got := otp.FormatBase32Check(rfcKey); got != rfcKeyBase32Check {
		t.Errorf("FormatBase32Check(rfc key) = %q, want %q", got, rfcKeyBase32Check)
	}
}

func TestFormatBase32(t *testing.T) {
	tests := []struct {
		name string
		key  []byte
		want string
	}{
		{"rfc key (spec 7.1)", rfcKey, "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"},
		{"padding stripped", []byte("f"), "MY"},
		{"empty", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := otp.FormatBase32(tc.key); got != tc.want {
				t.Errorf("FormatBase32 = %q, want %q", got, tc.want)
			}
		})
	}
}
