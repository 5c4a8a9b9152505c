package authsrv_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/authsrv/authsrv"
)

// oathCSV is an oathcsv file of n HOTP tokens named prefix000000...
func oathCSV(prefix string, n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s%06d,%s,hotp,6\n", prefix, i, rfcKeyHex)
	}
	return []byte(b.String())
}

// BenchmarkImportTokens imports files of 1000 tokens into a store on disk
// (fsync on), as the binary does; tokens/s is the figure to compare.
func BenchmarkImportTokens(b *testing.B) {
	s, err := authsrv.New(authsrv.WithDataDir(b.TempDir()), cheapKDF)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	const n = 1000
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		file := oathCSV(fmt.Sprintf("B%04d", i), n)
		i++
		res, err := s.Ops().ImportTokens(b.Context(), admin, authsrv.TokenImport{Format: "oathcsv", Name: "b.csv", File: file})
		if err != nil || res.Imported != n {
			b.Fatalf("imported %d, %v", res.Imported, err)
		}
	}
	b.ReportMetric(float64(n*i)/b.Elapsed().Seconds(), "tokens/s")
}
