package tokenfile_test

import (
	"bytes"
	"maps"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/tokenfile"
)

func TestParseYubikeyCSV(t *testing.T) {
	aesKey := mustHex("9d6ce2d40e93ba1e4e9e1ef6a4c8bde9")
	oathKey := mustHex("fb17b7ea0c8bb14e6bf27a82e6d5b6d64d1d9bdd")
	in := strings.Join([]string{
		"LOGGING START,12/11/2013 11:09",
		"Yubico OTP,12/11/2013 11:10,1,vvgutbiedkvi,ed81f3e0bd45,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,0,0,0,0,0,0,0,0,0,0",
		"OATH-HOTP,12/11/2013 11:12,1,cccccccccccb,,fb17b7ea0c8bb14e6bf27a82e6d5b6d64d1d9bdd,,,0,0,0,0,0,0,0,0,0,0",
		"OATH-HOTP,12/11/2013 11:13,2,,,FB17B7EA0C8BB14E6BF27A82E6D5B6D64D1D9BDD,,,0,0,0,0,0,0,0,0,0,0",
		"# ykksm 1",
		"4711,dlcfffckrcde,ca62baca62ba,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,be70aeca62ba,2009-01-22 00:25:11,",
		"4712,,,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,",
	}, "\r\n")
	recs, fails, err := tokenfile.ParseYubikeyCSV(strings.NewReader(in), tokenfile.Limits{})
	if err != nil || len(fails) != 0 {
		t.Fatalf("got %+v, %v", fails, err)
	}
	noSecrets(t, recs, fails, err, aesKey, oathKey)
	want := []struct {
		serial, typ string
		otplen      int
		key         []byte
		info        map[string]string
	}{
		{"UBAMvvgutbiedkvi", "yubikey", 44, aesKey, map[string]string{"tokenkind": "hardware", "yubikey.prefix": "vvgutbiedkvi", "yubikey.uid": "ed81f3e0bd45"}},
		{"UBOMcccccccccccb", "hotp", 6, oathKey, map[string]string{"tokenkind": "hardware"}},
		{"UBOM4", "hotp", 6, oathKey, map[string]string{"tokenkind": "hardware"}},
		{"UBAM4711", "yubikey", 44, aesKey, map[string]string{"tokenkind": "hardware", "yubikey.prefix": "dlcfffckrcde", "yubikey.uid": "ca62baca62ba"}},
		{"UBAM4712", "yubikey", 32, aesKey, map[string]string{"tokenkind": "hardware"}},
	}
	if len(recs) != len(want) {
		t.Fatalf("records = %v", recs)
	}
	for i, w := range want {
		t.Run(w.serial, func(t *testing.T) {
			r := recs[i]
			if r.Serial != w.serial || r.Type != w.typ || r.OTPLen != w.otplen || !bytes.Equal(r.Key, w.key) || !maps.Equal(r.Info, w.info) {
				t.Errorf("record = %v info %v, want %+v", r, r.Info, w)
			}
		})
	}
}

func TestParseYubikeyCSVFailures(t *testing.T) {
	in := strings.Join([]string{
		"Static Password,12/11/2013 11:10,1,vvgutbiedkvi,ed81f3e0bd45,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,0",
		"Challenge-Response: HMAC-SHA1,12/11/2013 11:10,2,,,fb17b7ea0c8bb14e6bf27a82e6d5b6d64d1d9bdd,,,0",
		"Yubico OTP,12/11/2013 11:10,1,vvgutbiedkvi,ed81f3e0bd45,9d6ce2d40e93ba1e4e9e1ef6a4c8bd,,,0",
		"Yubico OTP,12/11/2013 11:10,1,abcdef,ed81f3e0bd45,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,0",
		"Yubico OTP,12/11/2013 11:10,1,vvgutbiedkvj,ed81,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,0",
		"OATH-HOTP,12/11/2013 11:12,1,cccccccccccd,,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,0",
		"OATH-HOTP,12/11/2013 11:12,1,bad id,,fb17b7ea0c8bb14e6bf27a82e6d5b6d64d1d9bdd,,,0",
		"Yubico OTP,12/11/2013 11:10,1,vvgutbiedkvi,ed81f3e0bd45,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,0",
		"Yubico OTP,12/11/2013 11:10,1,vvgutbiedkvi,ed81f3e0bd45,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,0",
		"HOTP001,3132333435363738393031323334353637383930",
	}, "\n")
	recs, fails, err := tokenfile.ParseYubikeyCSV(strings.NewReader(in), tokenfile.Limits{})
	if err != nil || len(recs) != 1 || recs[0].Serial != "UBAMvvgutbiedkvi" {
		t.Fatalf("got %v, %v", recs, err)
	}
	for i, want := range []string{
		"static password mode is not supported",
		"challenge-response mode is not supported",
		"AES key must be 16 bytes",
		"public ID must be modhex",
		"private ID must be 6 bytes",
		"OATH-HOTP key must be 20 bytes",
		"serial may only contain",
		"duplicate serial (first at line 8)",
		"unknown Yubikey mode",
	} {
		if i >= len(fails) || !strings.Contains(fails[i].Reason, want) {
			t.Fatalf("failures = %+v; #%d should say %q", fails, i, want)
		}
	}
	if len(fails) != 9 || fails[0].Line != 1 || fails[8].Line != 10 {
		t.Errorf("failures = %+v", fails)
	}
	noSecrets(t, recs, fails, err, mustHex("9d6ce2d40e93ba1e4e9e1ef6a4c8bde9"), mustHex("fb17b7ea0c8bb14e6bf27a82e6d5b6d64d1d9bdd"))
}

func TestParseYubikeyCSVLimits(t *testing.T) {
	line := "Yubico OTP,12/11/2013 11:10,1,,ed81f3e0bd45,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,0\n"
	in := strings.Repeat(line, 5)
	_, _, err := tokenfile.ParseYubikeyCSV(strings.NewReader(in), tokenfile.Limits{MaxRecords: 4})
	wantWrapped(t, err, tokenfile.ErrTooLarge)
	_, _, err = tokenfile.ParseYubikeyCSV(strings.NewReader(in), tokenfile.Limits{MaxBytes: int64(len(in) - 1)})
	wantWrapped(t, err, tokenfile.ErrTooLarge)
	recs, fails, err := tokenfile.ParseYubikeyCSV(strings.NewReader(in), tokenfile.Limits{MaxRecords: 5})
	if err != nil || len(recs) != 5 || len(fails) != 0 || recs[4].Serial != "UBAM5" {
		t.Fatalf("got %v, %+v, %v", recs, fails, err)
	}
}
