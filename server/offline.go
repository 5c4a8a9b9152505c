package server

import (
	"maps"

	"github.com/authsrv/authsrv"
)

// validateOfflineRefill is POST /validate/offlinerefill: the client of a
// machine with offline values (pam_privacyidea) trades the values its
// user used for new ones, with the refill token it got last. The answer
// has no detail: {"result": {"status": true, "value": true},
// "auth_items": {"offline": [{"refilltoken", "response", "serial"}]}}.
func validateOfflineRefill(c *call) (answer, error) {
	var req authsrv.OfflineRefillRequest
	var err error
	for _, f := range []struct {
		dst *string
		key string
	}{{&req.Serial, "serial"}, {&req.RefillToken, "refilltoken"}, {&req.Pass, "pass"}} {
		if *f.dst, err = c.p.required(f.key); err != nil {
			return answer{}, err
		}
	}
	it, err := c.a.s.Ops().OfflineRefill(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	item := map[string]any{"refilltoken": it.RefillToken, "response": maps.Clone(it.Response), "serial": it.Serial}
	return answer{value: true, authItems: map[string]any{"offline": []map[string]any{item}}}, nil
}
