package tokenfile_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/authsrv/authsrv/internal/tokenfile"
)

// BenchmarkParsePSKC reads a document of 1,000 keys as vendors ship them
// (AES-128-CBC seeds under a preshared key, HMAC-SHA1 MACs under an
// encrypted MACKey); keys/s is the figure.
func BenchmarkParsePSKC(b *testing.B) {
	const n = 1000
	macKey := bytes.Repeat([]byte{0x17}, 20)
	d := xDoc{EncryptionKey: pskKeyName, MACAlg: uriSHA1, MACKey: encryptCBC(b, rfcPSK, iv(1), macKey)}
	for i := range n {
		d.Keys = append(d.Keys, encryptedKey(b, fmt.Sprintf("PSKC%06d", i), rfcSeed, rfcPSK, macKey, byte(i)))
	}
	doc := d.bytes()
	opt := tokenfile.PSKCOptions{PresharedKey: rfcPSK}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		recs, fails, err := tokenfile.ParsePSKC(bytes.NewReader(doc), opt, tokenfile.Limits{MaxRecords: n})
		if err != nil || len(recs) != n || len(fails) != 0 {
			b.Fatalf("%d records, %v, %v", len(recs), fails, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "keys/s")
}
