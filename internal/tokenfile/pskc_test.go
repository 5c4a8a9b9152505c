package tokenfile_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/internal/tokenfile"
)

// figure2 is a plain-value document in the style of RFC 6030 Figure 2.
const figure2 = `<?xml version="1.0" encoding="UTF-8"?>
<KeyContainer Version="1.0" Id="exampleID1" xmlns="urn:ietf:params:xml:ns:keyprov:pskc">
  <KeyPackage>
    <DeviceInfo>
      <Manufacturer>Manufacturer</Manufacturer>
      <SerialNo>987654321</SerialNo>
      <UserId>DC=example-bank,DC=net</UserId>
    </DeviceInfo>
    <CryptoModuleInfo><Id>CM_ID_001</Id></CryptoModuleInfo>
    <Key Id="12345678" Algorithm="urn:ietf:params:xml:ns:keyprov:pskc:hotp">
      <Issuer>Issuer</Issuer>
      <AlgorithmParameters>
        <ResponseFormat Length="8" Encoding="DECIMAL"/>
      </AlgorithmParameters>
      <Data>
        <Secret>
          <PlainValue>MTIzNDU2Nzg5MDEyMzQ1Njc4OTA=
          </PlainValue>
        </Secret>
        <Counter><PlainValue>0</PlainValue></Counter>
      </Data>
      <UserId>UID=jsmith,DC=example-bank,DC=net</UserId>
    </Key>
  </KeyPackage>
</KeyContainer>`

func parsePSKC(t *testing.T, doc []byte, opt tokenfile.PSKCOptions) ([]tokenfile.Record, []tokenfile.Failure, error) {
	t.Helper()
	recs, fails, err := tokenfile.ParsePSKC(bytes.NewReader(doc), opt, tokenfile.Limits{})
	if err != nil && (recs != nil || fails != nil) {
		t.Fatalf("error %v came with %d records and %d failures", err, len(recs), len(fails))
	}
	noSecrets(t, recs, fails, err, opt.PresharedKey, []byte(opt.Password), rfcSeed)
	return recs, fails, err
}

func TestPSKCPlainValue(t *testing.T) {
	recs, fails, err := parsePSKC(t, []byte(figure2), tokenfile.PSKCOptions{})
	if err != nil || len(fails) != 0 || len(recs) != 1 {
		t.Fatalf("got %v, %+v, %v; want one record", recs, fails, err)
	}
	r := recs[0]
	if r.Serial != "987654321" || r.Type != "hotp" || r.OTPLen != 8 || r.Counter != 0 || r.TimeStep != 0 {
		t.Errorf("record = %v", r)
	}
	if !bytes.Equal(r.Key, rfcSeed) {
		t.Errorf("key = %x, want %x", r.Key, rfcSeed)
	}
	if r.Info["tokenkind"] != "hardware" || r.User != "" {
		t.Errorf("info = %v, user = %q", r.Info, r.User)
	}
}

