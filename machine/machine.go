// Package machine keeps machine resolvers (hosts files, LDAP), the
// machines they list, the tokens attached to machines or service IDs for
// an application (ssh, offline, luks), the applications' authentication
// items, and the service IDs.
//
// It sits on floor 4: it may import token, realm, policy, resolver (the
// LDAP connection code), user, notify, audit, store, apierr, caller,
// fileroot and netguard, never validate, eventing or the root package.
package machine

import "context"

// Machine is one machine of a machine resolver.
type Machine struct {
	// ID is the machine's id in its resolver (a hosts file: the IP text).
	ID string `json:"id"`
	// Hostname are the machine's names.
	Hostname []string `json:"hostname"`
	// IP is the machine's address as text ("" when unknown).
	IP string `json:"ip"`
	// Resolver is the machine resolver's name.
	Resolver string `json:"resolver_name"`
}

// Finder finds machines across the machine resolvers.
type Finder interface {
	// ByHostname returns the one machine named hostname (any resolver);
	// ErrNoMachine when none is, ErrAmbiguousMachine when several are.
	ByHostname(ctx context.Context, hostname string) (Machine, error)
	// Get returns machine id of resolver; ErrNoMachine when unknown.
	Get(ctx context.Context, resolver, id string) (Machine, error)
}
