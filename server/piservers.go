package server

import (
	"github.com/authsrv/authsrv/notify"
)

// --- remote privacyIDEA servers ---

// rightPIServerWrite is the right of every /privacyideaserver/ change and
// of the test request.
const rightPIServerWrite = "privacyideaserver_write"

// piServerJSON is one definition as GET /privacyideaserver/ answers it
// (keyed by its identifier).
func piServerJSON(d notify.PIServer) map[string]any {
	return map[string]any{"id": d.ID, "url": d.URL, "tls": d.TLS, "description": d.Description}
}

// piServerParams reads a definition's url, tls (default true: verify the
// certificate) and description.
func (c *call) piServerParams(id string) (notify.PIServer, error) {
	d := notify.PIServer{Identifier: id, TLS: true}
	var err error
	if d.URL, err = c.p.required("url"); err != nil {
		return d, err
	}
	if v, ok := c.p.raw("tls"); ok && v != nil {
		if d.TLS, err = c.p.boolean("tls"); err != nil {
			return d, err
		}
	}
	if d.Description, err = c.p.str("description"); err != nil {
		return d, err
	}
	return d, nil
}

// postPIServer is POST /privacyideaserver/{identifier}; POST
// /privacyideaserver/test_request shares the route.
func postPIServer(c *call) (answer, error) {
	id, err := c.p.required("piserverid")
	if err != nil {
		return answer{}, c.refused(rightPIServerWrite, err)
	}
	if id == "test_request" {
		return piServerTest(c)
	}
	d, err := c.piServerParams(id)
	if err != nil {
		return answer{}, c.refused(rightPIServerWrite, err)
	}
	err = c.a.s.Ops().SetPIServer(c.ctx, c.caller(), d)
	c.ran()
	return answer{value: true}, err
}

// piServerTest is POST /privacyideaserver/test_request
// (authsrv.Ops.TestPIServer): a /validate/check through the inline
// definition; true iff the remote server accepted it.
func piServerTest(c *call) (answer, error) {
	id, err := c.p.required("identifier")
	if err != nil {
		return answer{}, c.refused(rightPIServerWrite, err)
	}
	d, err := c.piServerParams(id)
	if err != nil {
		return answer{}, c.refused(rightPIServerWrite, err)
	}
	user, err := c.p.required("username")
	if err != nil {
		return answer{}, c.refused(rightPIServerWrite, err)
	}
	pw, err := c.p.required("password")
	if err != nil {
		return answer{}, c.refused(rightPIServerWrite, err)
	}
	ok, err := c.a.s.Ops().TestPIServer(c.ctx, c.caller(), d, user, pw)
	c.ran()
	return answer{value: ok}, err
}

// getPIServers is GET /privacyideaserver/ (authsrv.Ops.PIServers): the
// definitions by identifier.
func getPIServers(c *call) (answer, error) {
	list, err := c.a.s.Ops().PIServers(c.ctx, c.caller())
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := map[string]any{}
	for _, d := range list {
		out[d.Identifier] = piServerJSON(d)
	}
	return answer{value: out}, nil
}

// deletePIServer is DELETE /privacyideaserver/{identifier}.
func deletePIServer(c *call) (answer, error) {
	id, err := c.p.required("piserverid")
	if err != nil {
		return answer{}, c.refused(rightPIServerWrite, err)
	}
	err = c.a.s.Ops().DeletePIServer(c.ctx, c.caller(), id)
	c.ran()
	return answer{value: true}, err
}
