package server

import (
	"time"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/policy"
	"github.com/authsrv/authsrv/token"
)

// savePINChange writes tokeninfo next_pin_change after /token/init or
// /token/setpin, as privacyIDEA's save_pin_change does: when an admin
// enrolls a token or sets its PIN under ENROLL change_pin_on_first_use,
// the change is due at once; when a user sets a PIN (pinGiven) under
// ENROLL change_pin_every, it is due after that time. The policies match
// the token's owner or realm. /validate/check reports the date and, with
// AUTH change_pin_via_validate, asks for the new PIN.
func (c *call) savePINChange(t *token.Token, pinGiven bool) error {
	now := c.a.s.Now()
	var due time.Time
	switch c.who.Role {
	case roleAdmin:
		on, err := c.policyFlag(policy.ScopeEnrollment, "change_pin_on_first_use", t.Owner)
		if err != nil || !on {
			return err
		}
		due = now
	case roleUser:
		if !pinGiven {
			return nil
		}
		v, err := c.policyString(policy.ScopeEnrollment, "change_pin_every", t.Owner, nil)
		if err != nil || v == "" {
			return err
		}
		d, ok := token.ParsePINChangeEvery(v)
		if !ok {
			return apierr.New(apierr.Policy, "The value "+v+" of the policy action change_pin_every is not valid.")
		}
		due = now.Add(d)
	default:
		return nil
	}
	return c.a.s.Tokens().SetInfo(c.ctx, t.Serial, token.InfoNextPinChange, token.FormatValidity(due))
}
