package otp_test

import (
	"errors"
	"math"
	"testing"

	"github.com/authsrv/authsrv/otp"
)

// RFC 4226 Appendix D, as tabulated in spec §7.1.
var rfc4226 = []struct {
	counter   uint64
	truncated string // the 31-bit dynamic truncation, decimal
	hotp      string
}{
	{0, "1284755224", "755224"},
	{1, "1094287082", "287082"},
	{2, "137359152", "359152"},
	{3, "1726969429", "969429"},
	{4, "1640338314", "338314"},
	{5, "868254676", "254676"},
	{6, "1918287922", "287922"},
	{7, "82162583", "162583"},
	{8, "673399871", "399871"},
	{9, "645520489", "520489"},
}

func TestHOTPRFC4226(t *testing.T) {
	for _, tc := range rfc4226 {
		t.Run(tc.hotp, func(t *testing.T) {
			if got := otp.HOTP(rfcKey, tc.counter, 6, otp.SHA1); got != tc.hotp {
				t.Errorf("HOTP(counter %d) = %q, want %q", tc.counter, got, tc.hotp)
			}
			// 10 digits show the whole truncated value, zero-padded.
			want10 := tc.truncated
			for len(want10) < 10 {
				want10 = "0" + want10
			}
			if got := otp.HOTP(rfcKey, tc.counter, 10, otp.SHA1); got != want10 {
				t.Errorf("HOTP(counter %d, 10 digits) = %q, want %q", tc.counter, got, want10)
			}
		})
	}
}

func TestHOTPDigits(t *testing.T) {
	tests := []struct {
		name   string
		digits int
		want   string
	}{
		{"5 invalid", 5, ""},
		{"6", 6, "287082"},
		{"7", 7, "4287082"},
		{"8 (spec 7.1)", 8, "94287082"},
		{"9", 9, "094287082"},
		{"10", 10, "1094287082"},
		{"11 invalid", 11, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := otp.HOTP(rfcKey, 1, tc.digits, otp.SHA1); got != tc.want {
				t.Errorf("HOTP = %q, want %q", got, tc.want)
			}
			err := otp.ValidateDigits(tc.digits)
			if (tc.want == "") != errors.Is(err, otp.ErrDigits) {
				t.Errorf("ValidateDigits(%d) = %v", tc.digits, err)
			}
		})
	}
}

func TestHOTPHash(t *testing.T) {
	tests := []struct {
		name string
		h    otp.Hash
		want string
	}{
		{"zero value is sha1", "", "755224"},
		{"sha1", otp.SHA1, "755224"},
		{"unknown", otp.Hash("md5"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := otp.HOTP(rfcKey, 0, 6, tc.h); got != tc.want {
				t.Errorf("HOTP = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseHash(t *testing.T) {
	tests := []struct {
		in      string
		want    otp.Hash
		wantErr bool
		lenient otp.Hash
		keySize int
	}{
		{"sha1", otp.SHA1, false, otp.SHA1, 20},
		{"sha256", otp.SHA256, false, otp.SHA256, 32},
		{"SHA512", otp.SHA512, false, otp.SHA512, 64},
		{"", "", true, otp.SHA1, 20},
		{"md5", "", true, otp.SHA1, 20},
		{"sha-256", "", true, otp.SHA1, 20},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := otp.ParseHash(tc.in)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("ParseHash = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && !errors.Is(err, otp.ErrHash) {
				t.Errorf("error %v does not wrap ErrHash", err)
			}
			if got := otp.HashOrSHA1(tc.in); got != tc.lenient {
				t.Errorf("HashOrSHA1 = %q, want %q", got, tc.lenient)
			}
			if got := otp.DefaultKeySize(tc.lenient); got != tc.keySize {
				t.Errorf("DefaultKeySize(%q) = %d, want %d", tc.lenient, got, tc.keySize)
			}
		})
	}
}

func TestCheckHOTP(t *testing.T) {
	at := func(c uint64) string { return otp.HOTP(rfcKey, c, 6, otp.SHA1) }
	tests := []struct {
		name   string
		otp    string
		from   uint64
		window int
		digits int
		want   uint64
		wantOK bool
	}{
		{"spec 7.1: fresh token accepts counter 1", "287082", 0, 10, 6, 1, true},
		{"spec 7.1: used value rejected", "287082", 2, 10, 6, 0, false},
		{"first counter of window", at(5), 5, 10, 6, 5, true},
		{"last counter of window", at(14), 5, 10, 6, 14, true},
		{"one past the window", at(15), 5, 10, 6, 0, false},
		{"one below from", at(4), 5, 10, 6, 0, false},
		{"far below from", at(0), 5, 10, 6, 0, false},
		{"window 1 matches from only", at(5), 5, 1, 6, 5, true},
		{"window 0", at(5), 5, 0, 6, 0, false},
		{"negative window", at(5), 5, -1, 6, 0, false},
		{"8 digits", "94287082", 0, 10, 8, 1, true},
		{"length must equal digits", "94287082", 0, 10, 6, 0, false},
		{"short otp", "28708", 0, 10, 6, 0, false},
		{"empty otp", "", 0, 10, 6, 0, false},
		{"invalid digits", "28708", 0, 10, 5, 0, false},
		{"largest counter", at(math.MaxUint64), math.MaxUint64 - 2, 10, 6, math.MaxUint64, true},
		{"window wraps: stops at largest counter", at(0), math.MaxUint64 - 2, 10, 6, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := otp.CheckHOTP(rfcKey, tc.otp, tc.from, tc.window, tc.digits, otp.SHA1)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("CheckHOTP = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestCheckHOTPHashes(t *testing.T) {
	key := []byte("12345678901234567890123456789012")
	for _, h := range []otp.Hash{otp.SHA1, otp.SHA256, otp.SHA512} {
		t.Run(string(h), func(t *testing.T) {
			v := otp.HOTP(key, 7, 8, h)
			if got, ok := otp.CheckHOTP(key, v, 3, 10, 8, h); !ok || got != 7 {
				t.Errorf("CheckHOTP = %d, %v; want 7, true", got, ok)
			}
		})
	}
	if otp.HOTP(key, 7, 8, otp.SHA1) == otp.HOTP(key, 7, 8, otp.SHA256) {
		t.Error("sha1 and sha256 give the same value")
	}
}
