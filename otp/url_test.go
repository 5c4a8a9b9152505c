package otp_test

import (
	"strings"
	"testing"

	"github.com/authsrv/authsrv/otp"
)

func TestOtpauthURL(t *testing.T) {
	tests := []struct {
		name string
		p    otp.URLParams
		want string
	}{
		{
			name: "spec 7.3 hotp example",
			p:    otp.URLParams{Type: "hotp", Label: "OATH0001A1B2", Issuer: "privacyIDEA", Serial: "OATH0001A1B2", Key: rfcKey, Digits: 6, Hash: otp.SHA1},
			want: "otpauth://hotp/OATH0001A1B2?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&counter=1&digits=6&creator=privacyidea&issuer=privacyIDEA&serial=OATH0001A1B2",
		},
		{
			name: "spec 7.3 totp example",
			p:    otp.URLParams{Type: "totp", Label: "alice@realm1", Issuer: "ACME Corp", Serial: "TOTP0002C3D4", Key: rfcKey, Digits: 8, Hash: otp.SHA256, Period: 60},
			want: "otpauth://totp/alice%40realm1?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&algorithm=SHA256&period=60&digits=8&creator=privacyidea&issuer=ACME%20Corp&serial=TOTP0002C3D4",
		},
		{
			name: "spec 4.1 init example googleurl",
			p:    otp.URLParams{Type: "totp", Label: "TOTP0003A7F2", Issuer: "privacyIDEA", Serial: "TOTP0003A7F2", Key: rfcKey, Period: 30},
			want: "otpauth://totp/TOTP0003A7F2?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&period=30&digits=6&creator=privacyidea&issuer=privacyIDEA&serial=TOTP0003A7F2",
		},
		{
			name: "defaults: totp period 30, digits 6, zero hash",
			p:    otp.URLParams{Type: "TOTP", Label: "x", Issuer: "i", Serial: "s", Key: []byte{0}},
			want: "otpauth://totp/x?secret=AA&period=30&digits=6&creator=privacyidea&issuer=i&serial=s",
		},
		{
			name: "sha512",
			p:    otp.URLParams{Type: "hotp", Label: "x", Issuer: "i", Serial: "s", Key: []byte{0}, Hash: otp.SHA512, Digits: 8},
			want: "otpauth://hotp/x?secret=AA&counter=1&algorithm=SHA512&digits=8&creator=privacyidea&issuer=i&serial=s",
		},
		{
			name: "daypassword has a period in seconds",
			p:    otp.URLParams{Type: "daypassword", Label: "x", Issuer: "i", Serial: "s", Key: []byte{0}},
			want: "otpauth://daypassword/x?secret=AA&period=86400&digits=6&creator=privacyidea&issuer=i&serial=s",
		},
		{
			name: "email: no counter, no period",
			p:    otp.URLParams{Type: "email", Label: "PIEM0001", Issuer: "i", Serial: "PIEM0001", Key: []byte{0}, Period: 30},
			want: "otpauth://email/PIEM0001?secret=AA&digits=6&creator=privacyidea&issuer=i&serial=PIEM0001",
		},
		{
			name: "escaping: slash kept, utf-8, reserved characters",
			p:    otp.URLParams{Type: "hotp", Label: "a/b ü&?=#+", Issuer: "Müller & Söhne", Serial: "S_1-2.3~", Key: []byte{0}},
			want: "otpauth://hotp/a/b%20%C3%BC%26%3F%3D%23%2B?secret=AA&counter=1&digits=6&creator=privacyidea&issuer=M%C3%BCller%20%26%20S%C3%B6hne&serial=S_1-2.3~",
		},
		{
			name: "extras in order",
			p: otp.URLParams{Type: "hotp", Label: "x", Issuer: "i", Serial: "s", Key: []byte{0}, Extras: []otp.Param{
				{"2step_salt", "8"}, {"2step_output", "20"}, {"2step_difficulty", "10000"},
				{"image", "https://example.com/logo.png"}, {"pin", "True"}, {"app_force_unlock", "pin"},
			}},
			want: "otpauth://hotp/x?secret=AA&counter=1&digits=6&creator=privacyidea&issuer=i&serial=s" +
				"&2step_salt=8&2step_output=20&2step_difficulty=10000&image=https%3A//example.com/logo.png&pin=True&app_force_unlock=pin",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := otp.OtpauthURL(tc.p); got != tc.want {
				t.Errorf("OtpauthURL =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestOtpauthURLLabelTruncation(t *testing.T) {
	// Budget: 180 − len("otpauth://totp/?secret=<32 chars>&counter=1") = 180 − 65 = 115
	// characters, counted before encoding.
	label := strings.Repeat("ä", 200)
	got := otp.OtpauthURL(otp.URLParams{Type: "totp", Label: label, Issuer: "i", Serial: "s", Key: rfcKey})
	wantLabel := strings.Repeat("%C3%A4", 115)
	if !strings.HasPrefix(got, "otpauth://totp/"+wantLabel+"?secret=") {
		t.Errorf("label not cut to 115 characters: %s", got)
	}
	// A short label is kept whole.
	got = otp.OtpauthURL(otp.URLParams{Type: "totp", Label: strings.Repeat("a", 115), Issuer: "i", Serial: "s", Key: rfcKey})
	if !strings.HasPrefix(got, "otpauth://totp/"+strings.Repeat("a", 115)+"?") {
		t.Errorf("label of exactly the budget was cut: %s", got)
	}
	// A key too long for any label leaves the label empty.
	got = otp.OtpauthURL(otp.URLParams{Type: "hotp", Label: "x", Key: make([]byte, 128)})
	if !strings.HasPrefix(got, "otpauth://hotp/?secret=") {
		t.Errorf("label not dropped: %s", got[:40])
	}
}

func TestURLParamsString(t *testing.T) {
	p := otp.URLParams{Type: "hotp", Label: "x", Serial: "s", Key: rfcKey}
	if s := p.String(); strings.Contains(s, "GEZDG") || strings.Contains(s, string(rfcKey)) || !strings.Contains(s, "REDACTED") {
		t.Errorf("String() = %q leaks the key", s)
	}
}

func TestOathURL(t *testing.T) {
	tests := []struct {
		name      string
		label     string
		timeBased bool
		want      string
	}{
		{"spec 4.1 totp example", "TOTP0003A7F2", true, "oathtoken:///addToken?name=TOTP0003A7F2&lockdown=true&key=3132333435363738393031323334353637383930&timeBased=true"},
		{"hotp", "OATH0001A1B2", false, "oathtoken:///addToken?name=OATH0001A1B2&lockdown=true&key=3132333435363738393031323334353637383930"},
		{"label escaped", "alice@realm1 x&y", false, "oathtoken:///addToken?name=alice%40realm1%20x%26y&lockdown=true&key=3132333435363738393031323334353637383930"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := otp.OathURL(tc.label, rfcKey, tc.timeBased); got != tc.want {
				t.Errorf("OathURL = %s, want %s", got, tc.want)
			}
		})
	}
}
