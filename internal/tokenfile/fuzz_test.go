package tokenfile_test

import (
	"bytes"
	"errors"
	"regexp"
	"strconv"
	"testing"

	"github.com/authsrv/authsrv/internal/tokenfile"
)

// Seeds are in testdata/fuzz/<FuzzName>/ and in the f.Add calls.

var serialRE = regexp.MustCompile(`^[0-9a-zA-Z\-_]+$`)

// checkResult asserts what every parser promises, whatever the input.
func checkResult(t *testing.T, recs []tokenfile.Record, fails []tokenfile.Failure, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, tokenfile.ErrMalformed) && !errors.Is(err, tokenfile.ErrTooLarge) {
			t.Fatalf("error %v wraps no sentinel", err)
		}
		if recs != nil || fails != nil {
			t.Fatalf("error %v with a partial result", err)
		}
		return
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if !serialRE.MatchString(r.Serial) || seen[r.Serial] {
			t.Fatalf("bad or duplicate serial %q", r.Serial)
		}
		seen[r.Serial] = true
		if len(r.Key) == 0 || r.Type == "" {
			t.Fatalf("record %v without key or type", r)
		}
	}
	for _, f := range fails {
		if f.Reason == "" {
			t.Fatalf("failure %+v without reason", f)
		}
		if f.Serial != "" && !serialRE.MatchString(f.Serial) {
			t.Fatalf("failure names an invalid serial %q", f.Serial)
		}
	}
}

var iterationRE = regexp.MustCompile(`IterationCount[^0-9]*([0-9]+)`)

// costly reports whether data may ask for a PBKDF2 of more than 10000
// iterations.
func costly(data []byte) bool {
	for _, m := range iterationRE.FindAllSubmatch(data, -1) {
		if n, err := strconv.Atoi(string(m[1])); err != nil || n > 10000 {
			return true
		}
	}
	return false
}

// fuzzLimits keep single executions fast.
var fuzzLimits = tokenfile.Limits{MaxBytes: 64 << 10, MaxRecords: 200}

func FuzzParseOATHCSV(f *testing.F) {
	f.Add([]byte("serial,key,type,otplen,timestep\nhotp1," + rfcSeedHex + "\ntotp1," + rfcSeedHex + ",totp,8,60,alice,realm\n"))
	f.Add([]byte("# comment\n\n\"a\"\"b\",00\nbad\"quote,11\n\"open,22\n"))
	f.Add([]byte("x,zz,hotp,7\nx,00\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, fails, err := tokenfile.ParseOATHCSV(bytes.NewReader(data), fuzzLimits)
		checkResult(t, recs, fails, err)
		for _, r := range recs {
			if r.Type != "hotp" && r.Type != "totp" || r.OTPLen != 6 && r.OTPLen != 8 {
				t.Fatalf("record %v", r)
			}
		}
	})
}

func FuzzParseYubikeyCSV(f *testing.F) {
	f.Add([]byte("Yubico OTP,12/11/2013 11:10,1,vvgutbiedkvi,ed81f3e0bd45,9d6ce2d40e93ba1e4e9e1ef6a4c8bde9,,,0,0,0,0,0,0,0,0,0,0\n"))
	f.Add([]byte("OATH-HOTP,12/11/2013 11:12,1,,,fb17b7ea0c8bb14e6bf27a82e6d5b6d64d1d9bdd,,,0\nLOGGING START,x\n"))
	f.Add([]byte("# ykksm 1\n4711,dlcfffckrcde,ca62baca62ba,ecde18dbe76fbd0c33330f1c354871db,be70aeca62ba,2009-01-22 00:25:11,\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, fails, err := tokenfile.ParseYubikeyCSV(bytes.NewReader(data), fuzzLimits)
		checkResult(t, recs, fails, err)
		for _, r := range recs {
			if r.Type == "yubikey" && (len(r.Key) != 16 || r.OTPLen < 32) || r.Info["tokenkind"] != "hardware" {
				t.Fatalf("record %v", r)
			}
		}
	})
}

func FuzzParsePSKC(f *testing.F) {
	f.Add([]byte(figure2), uint8(0))
	doc, _ := pskDoc(f, macKey)
	f.Add(doc.bytes(), uint8(1))
	f.Add(doc.bytes(), uint8(5))
	doc.Keys[0].MAC[3] ^= 0x40
	f.Add(doc.bytes(), uint8(9))
	pw := xDoc{
		EncryptionKey: pbkdf2Key([]byte("saltsalt"), 3, 16, ""),
		Keys:          []xKey{encryptedKey(f, "PW1", rfcSeed, derivePBKDF2(f, "", "qwerty", []byte("saltsalt"), 3, 16), nil, 1)},
	}
	f.Add(pw.bytes(), uint8(2))
	f.Add([]byte(`<!DOCTYPE x [<!ENTITY a "b">]><KeyContainer/>`), uint8(0))
	f.Add([]byte(`<KeyContainer><KeyPackage><Key Id="k" Algorithm="totp"><Data><Secret><PlainValue>AA==</PlainValue></Secret></Data></Key></KeyPackage></KeyContainer>`), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		opt := tokenfile.PSKCOptions{
			ValidateMAC: []string{"", tokenfile.MACCheckFailHard, tokenfile.MACCheckFailSoft, tokenfile.MACNoCheck}[mode&3],
		}
		if mode&4 != 0 {
			opt.PresharedKey = rfcPSK
		}
		// PBKDF2 at the allowed maximum costs a quarter second, which stalls
		// the fuzzer (unit tests cover the cap); keep derivations cheap.
		if mode&8 != 0 && !costly(data) {
			opt.Password = "qwerty"
		}
		recs, fails, err := tokenfile.ParsePSKC(bytes.NewReader(data), opt, fuzzLimits)
		checkResult(t, recs, fails, err)
		for _, r := range recs {
			if r.Type != "hotp" && r.Type != "totp" || r.Info["tokenkind"] != "hardware" {
				t.Fatalf("record %v", r)
			}
		}
	})
}
