package machine

import (
	"context"

	"github.com/authsrv/authsrv/token"
)

// SSHName is the ssh application's name.
const SSHName = "ssh"

// ServiceIDLister lists the names of the service IDs.
type ServiceIDLister interface {
	Names(ctx context.Context) ([]string, error)
}

var _ ServiceIDLister = (*ServiceIDs)(nil)

// SSH is the ssh application: it hands out the public keys of active
// sshkey tokens, so that an SSH server (through an AuthorizedKeysCommand)
// admits the key for the login its binding names in the "user" option.
type SSH struct {
	sids ServiceIDLister
}

var _ App = (*SSH)(nil)

// NewSSH returns the ssh application; sids lists the service IDs it
// offers for the service_id option.
func NewSSH(sids ServiceIDLister) *SSH { return &SSH{sids: sids} }

// Name implements App.
func (*SSH) Name() string { return SSHName }

// Options implements App: sshkey tokens take the login on the SSH server
// ("user") and the service ID of the servers ("service_id").
func (a *SSH) Options(ctx context.Context) (map[string]map[string]OptionSpec, error) {
	names := []string{}
	if a.sids != nil {
		n, err := a.sids.Names(ctx)
		if err != nil {
			return nil, err
		}
		names = append(names, n...)
	}
	return map[string]map[string]OptionSpec{
		"sshkey": {
			"user": {Type: OptionStr, Description: "The login on the SSH server that the key opens."},
			"service_id": {Type: OptionStr, Description: "The service ID of the SSH servers: every server of the service accepts the key.",
				Value: names},
		},
	}, nil
}

// AuthItem implements App: the key line of an active sshkey token and,
// for an assigned token, its owner's login as "username". A "user" filter
// must equal the binding's "user" option.
func (*SSH) AuthItem(ctx context.Context, b Binding, t *token.Token, req AuthItemRequest) (map[string]any, bool, error) {
	if t.Type != "sshkey" || !t.Active || t.Revoked {
		return nil, false, nil
	}
	if u := req.Filter["user"]; u != "" && u != b.Options["user"] {
		return nil, false, nil
	}
	key := t.Info[token.InfoSSHKey]
	if key == "" {
		return nil, false, nil
	}
	item := map[string]any{"sshkey": key}
	if t.Owner != nil && t.Owner.Login != "" {
		item["username"] = t.Owner.Login
	}
	return item, true, nil
}