func TestPSKCFields(t *testing.T) {
	doc := xDoc{Keys: []xKey{
		{ID: "keyid-only", Algorithm: algTOTP, Length: "6", Interval: "60", Plain: rfcSeed},
		{Serial: "counted", Counter: "42", Plain: rfcSeed, Algorithm: "urn:ietf:params:xml:ns:keyprov:pskc#hotp"},
		{Serial: "pin", Algorithm: "urn:ietf:params:xml:ns:keyprov:pskc:pin", Plain: rfcSeed},
		{Serial: "ocra", Algorithm: "urn:ietf:params:xml:ns:keyprov:pskc:ocra-1", Plain: rfcSeed},
		{Serial: "noalg", Algorithm: " ", Plain: rfcSeed},
		{Serial: "short", Length: "4", Plain: rfcSeed},
		{Serial: "badcounter", Counter: "-1", Plain: rfcSeed},
		{Serial: "badinterval", Algorithm: algTOTP, Interval: "0", Plain: rfcSeed},
		{Serial: "nob64", RawSecret: "<PlainValue>not base64!</PlainValue>"},
		{Serial: "nosecret", RawSecret: " "},
		{Serial: "empty", RawSecret: "<PlainValue></PlainValue>"},
		{Serial: "counted", Plain: rfcSeed},
		{Serial: "bad serial!", Plain: rfcSeed},
		{Plain: rfcSeed},
	}}.bytes()
	recs, fails, err := parsePSKC(t, doc, tokenfile.PSKCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("records = %v, want keyid-only and counted", recs)
	}
	totp := recordFor(t, recs, "keyid-only")
	if totp.Type != "totp" || totp.TimeStep != 60 || totp.OTPLen != 6 || !bytes.Equal(totp.Key, rfcSeed) {
		t.Errorf("totp = %v", totp)
	}
	if c := recordFor(t, recs, "counted"); c.Counter != 42 || c.Type != "hotp" || c.OTPLen != 0 {
		t.Errorf("counted = %v", c)
	}
	for serial, want := range map[string]string{
		"pin":         "unsupported algorithm",
		"ocra":        "unsupported algorithm",
		"noalg":       "no Algorithm",
		"short":       "Length must be 6 to 10",
		"badcounter":  "Counter",
		"badinterval": "TimeInterval",
		"nob64":       "not base64",
		"nosecret":    "no Secret",
		"empty":       "empty",
		"counted":     "duplicate serial",
	} {
		t.Run(serial, func(t *testing.T) {
			f := failureFor(t, fails, serial)
			if !strings.Contains(f.Reason, want) || f.Line == 0 {
				t.Errorf("failure = %+v, want reason with %q and a line", f, want)
			}
		})
	}
	var noSerial []string
	for _, f := range fails {
		if f.Serial == "" {
			noSerial = append(noSerial, f.Reason)
		}
	}
	if len(noSerial) != 2 || !strings.Contains(noSerial[0], "letters, digits") || !strings.Contains(noSerial[1], "missing serial") {
		t.Errorf("failures without serial = %q", noSerial)
	}
	if len(fails) != 12 {
		t.Errorf("%d failures, want 12: %+v", len(fails), fails)
	}
}

func TestPSKCSuiteHash(t *testing.T) {
	doc := strings.Replace(figure2, `<ResponseFormat`, `<Suite>HMAC-SHA256</Suite><ResponseFormat`, 1)
	recs, _, err := parsePSKC(t, []byte(doc), tokenfile.PSKCOptions{})
	if err != nil || len(recs) != 1 || recs[0].HashLib != "sha256" {
		t.Fatalf("got %v, %v; want hashlib sha256", recs, err)
	}
}

// pskDoc is a preshared-key document with two MACed keys and its seeds.
func pskDoc(t testing.TB, macKey []byte) (xDoc, map[string][]byte) {
	seeds := map[string][]byte{
		"HOTP0001": rfcSeed,
		"TOTP0002": mustHex("3132333435363738393031323334353637383930313233343536373839303132"),
	}
	k1 := encryptedKey(t, "HOTP0001", seeds["HOTP0001"], rfcPSK, macKey, 1)
	k2 := encryptedKey(t, "TOTP0002", seeds["TOTP0002"], rfcPSK, macKey, 2)
	k2.Algorithm, k2.Interval, k2.Counter = algTOTP, "30", ""
	return xDoc{
		EncryptionKey: pskKeyName,
		MACAlg:        uriSHA1,
		MACKey:        encryptCBC(t, rfcPSK, iv(9), macKey),
		Keys:          []xKey{k1, k2},
	}, seeds
}

var macKey = mustHex("1122334455667788990011223344556677889900")

func TestPSKCPresharedKey(t *testing.T) {
	doc, seeds := pskDoc(t, macKey)
	for _, mode := range []string{"", tokenfile.MACCheckFailHard, tokenfile.MACCheckFailSoft, tokenfile.MACNoCheck} {
		t.Run("mode="+mode, func(t *testing.T) {
			recs, fails, err := parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{PresharedKey: rfcPSK, ValidateMAC: mode})
			if err != nil || len(fails) != 0 || len(recs) != 2 {
				t.Fatalf("got %v, %+v, %v", recs, fails, err)
			}
			for serial, seed := range seeds {
				if r := recordFor(t, recs, serial); !bytes.Equal(r.Key, seed) {
					t.Errorf("%s: key = %x, want %x", serial, r.Key, seed)
				}
			}
			if r := recordFor(t, recs, "TOTP0002"); r.Type != "totp" || r.TimeStep != 30 || r.OTPLen != 6 {
				t.Errorf("totp = %v", r)
			}
			noSecrets(t, recs, fails, err, macKey, seeds["TOTP0002"])
		})
	}
}

