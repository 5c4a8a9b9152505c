package tokenfile_test

import (
	"fmt"
	"strings"

	"github.com/authsrv/authsrv/internal/tokenfile"
)

func ExampleParseOATHCSV() {
	file := `# serial, key, type, otplen, timestep, user, realm
HOTP0001, 3132333435363738393031323334353637383930
TOTP0002, 3132333435363738393031323334353637383930, totp, 8, 60, alice, staff
TOTP0003, not-hex, totp
`
	recs, fails, err := tokenfile.ParseOATHCSV(strings.NewReader(file), tokenfile.Limits{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range recs {
		fmt.Printf("%s %s otplen=%d step=%d key=%d bytes owner=%q@%q\n", r.Serial, r.Type, r.OTPLen, r.TimeStep, len(r.Key), r.User, r.Realm)
	}
	for _, f := range fails {
		fmt.Printf("line %d, %s: %s\n", f.Line, f.Serial, f.Reason)
	}
	// Output:
	// HOTP0001 hotp otplen=6 step=0 key=20 bytes owner=""@""
	// TOTP0002 totp otplen=8 step=60 key=20 bytes owner="alice"@"staff"
	// line 4, TOTP0003: key is not hex
}
