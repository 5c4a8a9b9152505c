package token

// The capabilities of the OATH types (the types live in hotp.go and
// totp.go; the other types declare theirs beside them), and the guards of
// every built-in type's declared capabilities.

// EnrollVia implements AuthEnroller: enroll_via_multichallenge can enroll
// an HOTP token, shown as a QR code.
func (HOTP) EnrollVia() EnrollVia { return EnrollVia{QR: true} }

// EnrollVia implements AuthEnroller: enroll_via_multichallenge can enroll
// a TOTP token, shown as a QR code.
func (TOTP) EnrollVia() EnrollVia { return EnrollVia{QR: true} }

var (
	_ AuthEnroller    = HOTP{}
	_ AuthEnroller    = TOTP{}
	_ AuthEnroller    = DayPassword{}
	_ AuthEnroller    = Email{}
	_ AuthEnroller    = SMS{}
	_ PINChallenger   = Email{}
	_ PINChallenger   = SMS{}
	_ PINChallenger   = IndexedSecret{}
	_ PINChallenger   = Questionnaire{}
	_ NeverChallenger = SPass{}
	_ NeverChallenger = SSHKeyToken{}
	_ NeverChallenger = RADIUS{}
	_ NeverChallenger = ApplSpec{}
	_ RemoteChecker   = RADIUS{}
)