func TestPSKCWrongKey(t *testing.T) {
	withMAC, _ := pskDoc(t, macKey)
	noMAC, _ := pskDoc(t, nil)
	noMAC.MACAlg = ""
	wrong := mustHex("00000000000000000000000000000000")
	for _, tc := range []struct {
		name string
		doc  xDoc
		opt  tokenfile.PSKCOptions
	}{
		{"with MAC", withMAC, tokenfile.PSKCOptions{PresharedKey: wrong}},
		{"with MAC soft", withMAC, tokenfile.PSKCOptions{PresharedKey: wrong, ValidateMAC: tokenfile.MACCheckFailSoft}},
		{"with MAC no_check", withMAC, tokenfile.PSKCOptions{PresharedKey: wrong, ValidateMAC: tokenfile.MACNoCheck}},
		{"without MAC", noMAC, tokenfile.PSKCOptions{PresharedKey: wrong}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parsePSKC(t, tc.doc.bytes(), tc.opt)
			wantWrapped(t, err, tokenfile.ErrMalformed)
			noSecrets(t, nil, nil, err, wrong, rfcPSK, macKey)
		})
	}
}

func TestPSKCNoKeyGiven(t *testing.T) {
	doc, _ := pskDoc(t, macKey)
	recs, fails, err := parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{})
	if err != nil || len(recs) != 0 || len(fails) != 2 {
		t.Fatalf("got %v, %+v, %v; want two failures", recs, fails, err)
	}
	for _, f := range fails {
		if f.Reason != "key is encrypted but no preshared key or password was given" {
			t.Errorf("reason = %q", f.Reason)
		}
	}
	// A password is no help without a DerivedKey.
	_, fails, err = parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{Password: "qwerty"})
	if err != nil || len(fails) != 2 || !strings.Contains(fails[0].Reason, "no DerivedKey") {
		t.Fatalf("got %+v, %v", fails, err)
	}
	// A preshared key of the wrong length is named as such.
	_, fails, err = parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{PresharedKey: []byte("short")})
	if err != nil || len(fails) != 2 || !strings.Contains(fails[0].Reason, "16, 24 or 32 bytes") {
		t.Fatalf("got %+v, %v", fails, err)
	}
}

