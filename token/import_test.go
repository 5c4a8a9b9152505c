package token_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/authsrv/authsrv/otp"
	"github.com/authsrv/authsrv/token"
)

// A Go program imports tokens with the public record type: the counter,
// the OTP length and the realms are taken, an existing serial is refused,
// and the imported seed computes the OTPs the file's token shows.
func TestImportRecords(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	key := []byte("12345678901234567890")
	recs := []token.ImportRecord{
		{Serial: "IMP1", Type: "hotp", Key: key, OTPLen: 8, Counter: 5, Description: "from a file"},
		{Serial: "IMP1", Key: key},
	}
	n, failed := e.svc.Import(ctx, recs, []string{"r1"})
	if n != 1 || len(failed) != 1 || failed[0].Serial != "IMP1" {
		t.Fatalf("Import = %d, %+v", n, failed)
	}
	tok, err := e.svc.Get(ctx, "IMP1")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Count != 5 || tok.OTPLen != 8 || tok.Description != "from a file" || len(tok.Realms) != 1 || tok.Realms[0] != "r1" {
		t.Errorf("imported token %+v", tok)
	}
	seed, err := e.svc.Secret(tok, "otpkey")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := otp.HOTP(seed, 5, 8, otp.SHA1), otp.HOTP(key, 5, 8, otp.SHA1); got != want {
		t.Errorf("the imported seed gives %s at counter 5, want %s", got, want)
	}
}

// An ImportRecord printed with any verb shows no seed.
func TestImportRecordRedactsKey(t *testing.T) {
	r := token.ImportRecord{Serial: "S1", Key: []byte("topsecretseedvalue!!")}
	for _, verb := range []string{"%v", "%+v", "%s", "%#v"} {
		out := fmt.Sprintf(verb, r)
		if strings.Contains(out, "topsecret") || strings.Contains(out, fmt.Sprintf("%x", r.Key)) || !strings.Contains(out, "S1") {
			t.Errorf("%s: %s", verb, out)
		}
	}
}
