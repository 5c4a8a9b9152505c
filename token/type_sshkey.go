package token

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"

	"github.com/authsrv/authsrv/apierr"
)

// SSHKeyToken is the SSH public key token type "sshkey" (prefix SSHK): it
// holds a user's public key for the machine subsystem (authorized keys)
// and never authenticates with an OTP.
type SSHKeyToken struct{}

var _ Type = SSHKeyToken{}

// InfoSSHKey is the tokeninfo key of the public key line; a public key is
// not secret.
const InfoSSHKey = "ssh_key"

// maxSSHKeyLine bounds the key line (a 16384-bit RSA key is about 2.8 KB).
const maxSSHKeyLine = 16 << 10

// sshKeyTypes are the key types privacyIDEA accepts.
var sshKeyTypes = []string{
	ssh.KeyAlgoRSA, ssh.KeyAlgoED25519,
	ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
	ssh.KeyAlgoSKED25519, ssh.KeyAlgoSKECDSA256,
}

// ErrSSHKeyType is privacyIDEA's error for a key type it does not accept.
var ErrSSHKeyType = apierr.New(apierr.TokenAdmin, "The keytype you specified is not supported.")

// Name implements Type.
func (SSHKeyToken) Name() string { return "sshkey" }

// Prefix implements Type.
func (SSHKeyToken) Prefix() string { return "SSHK" }

// Enroll implements Type: sshkey is the authorized_keys line "<type>
// <base64> [comment]" without options; the type must be one of
// privacyIDEA's and the key must parse as that type. The line is stored as
// tokeninfo ssh_key, and its comment becomes the description unless one is
// given. There is no detail.
func (SSHKeyToken) Enroll(ctx context.Context, e *Enroll) error {
	line := strings.TrimSpace(e.Params.Str("sshkey"))
	if line == "" {
		return apierr.MissingParameter("sshkey")
	}
	if len(line) > maxSSHKeyLine || strings.ContainsAny(line, "\r\n") {
		return paramErr("The sshkey must be one public key line of at most %d bytes", maxSSHKeyLine)
	}
	typ, _, _ := strings.Cut(line, " ")
	if !slices.Contains(sshKeyTypes, typ) {
		return ErrSSHKeyType
	}
	pk, comment, opts, rest, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil || len(opts) > 0 || len(bytes.TrimSpace(rest)) > 0 || pk.Type() != typ {
		return paramErr("The sshkey is not a valid %s public key", typ)
	}
	t := e.Token
	t.SetInfo(InfoSSHKey, line)
	if strings.TrimSpace(e.Params.Str("description")) == "" && comment != "" {
		for len(comment) > maxDescriptionLen {
			_, size := utf8.DecodeLastRuneInString(comment)
			comment = comment[:len(comment)-size]
		}
		t.Description = comment
	}
	return nil
}

// Check implements Type: an sshkey token never matches an OTP.
func (SSHKeyToken) Check(ctx context.Context, c *Check) (Match, error) {
	return Match{Counter: -1}, nil
}

// SSHKey returns the public key line stored on an sshkey token ("" for
// other tokens), for the machine subsystem.
func SSHKey(t *Token) string {
	if t == nil || !strings.EqualFold(t.Type, "sshkey") {
		return ""
	}
	return t.Info[InfoSSHKey]
}

// NeverChallenges implements NeverChallenger: the type has no challenge.
func (SSHKeyToken) NeverChallenges() bool { return true }