func TestPSKCTamperedMAC(t *testing.T) {
	doc, seeds := pskDoc(t, macKey)
	doc.Keys[1].MAC[0] ^= 1
	data := doc.bytes()
	t.Run("hard", func(t *testing.T) {
		for _, mode := range []string{"", tokenfile.MACCheckFailHard} {
			_, _, err := parsePSKC(t, data, tokenfile.PSKCOptions{PresharedKey: rfcPSK, ValidateMAC: mode})
			wantWrapped(t, err, tokenfile.ErrMalformed)
			if !strings.Contains(err.Error(), "MAC check failed") || !strings.Contains(err.Error(), "TOTP0002") {
				t.Errorf("err = %v", err)
			}
		}
	})
	t.Run("soft", func(t *testing.T) {
		recs, fails, err := parsePSKC(t, data, tokenfile.PSKCOptions{PresharedKey: rfcPSK, ValidateMAC: tokenfile.MACCheckFailSoft})
		if err != nil || len(recs) != 1 || len(fails) != 1 {
			t.Fatalf("got %v, %+v, %v", recs, fails, err)
		}
		if f := failureFor(t, fails, "TOTP0002"); !strings.Contains(f.Reason, "MAC check failed") {
			t.Errorf("failure = %+v", f)
		}
		if r := recordFor(t, recs, "HOTP0001"); !bytes.Equal(r.Key, seeds["HOTP0001"]) {
			t.Errorf("key = %x", r.Key)
		}
	})
	t.Run("no_check", func(t *testing.T) {
		recs, fails, err := parsePSKC(t, data, tokenfile.PSKCOptions{PresharedKey: rfcPSK, ValidateMAC: tokenfile.MACNoCheck})
		if err != nil || len(recs) != 2 || len(fails) != 0 {
			t.Fatalf("got %v, %+v, %v", recs, fails, err)
		}
	})
	t.Run("missing ValueMAC", func(t *testing.T) {
		d, _ := pskDoc(t, macKey)
		d.Keys[0].MAC = nil
		_, _, err := parsePSKC(t, d.bytes(), tokenfile.PSKCOptions{PresharedKey: rfcPSK})
		wantWrapped(t, err, tokenfile.ErrMalformed)
		if !strings.Contains(err.Error(), "no ValueMAC") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("unsupported MAC algorithm", func(t *testing.T) {
		d, _ := pskDoc(t, macKey)
		d.MACAlg = "http://www.w3.org/2001/04/xmldsig-more#hmac-md5"
		_, _, err := parsePSKC(t, d.bytes(), tokenfile.PSKCOptions{PresharedKey: rfcPSK})
		wantWrapped(t, err, tokenfile.ErrMalformed)
		recs, fails, err := parsePSKC(t, d.bytes(), tokenfile.PSKCOptions{PresharedKey: rfcPSK, ValidateMAC: tokenfile.MACCheckFailSoft})
		if err != nil || len(recs) != 0 || len(fails) != 2 || !strings.Contains(fails[0].Reason, "unsupported MAC algorithm") {
			t.Fatalf("got %v, %+v, %v", recs, fails, err)
		}
	})
	t.Run("invalid mode", func(t *testing.T) {
		_, _, err := parsePSKC(t, data, tokenfile.PSKCOptions{PresharedKey: rfcPSK, ValidateMAC: "sometimes"})
		wantWrapped(t, err, tokenfile.ErrMalformed)
	})
}

func TestPSKCMACSHA256(t *testing.T) {
	doc, seeds := pskDoc(t, macKey)
	doc.MACAlg = "http://www.w3.org/2001/04/xmldsig-more#hmac-sha256"
	// The SHA-1 MACs of pskDoc no longer match...
	_, _, err := parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{PresharedKey: rfcPSK})
	wantWrapped(t, err, tokenfile.ErrMalformed)
	// ...the SHA-256 ones do.
	for i := range doc.Keys {
		doc.Keys[i].MAC = hmacSHA256(macKey, doc.Keys[i].Cipher)
	}
	recs, fails, err := parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{PresharedKey: rfcPSK})
	if err != nil || len(fails) != 0 || len(recs) != 2 || !bytes.Equal(recordFor(t, recs, "TOTP0002").Key, seeds["TOTP0002"]) {
		t.Fatalf("got %v, %+v, %v", recs, fails, err)
	}
}

func TestPSKCBadPadding(t *testing.T) {
	good := encryptedKey(t, "GOOD0001", rfcSeed, rfcPSK, nil, 1)
	var bad []xKey
	for i, plain := range [][]byte{
		append(bytes.Repeat([]byte{'a'}, 15), 0),                               // pad byte 0
		append(bytes.Repeat([]byte{'a'}, 15), 17),                              // pad byte > block
		append(bytes.Repeat([]byte{'a'}, 14), 3, 3),                            // pad bytes disagree
		append(bytes.Repeat([]byte{'a'}, 16), bytes.Repeat([]byte{16}, 15)...), // short ciphertext
	} {
		serial := "BAD000" + string(rune('1'+i))
		var ct []byte
		if len(plain)%16 == 0 {
			ct = encryptRaw(t, rfcPSK, iv(byte(10+i)), plain)
		} else {
			ct = append(encryptRaw(t, rfcPSK, iv(byte(10+i)), plain[:16]), plain[16:]...)
		}
		bad = append(bad, xKey{Serial: serial, Cipher: ct})
	}
	// Only the IV, and not base64: structural failures.
	bad = append(bad,
		xKey{Serial: "IVONLY", Cipher: iv(3)},
		xKey{Serial: "NOTB64", RawSecret: `<EncryptedValue><xenc:EncryptionMethod Algorithm="` + aes128 + `"/><xenc:CipherData><xenc:CipherValue>***</xenc:CipherValue></xenc:CipherData></EncryptedValue>`},
		xKey{Serial: "KW", Cipher: good.Cipher, EncAlg: "http://www.w3.org/2001/04/xmlenc#kw-aes128"},
		xKey{Serial: "AES256", Cipher: good.Cipher, EncAlg: "http://www.w3.org/2001/04/xmlenc#aes256-cbc"},
	)
	doc := xDoc{EncryptionKey: pskKeyName, Keys: append([]xKey{good}, bad...)}
	recs, fails, err := parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{PresharedKey: rfcPSK})
	if err != nil || len(recs) != 1 || !bytes.Equal(recs[0].Key, rfcSeed) {
		t.Fatalf("got %v, %+v, %v; want GOOD0001", recs, fails, err)
	}
	if len(fails) != len(bad) {
		t.Fatalf("failures = %+v, want %d", fails, len(bad))
	}
	for i, want := range []string{"cannot be decrypted", "cannot be decrypted", "cannot be decrypted", "invalid length", "invalid length", "not base64", "unsupported encryption algorithm", "needs a 32-byte key"} {
		if f := failureFor(t, fails, bad[i].Serial); !strings.Contains(f.Reason, want) {
			t.Errorf("%s: reason %q, want %q", bad[i].Serial, f.Reason, want)
		}
	}
	// Alone, a key that does not decrypt makes the file fail: it looks just
	// like a wrong preshared key.
	_, _, err = parsePSKC(t, xDoc{EncryptionKey: pskKeyName, Keys: bad[:1]}.bytes(), tokenfile.PSKCOptions{PresharedKey: rfcPSK})
	wantWrapped(t, err, tokenfile.ErrMalformed)
}

