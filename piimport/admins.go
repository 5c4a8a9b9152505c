package piimport

import (
	"context"

	"github.com/authsrv/authsrv"
)

// noPepper is why administrators are left out without PI_PEPPER.
const noPepper = "no PI_PEPPER given: set a password with authsrv admin add"

// importAdmins brings over privacyIDEA's local administrators with their
// password hashes, so that they keep their passwords. privacyIDEA hashes
// PI_PEPPER followed by the password: the hash is adopted with the pepper,
// which the account keeps only until its first login re-hashes the
// password without it. Without a pepper the hashes cannot be verified and
// the administrators are left out.
func importAdmins(ctx context.Context, s *authsrv.Server, snap *Snapshot, pepper []byte, sum *Summary) error {
	for _, a := range snap.Admins {
		if len(pepper) == 0 {
			sum.Skip("admin", a.Username, noPepper)
			continue
		}
		err := s.Ops().AdoptAdmin(ctx, local, a.Username, a.PasswordHash, pepper)
		detail := "password kept (re-hashed at the first login)"
		if a.Email != "" {
			detail += "; e-mail address not kept (authsrv administrators have none)"
		}
		if err := outcome(sum, "admin", a.Username, detail, err); err != nil {
			return err
		}
	}
	return nil
}
