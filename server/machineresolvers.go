package server

import (
	"github.com/authsrv/authsrv"
	"github.com/authsrv/authsrv/machine"
)

func machineResolverJSON(d machine.Def) map[string]any {
	data := map[string]any{}
	for k, v := range d.Data {
		data[k] = v
	}
	return map[string]any{"resolvername": d.Name, "type": d.Type, "data": data}
}

// getMachineResolvers is GET /machineresolver/ and GET
// /machineresolver/{name} (authsrv.Ops.MachineResolvers): a map by name;
// an unknown name gives {}.
func getMachineResolvers(c *call) (answer, error) {
	var req authsrv.MachineResolverListRequest
	var err error
	if req.Type, err = c.p.str("type"); err != nil {
		return answer{}, c.refused("mresolverread", err)
	}
	req.Name, _ = c.p.str("name")
	list, err := c.a.s.Ops().MachineResolvers(c.ctx, c.caller(), req)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := map[string]any{}
	for _, d := range list {
		out[d.Name] = machineResolverJSON(d)
	}
	return answer{value: out}, nil
}

// postMachineResolver is POST /machineresolver/{name}; POST
// /machineresolver/test shares the route.
func postMachineResolver(c *call) (answer, error) {
	name, err := c.p.required("name")
	if err != nil {
		return answer{}, c.refused("mresolverwrite", err)
	}
	if name == "test" {
		return postMachineResolverTest(c)
	}
	params, err := c.configParams("name")
	if err != nil {
		return answer{}, c.refused("mresolverwrite", err)
	}
	id, err := c.a.s.Ops().SetMachineResolver(c.ctx, c.caller(), name, params)
	c.ran()
	return answer{value: id}, err
}

// postMachineResolverTest is POST /machineresolver/test
// (authsrv.Ops.TestMachineResolver): the result, and the description as
// detail. "resolver" may name a stored resolver whose passwords fill in
// censored values.
func postMachineResolverTest(c *call) (answer, error) {
	stored, err := c.p.str("resolver")
	if err != nil {
		return answer{}, err
	}
	params, err := c.configParams("name", "resolver")
	if err != nil {
		return answer{}, err
	}
	ok, desc, err := c.a.s.Ops().TestMachineResolver(c.ctx, c.caller(), params, stored)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: ok, detail: map[string]any{"description": desc}}, nil
}

// deleteMachineResolver is DELETE /machineresolver/{name}.
func deleteMachineResolver(c *call) (answer, error) {
	name, err := c.p.required("name")
	if err != nil {
		return answer{}, c.refused("mresolverdelete", err)
	}
	id, err := c.a.s.Ops().DeleteMachineResolver(c.ctx, c.caller(), name)
	c.ran()
	return answer{value: id}, err
}

// getMachines is GET /machine/ (authsrv.Ops.ListMachines).
func getMachines(c *call) (answer, error) {
	var f machine.MachineFilter
	for _, p := range []struct {
		key string
		dst *string
	}{{"hostname", &f.Hostname}, {"ip", &f.IP}, {"id", &f.ID}, {"resolver", &f.Resolver}, {"any", &f.Any}} {
		v, err := c.p.str(p.key)
		if err != nil {
			return answer{}, c.refused("machinelist", err)
		}
		*p.dst = v
	}
	list, err := c.a.s.Ops().ListMachines(c.ctx, c.caller(), f)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := make([]any, 0, len(list))
	for _, m := range list {
		hosts := make([]any, len(m.Hostname))
		for i, h := range m.Hostname {
			hosts[i] = h
		}
		out = append(out, map[string]any{"id": m.ID, "hostname": hosts, "ip": m.IP, "resolver_name": m.Resolver})
	}
	return answer{value: out}, nil
}