// TestPSKCRFC6030Figure7 decrypts the password-protected example of RFC 6030
// §6.2 (password "qwerty").
func TestPSKCRFC6030Figure7(t *testing.T) {
	dec := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	doc := xDoc{
		EncryptionKey: pbkdf2Key(dec("Ej7/PEpyEpw="), 1000, 16, ""),
		MACAlg:        uriSHA1,
		MACKey:        dec("2GTTnLwM3I4e5IO5FkufoOEiOhNj91fhKRQBtBJYluUDsPOLTfUvoU2dStyOwYZx"),
		Keys: []xKey{{
			Serial: "987654321", ID: "123456", Length: "8", Counter: "0",
			Cipher: dec("oTvo+S22nsmS2Z/RtcoF8Hfh+jzMe0RkiafpoDpnoZTjPYZu6V+A4aEn032yCr4f"),
			MAC:    dec("LP6xMvjtypbfT9PdkJhBZ+D6O4w="),
		}},
	}
	recs, fails, err := parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{Password: "qwerty"})
	if err != nil || len(fails) != 0 || len(recs) != 1 {
		t.Fatalf("got %v, %+v, %v", recs, fails, err)
	}
	if r := recs[0]; !bytes.Equal(r.Key, rfcSeed) || r.OTPLen != 8 || r.Serial != "987654321" {
		t.Errorf("record = %v, key %x", r, r.Key)
	}
	_, _, err = parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{Password: "QWERTY"})
	wantWrapped(t, err, tokenfile.ErrMalformed)
}

func TestPSKCPassword(t *testing.T) {
	const password = "correct horse battery staple"
	salt := []byte("saltsalt")
	for _, tc := range []struct {
		name   string
		keyLen int
		prf    string
	}{
		{"sha1 default", 16, ""},
		{"sha256 prf", 16, "http://www.w3.org/2001/04/xmldsig-more#hmac-sha256"},
		{"aes256", 32, "http://www.w3.org/2000/09/xmldsig#hmac-sha1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := derivePBKDF2(t, tc.prf, password, salt, 2000, tc.keyLen)
			k := encryptedKey(t, "PW0001", rfcSeed, key, macKey, 4)
			if tc.keyLen == 32 {
				k.EncAlg = "http://www.w3.org/2001/04/xmlenc#aes256-cbc"
			}
			doc := xDoc{
				EncryptionKey: pbkdf2Key(salt, 2000, tc.keyLen, tc.prf),
				MACAlg:        uriSHA1,
				MACKey:        encryptCBC(t, key[:16], iv(7), macKey),
				Keys:          []xKey{k},
			}
			if tc.keyLen == 32 {
				doc.MACKey = nil // drafts: the encryption key MACs
				doc.Keys[0].MAC = hmacSHA1(key, k.Cipher)
			}
			recs, fails, err := parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{Password: password, PresharedKey: rfcPSK})
			if err != nil || len(fails) != 0 || len(recs) != 1 || !bytes.Equal(recs[0].Key, rfcSeed) {
				t.Fatalf("got %v, %+v, %v", recs, fails, err)
			}
			noSecrets(t, recs, fails, err, key, macKey)
		})
	}
	t.Run("iteration cap", func(t *testing.T) {
		doc := xDoc{EncryptionKey: pbkdf2Key(salt, 1_000_001, 16, ""), Keys: []xKey{encryptedKey(t, "PW0001", rfcSeed, rfcPSK, nil, 4)}}
		recs, fails, err := parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{Password: password})
		if err != nil || len(recs) != 0 || len(fails) != 1 || !strings.Contains(fails[0].Reason, "iteration count") {
			t.Fatalf("got %v, %+v, %v", recs, fails, err)
		}
	})
	t.Run("unsupported PRF", func(t *testing.T) {
		doc := xDoc{EncryptionKey: pbkdf2Key(salt, 10, 16, "urn:example:md5"), Keys: []xKey{encryptedKey(t, "PW0001", rfcSeed, rfcPSK, nil, 4)}}
		_, fails, err := parsePSKC(t, doc.bytes(), tokenfile.PSKCOptions{Password: password})
		if err != nil || len(fails) != 1 || !strings.Contains(fails[0].Reason, "unsupported PBKDF2 PRF") {
			t.Fatalf("got %+v, %v", fails, err)
		}
	})
}

