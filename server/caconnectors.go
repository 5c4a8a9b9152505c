package server

import (
	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/caconnector"
)

// The CA connectors: /caconnector/... (authsrv.Ops.SetCAConnector and
// friends).

// caConnectorsJSON is GET /caconnector/'s answer: a list of connectors
// with their configuration and templates.
func caConnectorsJSON(list []caconnector.Def) []any {
	out := make([]any, 0, len(list))
	for _, d := range list {
		data := make(map[string]any, len(d.Data))
		for k, v := range d.Data {
			data[k] = v
		}
		templates := map[string]any{}
		for n, t := range d.Templates {
			templates[n] = t.JSON()
		}
		out = append(out, map[string]any{"connectorname": d.Name, "type": d.Type, "data": data, "templates": templates})
	}
	return out
}

// getCAConnectors is GET /caconnector/[{name}]: every connector, or the
// one named (none when unknown).
func getCAConnectors(c *call) (answer, error) {
	name, err := c.p.str("name")
	if err != nil {
		return answer{}, c.refused("caconnectorread", err)
	}
	list, err := c.a.s.Ops().CAConnectors(c.ctx, c.caller(), name)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: caConnectorsJSON(list)}, nil
}

// getCAConnectorSpecific is GET /caconnector/specific/{type} with the
// configuration entered so far (the route is /caconnector/{name}/{type}:
// httprouter cannot have "specific" beside {name}).
func getCAConnectorSpecific(c *call) (answer, error) {
	if name, _ := c.p.str("name"); name != "specific" {
		// Another path below /caconnector/: the read right decides
		// first, as for every /caconnector/ read, then it is unknown.
		_, err := c.a.s.Ops().CAConnectors(c.ctx, c.caller(), name)
		c.ran()
		if err != nil {
			return answer{}, err
		}
		return answer{}, apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server.")
	}
	typ, err := c.p.required("catype")
	if err != nil {
		return answer{}, c.refused("caconnectorread", err)
	}
	params, err := c.configParams("name", "catype")
	if err != nil {
		return answer{}, c.refused("caconnectorread", err)
	}
	v, err := c.a.s.Ops().CAConnectorSpecific(c.ctx, c.caller(), typ, params)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: v}, nil
}

// postCAConnector is POST /caconnector/{name}: create the connector or
// change its configuration; value is its id.
func postCAConnector(c *call) (answer, error) {
	name, err := c.p.required("name")
	if err != nil {
		return answer{}, c.refused("caconnectorwrite", err)
	}
	typ, err := c.p.str("type")
	if err != nil {
		return answer{}, c.refused("caconnectorwrite", err)
	}
	params, err := c.configParams("name", "caconnector", "type")
	if err != nil {
		return answer{}, c.refused("caconnectorwrite", err)
	}
	id, err := c.a.s.Ops().SetCAConnector(c.ctx, c.caller(), name, typ, params)
	c.ran()
	return answer{value: id}, err
}

// deleteCAConnector is DELETE /caconnector/{name}: value is its id;
// unknown is 404.
func deleteCAConnector(c *call) (answer, error) {
	name, err := c.p.required("name")
	if err != nil {
		return answer{}, c.refused("caconnectordelete", err)
	}
	id, err := c.a.s.Ops().DeleteCAConnector(c.ctx, c.caller(), name)
	c.ran()
	return answer{value: id}, err
}
