package server

import (
	"net/netip"
	"strings"

	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/caller"

	"github.com/authsrv/authsrv/apierr"
)

func parseAddr(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil {
		return netip.Addr{}, apierr.New(apierr.Parameter, "client must be an IP address")
	}
	return ip.Unmap(), nil
}

// caller is the request's caller as the library sees it: the token's
// identity (none: an anonymous caller of /validate), the client, the
// request id, the audit action, and what policy conditions read.
func (c *call) caller() caller.Caller {
	who := c.validateCaller()
	who.Headers = map[string][]string(c.r.Header.Clone())
	if c.p != nil {
		who.Data = map[string]any{}
		for _, k := range c.p.keys() {
			if k == "pass" || k == "password" {
				continue
			}
			v, _ := c.p.raw(k)
			who.Data[k] = v
		}
	}
	return who
}

// target is the request's target user, realm and resolver parameters.
func (c *call) target() authsrv.Target {
	str := func(keys ...string) string {
		for _, k := range keys {
			if v, err := c.p.str(k); err == nil && v != "" {
				return v
			}
		}
		return ""
	}
	return authsrv.Target{User: str("user"), Realm: str("realm"), Resolver: str("resolver", "resolvername")}
}

// authorize is the one rights check every protected handler calls with its
// action name (authsrv.Ops.Authorize).
func (c *call) authorize(action string) error {
	if c.who == nil {
		return errMissingHeader
	}
	names, err := c.a.s.Ops().Authorize(c.ctx, c.caller(), action, c.target())
	c.policies = append(c.policies, names...)
	return err
}

// editableJSON is GET /user/editable_attributes/'s answer.
func editableJSON(r authsrv.AttributeRights) map[string]any {
	if r.All {
		return map[string]any{"delete": []string{"*"}, "set": map[string]any{"*": []string{"*"}}}
	}
	set := map[string]any{}
	for k, v := range r.Set {
		set[k] = nonNil(v)
	}
	return map[string]any{"delete": nonNil(r.Delete), "set": set}
}

// refused answers a request whose parameters failed before it reached
// its library operation: the caller's lack of right wins over err, as it
// did when the route checked the right before the handler ran. (Once the
// library runs the operation, it checks the right and audits itself.)
func (c *call) refused(right string, err error) error {
	if aerr := c.authorize(right); aerr != nil {
		return aerr
	}
	return err
}

// ran marks the request as audited by the library operation it called,
// so that the HTTP wrapper writes no second entry.
func (c *call) ran() { c.recorded = true }
