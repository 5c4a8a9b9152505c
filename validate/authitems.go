package validate

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/authsrv/authsrv/caller"
)

// AuthItemsFunc gives the authentication items of the token serial after
// a successful check whose password was pass (the offline application
// splits its PIN from it): privacyIDEA's offline_info. It returns nil
// when the token has none. The validator does not import the machine
// package; the root wires this hook to it.
type AuthItemsFunc func(ctx context.Context, who caller.Caller, serial, pass string) (map[string]any, error)

// authItems asks Config.AuthItems for the items of the success res: one
// token named (detail.serial), not an OTP-only check (the management
// UI's test, which must not hand out values). An error leaves the items
// out (the authentication stands, as in privacyIDEA) and is logged
// without the password.
func (v *Validator) authItems(ctx context.Context, r Request, res Response) map[string]any {
	if v.cfg.AuthItems == nil || !res.Value || res.Serial == "" || r.OTPOnly {
		return nil
	}
	items, err := v.cfg.AuthItems(ctx, r.Caller, res.Serial, r.Pass)
	if err != nil {
		zerolog.Ctx(ctx).Info().Err(err).Str("component", "validate").Str("request_id", r.Caller.RequestID).
			Str("serial", res.Serial).Msg("no authentication items")
		return nil
	}
	return items
}
