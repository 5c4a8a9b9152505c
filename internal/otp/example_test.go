package otp_test

import (
	"fmt"

	"github.com/authsrv/authsrv/internal/otp"
)

func ExampleGenerate() {
	s, err := otp.Generate(16, "8", nil) // a lost-token password
	fmt.Println(len(s), err)
	// Output:
	// 16 <nil>
}
