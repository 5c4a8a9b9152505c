package secret_test

import (
	"testing"

	"github.com/authsrv/authsrv/internal/secret"
)

func BenchmarkHashDefault(b *testing.B) {
	h := newHasher(b, secret.HasherConfig{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Hash(b.Context(), "1234"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyPrivacyIDEA64MiB(b *testing.B) {
	f := loadFixtures(b)["privacyidea-64MiB-t9-p4-tag32"]
	h := newHasher(b, secret.HasherConfig{})
	b.ReportAllocs()
	for b.Loop() {
		ok, _, err := h.Verify(b.Context(), f.Hash, f.Password)
		if err != nil || !ok {
			b.Fatalf("ok=%v err=%v", ok, err)
		}
	}
}
