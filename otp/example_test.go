package otp_test

import (
	"fmt"
	"time"

	"github.com/authsrv/authsrv/otp"
)

func ExampleCheckHOTP() {
	key, _ := otp.ParseKey("3132333435363738393031323334353637383930", otp.KeyFormatHex)
	next := uint64(0) // the token's stored count: the next expected counter
	counter, ok := otp.CheckHOTP(key, "287082", next, 10, 6, otp.SHA1)
	fmt.Println(counter, ok)
	next = counter + 1
	_, ok = otp.CheckHOTP(key, "287082", next, 10, 6, otp.SHA1) // replay
	fmt.Println(ok)
	// Output:
	// 1 true
	// false
}

func ExampleCheckTOTP() {
	key := []byte("12345678901234567890")
	now := time.Unix(59, 0)
	step, drift, ok := otp.CheckTOTP(key, "94287082", now, 30, 180, 0, 0, false, 8, otp.SHA1)
	fmt.Println(step, drift, ok) // store step as the last used one, drift as timeShift
	_, _, ok = otp.CheckTOTP(key, "94287082", now, 30, 180, drift, step, true, 8, otp.SHA1)
	fmt.Println(ok)
	// Output:
	// 1 -29 true
	// false
}

func ExampleOtpauthURL() {
	fmt.Println(otp.OtpauthURL(otp.URLParams{
		Type:   "totp",
		Label:  "alice@realm1",
		Issuer: "ACME Corp",
		Serial: "TOTP0002C3D4",
		Key:    []byte("12345678901234567890"),
		Digits: 8,
		Hash:   otp.SHA256,
		Period: 60,
	}))
	// Output:
	// otpauth://totp/alice%40realm1?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&algorithm=SHA256&period=60&digits=8&creator=privacyidea&issuer=ACME%20Corp&serial=TOTP0002C3D4
}
