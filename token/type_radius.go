package token

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/notify"
)

// RADIUS forwards the check to a RADIUS server definition of notify
// (prefix PIRA). It keeps no seed and no counter: replay protection is the
// remote server's.
//
// Tokeninfo: "radius.identifier" (the notify RADIUS server id),
// "radius.user" (the user name to send; the owner's login when empty) and
// "radius.local_checkpin" ("True": the PIN is checked here and only the
// OTP part is forwarded; else the whole password is forwarded, see
// LocalPIN).
//
// A RADIUS Access-Challenge is not relayed: it is a failed check with the
// message "RADIUS challenge" (challenge-response through a RADIUS token is
// not supported yet). privacyIDEA's legacy per-token radius.server and
// radius.secret parameters are not supported either; define the server
// with notify.SetRadius.
type RADIUS struct{}

var _ Type = RADIUS{}

// Tokeninfo keys of the radius token.
const (
	InfoRadiusIdentifier    = "radius.identifier"
	InfoRadiusUser          = "radius.user"
	InfoRadiusLocalCheckPIN = "radius.local_checkpin"
	// MsgRadiusChallenge is the failure message when the RADIUS server
	// answers with an Access-Challenge.
	MsgRadiusChallenge = "RADIUS challenge"
	maxRadiusUserLen   = 253
)

// Name implements Type.
func (RADIUS) Name() string { return "radius" }

// Prefix implements Type.
func (RADIUS) Prefix() string { return "PIRA" }

// LocalPIN reports whether the PIN of t is checked locally. When it is
// false, the validate layer must skip the local PIN check and pass the
// whole password (PIN and OTP) as Check.OTP, for the RADIUS server to
// check; when true, it checks the PIN as for any token and passes only the
// OTP part.
func (RADIUS) LocalPIN(t *Token) bool { return IsTrue(t.Info[InfoRadiusLocalCheckPIN]) }

// Enroll implements Type: radius.identifier (required; it must name a
// defined RADIUS server when the service has a notification service),
// radius.user and radius.local_checkpin.
func (RADIUS) Enroll(ctx context.Context, e *Enroll) error {
	t, p := e.Token, e.Params
	id, given := p.Get(InfoRadiusIdentifier)
	// notify stores identifiers with spaces as "_".
	id = strings.ReplaceAll(strings.TrimSpace(id), " ", "_")
	switch {
	case given && id != "":
		if remoteHasControl(id) || len(id) > 128 {
			return paramErr("The %s contains invalid characters or is too long.", InfoRadiusIdentifier)
		}
		if n := e.Service.Notify(); n != nil {
			defs, err := n.RadiusServers(ctx)
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(defs, func(d notify.RadiusServer) bool { return d.Identifier == id }) {
				return paramErr("The RADIUS server %s does not exist.", id)
			}
		}
		t.SetInfo(InfoRadiusIdentifier, id)
	case e.New || t.Info[InfoRadiusIdentifier] == "":
		return apierr.MissingParameter(InfoRadiusIdentifier)
	}
	if v, ok := p.Get(InfoRadiusUser); ok {
		if remoteHasControl(v) || len(v) > maxRadiusUserLen {
			return paramErr("The %s contains invalid characters or is too long.", InfoRadiusUser)
		}
		if v == "" {
			delete(t.Info, InfoRadiusUser)
		} else {
			t.SetInfo(InfoRadiusUser, v)
		}
	}
	if p.Has(InfoRadiusLocalCheckPIN) {
		v := "False"
		if p.Bool(InfoRadiusLocalCheckPIN) {
			v = "True"
		}
		t.SetInfo(InfoRadiusLocalCheckPIN, v)
	}
	return nil
}

// Check implements Type: one Access-Request with the configured user and
// c.OTP. Access-Accept is a match (Counter -1, nothing to advance);
// Access-Reject and Access-Challenge are not. No valid answer (network,
// timeout, wrong secret, unknown server) is Match{OK: false} and the error,
// for the caller to log.
func (RADIUS) Check(ctx context.Context, c *Check) (Match, error) {
	t := c.Token
	id := t.Info[InfoRadiusIdentifier]
	if id == "" {
		return Match{Counter: -1}, fmt.Errorf("token %s: no %s", t.Serial, InfoRadiusIdentifier)
	}
	user := t.Info[InfoRadiusUser]
	if user == "" && t.Owner != nil {
		user = t.Owner.Login
	}
	if user == "" {
		return Match{Counter: -1}, fmt.Errorf("token %s: no user name to send to the RADIUS server (set %s or assign the token)", t.Serial, InfoRadiusUser)
	}
	n := c.Service.Notify()
	if n == nil {
		return Match{Counter: -1}, errors.New("token: no notification service for the RADIUS token")
	}
	resp, err := n.RadiusAuth(ctx, id, user, c.OTP, nil)
	if err != nil {
		return Match{Counter: -1}, fmt.Errorf("token %s: %w", t.Serial, err)
	}
	switch resp.Code {
	case notify.RadiusAccept:
		return Match{OK: true, Counter: -1}, nil
	case notify.RadiusChallenge:
		return Match{Counter: -1, Message: MsgRadiusChallenge}, nil
	}
	return Match{Counter: -1}, nil
}

// NeverChallenges implements NeverChallenger: the type has no challenge.
func (RADIUS) NeverChallenges() bool { return true }

// ChecksRemotely implements RemoteChecker: the check asks another server.
func (RADIUS) ChecksRemotely() bool { return true }
