package server

import "github.com/authsrv/authsrv/machine"

// The service IDs: /serviceid/... (authsrv.Ops.SetServiceID and friends).

// serviceIDsJSON is GET /serviceid/'s answer: the service IDs by name.
func serviceIDsJSON(list []machine.ServiceID) map[string]any {
	out := make(map[string]any, len(list))
	for _, sid := range list {
		out[sid.Name] = map[string]any{"description": sid.Description, "id": sid.ID}
	}
	return out
}

// postServiceID is POST /serviceid/{name}: create the service ID or change
// its description; value is its id.
func postServiceID(c *call) (answer, error) {
	name, err := c.p.required("name")
	if err != nil {
		return answer{}, c.refused("serviceid_add", err)
	}
	desc, err := c.p.str("description")
	if err != nil {
		return answer{}, c.refused("serviceid_add", err)
	}
	id, err := c.a.s.Ops().SetServiceID(c.ctx, c.caller(), name, desc)
	c.ran()
	return answer{value: id}, err
}

// getServiceIDs is GET /serviceid/[{name}]: every service ID, or the one
// named (none when unknown).
func getServiceIDs(c *call) (answer, error) {
	name, err := c.p.str("name")
	if err != nil {
		return answer{}, c.refused("serviceid_list", err)
	}
	list, err := c.a.s.Ops().ServiceIDs(c.ctx, c.caller(), name)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: serviceIDsJSON(list)}, nil
}

// deleteServiceID is DELETE /serviceid/{name}: value 1; unknown is 404.
func deleteServiceID(c *call) (answer, error) {
	name, err := c.p.required("name")
	if err != nil {
		return answer{}, c.refused("serviceid_delete", err)
	}
	err = c.a.s.Ops().DeleteServiceID(c.ctx, c.caller(), name)
	c.ran()
	return answer{value: 1}, err
}
