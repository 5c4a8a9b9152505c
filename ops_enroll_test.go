package authsrv_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/store"
	"github.com/authsrv/authsrv/store/storetest"
	"github.com/authsrv/authsrv/token"
)

// pskcPSK is the preshared AES key of the PSKC files of these tests.
var pskcPSK = bytes.Repeat([]byte{0x42}, 16)

// pskcFile is a PSKC document of the keys prefix%06d for from ≤ i < to,
// as token vendors ship them: each seed AES-128-CBC encrypted and
// HMAC-SHA1 MACed under an encrypted MACKey. With iterations > 0 the
// encryption key is derived from password by PBKDF2-SHA1 (and is
// returned); else it is pskcPSK.
func pskcFile(tb testing.TB, prefix string, from, to int, password string, iterations int) []byte {
	tb.Helper()
	b64 := base64.StdEncoding.EncodeToString
	key := pskcPSK
	salt := []byte("authsrv-pskc-salt")
	if iterations > 0 {
		var err error
		if key, err = pbkdf2.Key(sha1.New, password, salt, iterations, 16); err != nil {
			tb.Fatal(err)
		}
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		tb.Fatal(err)
	}
	var ivn uint64
	encrypt := func(plain []byte) []byte {
		pad := aes.BlockSize - len(plain)%aes.BlockSize
		buf := make([]byte, aes.BlockSize+len(plain)+pad)
		ivn++
		strconv.AppendUint(buf[:0], ivn, 10) // a distinct IV per value
		copy(buf[aes.BlockSize:], plain)
		for i := aes.BlockSize + len(plain); i < len(buf); i++ {
			buf[i] = byte(pad)
		}
		cipher.NewCBCEncrypter(block, buf[:aes.BlockSize]).CryptBlocks(buf[aes.BlockSize:], buf[aes.BlockSize:])
		return buf
	}
	macKey := bytes.Repeat([]byte{0x17}, 20)
	var sb strings.Builder
	sb.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<KeyContainer Version="1.0" xmlns="urn:ietf:params:xml:ns:keyprov:pskc" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" xmlns:xenc="http://www.w3.org/2001/04/xmlenc#" xmlns:xenc11="http://www.w3.org/2009/xmlenc11#" xmlns:pkcs5="http://www.rsasecurity.com/rsalabs/pkcs/schemas/pkcs-5v2-0#">
`)
	if iterations > 0 {
		fmt.Fprintf(&sb, `  <EncryptionKey><xenc11:DerivedKey><xenc11:KeyDerivationMethod Algorithm="http://www.rsasecurity.com/rsalabs/pkcs/schemas/pkcs-5v2-0#pbkdf2"><pkcs5:PBKDF2-params><Salt><Specified>%s</Specified></Salt><IterationCount>%d</IterationCount><KeyLength>16</KeyLength><PRF/></pkcs5:PBKDF2-params></xenc11:KeyDerivationMethod><xenc11:MasterKeyName>transport</xenc11:MasterKeyName></xenc11:DerivedKey></EncryptionKey>
`, b64(salt), iterations)
	} else {
		sb.WriteString("  <EncryptionKey><ds:KeyName>Pre-shared-key</ds:KeyName></EncryptionKey>\n")
	}
	fmt.Fprintf(&sb, `  <MACMethod Algorithm="http://www.w3.org/2000/09/xmldsig#hmac-sha1"><MACKey><xenc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/><xenc:CipherData><xenc:CipherValue>%s</xenc:CipherValue></xenc:CipherData></MACKey></MACMethod>
`, b64(encrypt(macKey)))
	seed := []byte("12345678901234567890")
	for i := from; i < to; i++ {
		ct := encrypt(seed)
		m := hmac.New(sha1.New, macKey)
		m.Write(ct)
		serial := fmt.Sprintf("%s%06d", prefix, i)
		fmt.Fprintf(&sb, `  <KeyPackage>
    <DeviceInfo><Manufacturer>Manufacturer</Manufacturer><SerialNo>%s</SerialNo></DeviceInfo>
    <Key Id="%s" Algorithm="urn:ietf:params:xml:ns:keyprov:pskc:hotp">
      <Issuer>Issuer</Issuer>
      <AlgorithmParameters><ResponseFormat Length="6" Encoding="DECIMAL"/></AlgorithmParameters>
      <Data>
        <Secret><EncryptedValue><xenc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/><xenc:CipherData><xenc:CipherValue>%s</xenc:CipherValue></xenc:CipherData></EncryptedValue><ValueMAC>%s</ValueMAC></Secret>
        <Counter><PlainValue>0</PlainValue></Counter>
      </Data>
    </Key>
  </KeyPackage>
`, serial, serial, b64(ct), b64(m.Sum(nil)))
	}
	sb.WriteString("</KeyContainer>\n")
	return []byte(sb.String())
}

// importFormat is one kind of import file for the benchmarks: perFile
// tokens a file, within the 1 MiB an HTTP request body may have.
type importFormat struct {
	name    string
	perFile int
	req     func(tb testing.TB, prefix string, n int) authsrv.TokenImport
}

var importFormats = []importFormat{
	{"oathcsv", 10000, func(_ testing.TB, prefix string, n int) authsrv.TokenImport {
		return authsrv.TokenImport{Format: "oathcsv", Name: "b.csv", File: oathCSV(prefix, 0, n)}
	}},
	{"pskc-psk", 1000, func(tb testing.TB, prefix string, n int) authsrv.TokenImport {
		return authsrv.TokenImport{Format: "pskc", Name: "b.xml", File: pskcFile(tb, prefix, 0, n, "", 0), PSK: fmt.Sprintf("%x", pskcPSK)}
	}},
	{"pskc-pbkdf2", 1000, func(tb testing.TB, prefix string, n int) authsrv.TokenImport {
		return authsrv.TokenImport{Format: "pskc", Name: "b.xml", File: pskcFile(tb, prefix, 0, n, "transport password", 1000), Password: "transport password"}
	}},
}

// BenchmarkImport100k imports 100,000 tokens into a store on disk (fsync
// on), as the binary does, in files that fit an HTTP request (10,000
// tokens of OATH CSV, 1,000 of PSKC); each iteration brings 100,000 more.
// The files are made before the timer runs; tokens/s is the figure.
// -benchtime 1x is one import of 100k tokens.
func BenchmarkImport100k(b *testing.B) {
	const total = 100000
	for _, f := range importFormats {
		b.Run(f.name, func(b *testing.B) {
			s, err := authsrv.New(authsrv.WithDataDir(b.TempDir()), cheapKDF)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			b.ReportAllocs()
			iter := 0
			for b.Loop() {
				b.StopTimer()
				var reqs []authsrv.TokenImport
				for i := range total / f.perFile {
					reqs = append(reqs, f.req(b, fmt.Sprintf("I%dF%03dN", iter, i), f.perFile))
				}
				iter++
				b.StartTimer()
				for _, req := range reqs {
					res, err := s.Ops().ImportTokens(b.Context(), admin, req)
					if err != nil || res.Imported != f.perFile {
						b.Fatalf("imported %d of %d, %v %+v", res.Imported, f.perFile, err, res.NotImported[:min(3, len(res.NotImported))])
					}
				}
			}
			b.ReportMetric(float64(total*iter)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkInitToken enrolls HOTP tokens with genkey through Ops, as
// POST /token/init does: the answer carries the three QR images. 16
// callers, group-committed; tokens/s is the figure.
func BenchmarkInitToken(b *testing.B) {
	s, err := authsrv.New(authsrv.WithDataDir(b.TempDir()), cheapKDF)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	b.ReportAllocs()
	b.SetParallelism(8)
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := s.Ops().InitToken(b.Context(), admin, authsrv.TokenInit{Type: "hotp", Params: token.Params{"genkey": "1"}})
			if err != nil {
				b.Fatal(err)
			}
			if g, _ := res.Detail["googleurl"].(map[string]any); g["img"] == nil {
				b.Fatal("no googleurl image")
			}
			n.Add(1)
		}
	})
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "tokens/s")
}

// TestImportInBatches: an OATH CSV and a PSKC file of 1,200 tokens are
// imported in three transactions (500, 500, 200 tokens), each with its
// audit entry; every token is there and computes the file's OTPs. (That
// an import draws no QR image is token's TestEnrollImagesOnceAfterCommit,
// through the same PrepareImport and CommitImport.)
func TestImportInBatches(t *testing.T) {
	const n = 1200
	for _, f := range importFormats[:2] {
		t.Run(f.name, func(t *testing.T) {
			s, rs := tokenServer(t)
			n0 := rs.count()
			prefix := strings.ToUpper(strings.ReplaceAll(f.name, "-", ""))
			res, err := s.Ops().ImportTokens(t.Context(), admin, f.req(t, prefix, n))
			if err != nil || res.Imported != n || len(res.NotImported) != 0 || res.Stopped != "" {
				t.Fatalf("imported %d, not imported %d, stopped %q, %v", res.Imported, len(res.NotImported), res.Stopped, err)
			}
			if k := tokenCommits(t, rs, n0); k != 3 {
				t.Errorf("%d transactions wrote tokens, want 3 (batches of 500)", k)
			}
			_, batched := importEntries(t, s, f.req(t, "", 0).Name)
			if batched != n {
				t.Errorf("the audit entries name %d tokens, want %d", batched, n)
			}
			if got := existing(t, s, prefix, 0, n); got != n {
				t.Errorf("%d tokens exist, want %d", got, n)
			}
			for _, i := range []int{0, 499, 500, n - 1} {
				serial := fmt.Sprintf("%s%06d", prefix, i)
				tok, err := s.Tokens().Get(t.Context(), serial)
				if err != nil {
					t.Fatal(err)
				}
				seed, err := s.Tokens().Secret(tok, "otpkey")
				if err != nil || string(seed) != "12345678901234567890" {
					t.Errorf("%s: the stored seed is not the file's (%v)", serial, err)
				}
			}
		})
	}
}

// armedStore runs hook once, ahead of the first Update after it is set.
type armedStore struct {
	store.Store
	hook atomic.Pointer[func()]
}

func (s *armedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if h := s.hook.Swap(nil); h != nil {
		(*h)()
	}
	return s.Store.Update(ctx, fn)
}

type zeroRand struct{}

func (zeroRand) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestInitTokenGeneratedSerialTakenMeanwhile: POST /token/init without a
// serial, when another enrollment takes the generated serial first,
// enrolls under another serial, and its audit entry names that one.
func TestInitTokenGeneratedSerialTakenMeanwhile(t *testing.T) {
	st := &armedStore{Store: storetest.Open(t)}
	key := bytes.Repeat([]byte{7}, 32)
	// Zero "random" bytes: the generated serials are known in advance.
	s, err := authsrv.New(authsrv.WithStore(st), authsrv.WithEncKey(key), authsrv.WithJWTKey(key), authsrv.WithRand(zeroRand{}), cheapKDF)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	taken, err := s.Tokens().NewSerial(ctx, "hotp")
	if err != nil {
		t.Fatal(err)
	}
	hook := func() {
		if _, _, err := s.Tokens().Init(ctx, token.InitRequest{Type: "hotp", Serial: taken, Params: token.Params{"otpkey": rfcKeyHex}}); err != nil {
			t.Errorf("the concurrent enrollment: %v", err)
		}
	}
	st.hook.Store(&hook)
	res, err := s.Ops().InitToken(ctx, admin, authsrv.TokenInit{Type: "hotp", Params: token.Params{"genkey": "1"}})
	if err != nil {
		t.Fatalf("InitToken: %v", err)
	}
	if res.Serial == taken || res.Detail["serial"] != res.Serial {
		t.Fatalf("enrolled %q (detail %v); %q was taken meanwhile", res.Serial, res.Detail["serial"], taken)
	}
	rs := rows(t, s, map[string]string{"action": "POST /token/init"})
	if len(rs) != 1 || rs[0]["serial"] != res.Serial || rs[0]["success"] != 1 {
		t.Errorf("audit %v, want one success naming %s", rs, res.Serial)
	}
}
