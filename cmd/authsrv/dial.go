package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/authsrv/authsrv/netguard"
)

// allowDialUsage is the help text of serve's -allow-dial.
const allowDialUsage = "address range the server may connect to although it is loopback, link-local or private (SMTP, SMS gateways, RADIUS, LDAP, SQL and SCIM user stores), as a CIDR prefix or an address, or \"unix\" for Unix sockets (repeatable; in AUTHSRV_ALLOW_DIAL separate several with ','); default: none, public addresses only"

// dialList is the repeatable -allow-dial flag. A value may hold several
// ranges separated by commas, which is how AUTHSRV_ALLOW_DIAL names more
// than one. The ranges are checked once the flags are read (dialPolicy),
// so that every bad one is reported together.
type dialList []string

func (d *dialList) String() string { return strings.Join(*d, ",") }

func (d *dialList) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return errors.New("an empty address range")
		}
		*d = append(*d, part)
	}
	return nil
}

// dialPolicy returns the dial policy of the -allow-dial ranges, or an
// error naming every value that is not a CIDR prefix, an address or
// "unix".
func (c *common) dialPolicy() (*netguard.Policy, error) {
	var errs []error
	for _, v := range c.allowDial {
		if _, err := netguard.Parse(v); err != nil {
			errs = append(errs, fmt.Errorf("-allow-dial %w", err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return netguard.Parse(c.allowDial...)
}