func TestPSKCHostileXML(t *testing.T) {
	seedB64 := base64.StdEncoding.EncodeToString(rfcSeed)
	truncated := figure2[:len(figure2)/2]
	cases := []struct{ name, doc string }{
		{"billion laughs", `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<KeyContainer xmlns="urn:ietf:params:xml:ns:keyprov:pskc"><KeyPackage><Key Algorithm="hotp"><Issuer>&lol9;</Issuer></Key></KeyPackage></KeyContainer>`},
		{"external entity", `<?xml version="1.0"?>
<!DOCTYPE KeyContainer [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<KeyContainer xmlns="urn:ietf:params:xml:ns:keyprov:pskc"><KeyPackage><DeviceInfo><SerialNo>&xxe;</SerialNo></DeviceInfo></KeyPackage></KeyContainer>`},
		{"lower-case doctype", "<!doctype KeyContainer>" + figure2[strings.Index(figure2, "<KeyContainer"):]},
		{"element declaration", "<!ELEMENT KeyContainer ANY>" + figure2[strings.Index(figure2, "<KeyContainer"):]},
		{"declaration inside the root", strings.Replace(figure2, "<KeyPackage>", "<!ATTLIST KeyPackage x CDATA #IMPLIED><KeyPackage>", 1)},
		{"entity reference without DTD", strings.Replace(figure2, "987654321", "&xxe;", 1)},
		{"empty", ""},
		{"white space", " \n\t"},
		{"garbage", "serial,key\nabc,3132\n"},
		{"binary", "\x00\x01\x02\xff\xfe"},
		{"truncated", truncated},
		{"truncated secret", figure2[:strings.Index(figure2, seedB64)+10]},
		{"unclosed root", `<KeyContainer xmlns="urn:ietf:params:xml:ns:keyprov:pskc"><KeyPackage></KeyPackage>`},
		{"mismatched tags", strings.Replace(figure2, "</Secret>", "</Secrets>", 1)},
		{"wrong root", `<KeyContainers><KeyPackage/></KeyContainers>`},
		{"no KeyPackage", `<KeyContainer xmlns="urn:ietf:params:xml:ns:keyprov:pskc"/>`},
		{"text before root", "hello" + figure2[strings.Index(figure2, "<KeyContainer"):]},
		{"second root", figure2 + "<KeyContainer/>"},
		{"text after root", figure2 + "trailing"},
		{"two EncryptionKeys", strings.Replace(figure2, "<KeyPackage>", "<EncryptionKey/><EncryptionKey/><KeyPackage>", 1)},
		{"latin-1", strings.Replace(figure2, "UTF-8", "ISO-8859-1", 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := parsePSKC(t, []byte(tc.doc), tokenfile.PSKCOptions{})
			wantWrapped(t, err, tokenfile.ErrMalformed)
			if strings.Contains(err.Error(), "passwd") || strings.Contains(err.Error(), "root:") {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func TestPSKCLimits(t *testing.T) {
	doc := xDoc{}
	for i := range 20 {
		doc.Keys = append(doc.Keys, xKey{Serial: "S" + strings.Repeat("0", i), Plain: rfcSeed})
	}
	data := doc.bytes()
	recs, _, err := tokenfile.ParsePSKC(bytes.NewReader(data), tokenfile.PSKCOptions{}, tokenfile.Limits{MaxRecords: 20, MaxBytes: int64(len(data))})
	if err != nil || len(recs) != 20 {
		t.Fatalf("at the limits: %d records, %v", len(recs), err)
	}
	for _, lim := range []tokenfile.Limits{{MaxRecords: 19}, {MaxBytes: int64(len(data)) - 1}} {
		recs, fails, err := tokenfile.ParsePSKC(bytes.NewReader(data), tokenfile.PSKCOptions{}, lim)
		wantWrapped(t, err, tokenfile.ErrTooLarge)
		if recs != nil || fails != nil {
			t.Errorf("%+v: partial result with the error", lim)
		}
	}
	// The default byte cap holds against an endless reader.
	_, _, err = tokenfile.ParsePSKC(endless{}, tokenfile.PSKCOptions{}, tokenfile.Limits{})
	wantWrapped(t, err, tokenfile.ErrTooLarge)
}

// endless yields spaces forever.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

func TestRedactingString(t *testing.T) {
	r := tokenfile.Record{Serial: "S1", Type: "hotp", Key: rfcSeed}
	o := tokenfile.PSKCOptions{PresharedKey: rfcPSK, Password: "qwerty"}
	for _, s := range []string{r.String(), r.GoString(), o.String(), o.GoString()} {
		if strings.Contains(s, "qwerty") || strings.Contains(s, "1234") || strings.Contains(s, "\x12\x34") {
			t.Errorf("%q shows a secret", s)
		}
	}
	if !strings.Contains(r.String(), "20 bytes redacted") {
		t.Errorf("String() = %q", r.String())
	}
}

func TestPSKCOddPackages(t *testing.T) {
	const secret = `<Secret><PlainValue>MTIzNDU2Nzg5MDEyMzQ1Njc4OTA=</PlainValue></Secret>`
	doc := `<KeyContainer xmlns="urn:ietf:params:xml:ns:keyprov:pskc" xmlns:xenc="http://www.w3.org/2001/04/xmlenc#">
<KeyPackage><DeviceInfo><SerialNo>NOKEY</SerialNo></DeviceInfo></KeyPackage>
<KeyPackage><DeviceInfo><SerialNo>ENCCOUNTER</SerialNo></DeviceInfo><Key Algorithm="hotp"><Data>` + secret + `
  <Counter><EncryptedValue><xenc:CipherData><xenc:CipherValue>AAAA</xenc:CipherValue></xenc:CipherData></EncryptedValue></Counter></Data></Key></KeyPackage>
<KeyPackage><DeviceInfo><SerialNo>HEXRESPONSE</SerialNo></DeviceInfo><Key Algorithm="hotp">
  <AlgorithmParameters><ResponseFormat Length="8" Encoding="HEXADECIMAL"/></AlgorithmParameters><Data>` + secret + `</Data></Key></KeyPackage>
<KeyPackage><Key Id="TWO1" Algorithm="totp"><Data>` + secret + `</Data></Key><Key Id="TWO2" Algorithm="totp"><Data>` + secret + `</Data></Key></KeyPackage>
<Signature>ignored</Signature>
</KeyContainer>
<!-- trailing comment -->
`
	recs, fails, err := parsePSKC(t, []byte(doc), tokenfile.PSKCOptions{})
	if err != nil || len(recs) != 2 {
		t.Fatalf("got %v, %+v, %v; want TWO1 and TWO2", recs, fails, err)
	}
	recordFor(t, recs, "TWO1")
	recordFor(t, recs, "TWO2")
	for serial, want := range map[string]string{
		"NOKEY":       "no Key",
		"ENCCOUNTER":  "encrypted Counter is not supported",
		"HEXRESPONSE": "Encoding",
	} {
		if f := failureFor(t, fails, serial); !strings.Contains(f.Reason, want) {
			t.Errorf("%s: reason %q, want %q", serial, f.Reason, want)
		}
	}
}
