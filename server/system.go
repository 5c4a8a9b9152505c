package server

import (
	"strings"

	"github.com/authsrv/authsrv/apierr"

	"github.com/authsrv/authsrv/sysconfig"
)

// The system configuration: /system/... (authsrv.Ops.SystemSettings and
// friends).

// getSystem is GET /system/ and GET /system/{key}: every setting as a
// dict of strings, as privacyIDEA answers it (a user sees the public
// ones), or with a key (path or ?key=) its value, null when it is
// unknown or not readable by the caller. GET /system/random shares the
// route.
func getSystem(c *call) (answer, error) {
	key, err := c.p.str("key")
	if err != nil {
		return answer{}, c.refused("configread", err)
	}
	if key == "random" {
		return getRandom(c)
	}
	list, err := c.a.s.Ops().SystemSettings(c.ctx, c.caller(), key)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	if key != "" {
		if len(list) == 0 {
			return answer{value: nil}, nil
		}
		return answer{value: list[0].Value}, nil
	}
	out := make(map[string]any, len(list))
	for _, st := range list {
		out[st.Name] = st.Value
	}
	return answer{value: out}, nil
}

// getRandom is GET /system/random: len random bytes (default 20) as hex,
// or base64 with encode=b64.
func getRandom(c *call) (answer, error) {
	n, err := c.p.integer("len", 0)
	if err != nil {
		return answer{}, c.refused("getrandom", err)
	}
	encode, err := c.p.str("encode")
	if err != nil {
		return answer{}, c.refused("getrandom", err)
	}
	v, err := c.a.s.Ops().Random(c.ctx, c.caller(), n, encode)
	c.ran()
	return answer{value: v}, err
}

// isCompanion reports whether a setConfig parameter is the ".type" or
// ".desc" companion of another.
func isCompanion(k string) bool {
	return strings.HasSuffix(k, ".type") || strings.HasSuffix(k, ".desc")
}

// postSetConfig is POST /system/setConfig: generic key=value pairs, each
// with optional "<key>.type" and "<key>.desc" companions; value maps
// each key to "insert" or "update". All are stored or none.
func postSetConfig(c *call) (answer, error) {
	var changes []sysconfig.Change
	text := func(k string) (string, error) {
		raw, _ := c.p.raw(k)
		return configString(k, raw)
	}
	for _, k := range c.p.keys() {
		if isCompanion(k) {
			continue
		}
		v, err := text(k)
		if err != nil {
			return answer{}, c.refused("configwrite", err)
		}
		typ, err := text(k + ".type")
		if err != nil {
			return answer{}, c.refused("configwrite", err)
		}
		desc, err := text(k + ".desc")
		if err != nil {
			return answer{}, c.refused("configwrite", err)
		}
		changes = append(changes, sysconfig.Change{Key: k, Value: v, Type: typ, Desc: desc})
	}
	res, err := c.a.s.Ops().SetSystemConfig(c.ctx, c.caller(), changes)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := make(map[string]any, len(res))
	for k, v := range res {
		out[k] = v
	}
	return answer{value: out}, nil
}

// postSetDefault is POST /system/setDefault: the token defaults
// (DefaultMaxFailCount, DefaultSyncWindow, DefaultCountWindow,
// DefaultOtpLen, DefaultResetFailCount, in any case); none is ERR77.
func postSetDefault(c *call) (answer, error) {
	params := map[string]string{}
	for _, k := range c.p.keys() {
		raw, _ := c.p.raw(k)
		v, err := configString(k, raw)
		if err != nil {
			return answer{}, c.refused("configwrite", err)
		}
		params[k] = v
	}
	res, err := c.a.s.Ops().SetSystemDefaults(c.ctx, c.caller(), params)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := make(map[string]any, len(res))
	for k, v := range res {
		out[k] = v
	}
	return answer{value: out}, nil
}

// deleteSystem is DELETE /system/{key}: value true when the stored value
// was removed, 0 when none was stored (as privacyIDEA answers); an
// unknown key is ERR905.
func deleteSystem(c *call) (answer, error) {
	key, err := c.p.required("key")
	if err != nil {
		return answer{}, c.refused("configdelete", err)
	}
	deleted, err := c.a.s.Ops().DeleteSystemConfig(c.ctx, c.caller(), key)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	if deleted {
		return answer{value: true}, nil
	}
	return answer{value: 0}, nil
}

// getSystemNames is GET /system/names/{caconnector|radius}: the CA
// connectors (without their configuration) or the RADIUS server
// identifiers, for whoever may enroll certificate or RADIUS tokens.
func getSystemNames(c *call) (answer, error) {
	key, _ := c.p.str("key")
	sub, _ := c.p.str("sub")
	switch {
	case key == "names" && sub == "caconnector":
		list, err := c.a.s.Ops().CAConnectorsForEnrollment(c.ctx, c.caller())
		c.ran()
		if err != nil {
			return answer{}, err
		}
		out := make([]any, 0, len(list))
		for _, d := range list {
			templates := map[string]any{}
			for n, t := range d.Templates {
				templates[n] = t.JSON()
			}
			out = append(out, map[string]any{"connectorname": d.Name, "type": d.Type, "templates": templates})
		}
		return answer{value: out}, nil
	case key == "names" && sub == "radius":
		names, err := c.a.s.Ops().RadiusServerNames(c.ctx, c.caller())
		c.ran()
		return answer{value: names}, err
	}
	return answer{}, apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server.")
}
