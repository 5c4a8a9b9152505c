package server

import (
	"strconv"
	"strings"

	"github.com/authsrv/authsrv/apierr"
	"github.com/authsrv/authsrv/notify"
)

// --- SMTP servers ---

func smtpJSON(d notify.SMTPServer) map[string]any {
	return map[string]any{
		"identifier": d.Identifier, "server": d.Server, "port": d.Port, "username": d.Username,
		"password": d.Password, "sender": d.Sender, "tls": d.TLS, "implicit_tls": d.ImplicitTLS,
		"timeout": d.Timeout, "description": d.Description, "enqueue_job": d.EnqueueJob,
		"smime": d.SMIME, "dont_send_on_error": d.DontSendOnError, "private_key": d.PrivateKey,
		"private_key_password": d.PrivateKeyPassword, "certificate": d.Certificate,
	}
}

// smtpParams reads an SMTP server definition from the request.
func (c *call) smtpParams(id string) (notify.SMTPServer, error) {
	d := notify.SMTPServer{Identifier: id}
	var err error
	str := func(dst *string, key string) {
		if err == nil {
			*dst, err = c.p.str(key)
		}
	}
	boolean := func(dst *bool, key string) {
		if err == nil {
			*dst, err = c.p.boolean(key)
		}
	}
	integer := func(dst *int, key string, def int) {
		if err == nil {
			*dst, err = c.p.integer(key, def)
		}
	}
	str(&d.Server, "server")
	integer(&d.Port, "port", 25)
	str(&d.Username, "username")
	str(&d.Password, "password")
	str(&d.Sender, "sender")
	boolean(&d.TLS, "tls")
	boolean(&d.ImplicitTLS, "implicit_tls")
	integer(&d.Timeout, "timeout", 10)
	str(&d.Description, "description")
	boolean(&d.EnqueueJob, "enqueue_job")
	boolean(&d.SMIME, "smime")
	boolean(&d.DontSendOnError, "dont_send_on_error")
	str(&d.PrivateKey, "private_key")
	str(&d.PrivateKeyPassword, "private_key_password")
	str(&d.Certificate, "certificate")
	return d, err
}

// postSMTPServer is POST /smtpserver/{identifier}; POST
// /smtpserver/send_test_email shares the route.
func postSMTPServer(c *call) (answer, error) {
	id, err := c.p.required("smtpid")
	if err != nil {
		return answer{}, c.refused("smtpserver_write", err)
	}
	if id == "send_test_email" {
		return sendTestEmail(c)
	}
	d, err := c.smtpParams(id)
	if err != nil {
		return answer{}, c.refused("smtpserver_write", err)
	}
	err = c.a.s.Ops().SetSMTPServer(c.ctx, c.caller(), d)
	c.ran()
	return answer{value: true}, err
}

// sendTestEmail sends the test mail with an inline definition
// (authsrv.Ops.SendTestEmail): value true, or false with the reason in
// detail.message.
func sendTestEmail(c *call) (answer, error) {
	// The path segment is "smtpid"; the definition names itself in the
	// body's "identifier".
	id, err := c.p.required("identifier")
	if err != nil {
		return answer{}, c.refused("smtpserver_write", err)
	}
	recipient, err := c.p.required("recipient")
	if err != nil {
		return answer{}, c.refused("smtpserver_write", err)
	}
	d, err := c.smtpParams(id)
	if err != nil {
		return answer{}, c.refused("smtpserver_write", err)
	}
	res, err := c.a.s.Ops().SendTestEmail(c.ctx, c.caller(), d, recipient)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	return answer{value: res.OK, detail: map[string]any{"message": res.Message}}, nil
}

// getSMTPServers is GET /smtpserver/ (authsrv.Ops.SMTPServers): a list of
// definitions (censored).
func getSMTPServers(c *call) (answer, error) {
	list, err := c.a.s.Ops().SMTPServers(c.ctx, c.caller())
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := []any{}
	for _, d := range list {
		out = append(out, smtpJSON(d))
	}
	return answer{value: out}, nil
}

// deleteSMTPServer is DELETE /smtpserver/{identifier}.
func deleteSMTPServer(c *call) (answer, error) {
	id, err := c.p.required("smtpid")
	if err != nil {
		return answer{}, c.refused("smtpserver_write", err)
	}
	err = c.a.s.Ops().DeleteSMTPServer(c.ctx, c.caller(), id)
	c.ran()
	return answer{value: true}, err
}

// --- SMS gateways ---

func gatewayJSON(g notify.Gateway) map[string]any {
	return map[string]any{
		"id": g.ID, "name": g.Name, "providermodule": g.Module, "module": g.Module, "description": g.Description,
		"options": nonNilMap(g.Options), "headers": nonNilMap(g.Headers),
		"secret_options": nonNil(g.SecretOptions), "secret_headers": nonNil(g.SecretHeaders),
	}
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// postSMSGateway is POST /smsgateway: creates or replaces a definition and
// returns its id.
func postSMSGateway(c *call) (answer, error) {
	g, err := c.gatewayParams()
	if err != nil {
		return answer{}, c.refused("smsgateway_write", err)
	}
	id, err := c.a.s.Ops().SetSMSGateway(c.ctx, c.caller(), g)
	c.ran()
	return answer{value: id}, err
}

// gatewayParams reads an SMS gateway definition: name, module,
// description, option.<K> (or options.<K>), header.<K>,
// secret.option.<K> and secret.header.<K>.
func (c *call) gatewayParams() (notify.Gateway, error) {
	var g notify.Gateway
	var err error
	if g.Name, err = c.p.required("name"); err != nil {
		return g, err
	}
	if g.Module, err = c.p.required("module"); err != nil {
		return g, err
	}
	if g.Description, err = c.p.str("description"); err != nil {
		return g, err
	}
	g.Options, g.Headers = map[string]string{}, map[string]string{}
	for _, k := range c.p.keys() {
		v, err := c.p.str(k)
		if err != nil {
			return g, err
		}
		switch {
		case strings.HasPrefix(k, "secret.option."):
			g.Options[k[len("secret.option."):]] = v
			g.SecretOptions = append(g.SecretOptions, k[len("secret.option."):])
		case strings.HasPrefix(k, "secret.header."):
			g.Headers[k[len("secret.header."):]] = v
			g.SecretHeaders = append(g.SecretHeaders, k[len("secret.header."):])
		case strings.HasPrefix(k, "option."):
			g.Options[k[len("option."):]] = v
		case strings.HasPrefix(k, "options."):
			g.Options[k[len("options."):]] = v
		case strings.HasPrefix(k, "header."):
			g.Headers[k[len("header."):]] = v
		}
	}
	return g, nil
}

// getSMSGateways serves GET /smsgateway/, /smsgateway/{gwid} and
// /smsgateway/providers (authsrv.Ops.SMSGateways, SMSProviders).
func getSMSGateways(c *call) (answer, error) {
	sel, _ := c.p.str("gwid")
	if sel == "providers" {
		v, err := c.a.s.Ops().SMSProviders(c.ctx, c.caller())
		c.ran()
		return answer{value: v}, err
	}
	id := 0
	if sel != "" {
		n, err := strconv.Atoi(sel)
		if err != nil || n <= 0 {
			return answer{}, c.refused("smsgateway_read", apierr.New(apierr.Parameter, "The gateway id must be a positive integer."))
		}
		id = n
	}
	list, err := c.a.s.Ops().SMSGateways(c.ctx, c.caller(), id)
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := []any{}
	for _, g := range list {
		out = append(out, gatewayJSON(g))
	}
	return answer{value: out}, nil
}

// deleteSMSGateway serves DELETE /smsgateway/{identifier} and DELETE
// /smsgateway/option/{gwid}/{key}.
func deleteSMSGateway(c *call) (answer, error) {
	first, _ := c.p.str("identifier")
	if first == "option" && c.p.has("gwid") {
		gw, _ := c.p.str("gwid")
		key, _ := c.p.str("key")
		n, err := strconv.Atoi(gw)
		if err != nil || n <= 0 {
			return answer{}, c.refused("smsgateway_write", apierr.New(apierr.Parameter, "The gateway id must be a positive integer."))
		}
		id, err := c.a.s.Ops().DeleteSMSGatewayOption(c.ctx, c.caller(), n, key)
		c.ran()
		return answer{value: id}, err
	}
	if c.p.has("gwid") {
		return answer{}, c.refused("smsgateway_write", apierr.New(apierr.ResourceNotFound, "The requested URL was not found on the server."))
	}
	id, err := c.a.s.Ops().DeleteSMSGateway(c.ctx, c.caller(), first)
	c.ran()
	return answer{value: id}, err
}

// --- RADIUS servers ---

func radiusJSON(d notify.RadiusServer) map[string]any {
	m := map[string]any{
		"identifier": d.Identifier, "server": d.Server, "port": d.Port, "secret": d.Secret,
		"retries": d.Retries, "timeout": d.Timeout, "dictionary": d.Dictionary, "description": d.Description,
	}
	// privacyIDEA sends null for a server without options.
	m["options"] = nil
	if d.Options != nil {
		m["options"] = d.Options
	}
	return m
}

// postRadiusServer is POST /radiusserver/{identifier}; POST
// /radiusserver/test_request shares the route.
func postRadiusServer(c *call) (answer, error) {
	id, err := c.p.required("radiusid")
	if err != nil {
		return answer{}, c.refused("radiusserver_write", err)
	}
	if id == "test_request" {
		return radiusTest(c)
	}
	d, err := c.radiusParams(id)
	if err != nil {
		return answer{}, c.refused("radiusserver_write", err)
	}
	err = c.a.s.Ops().SetRadiusServer(c.ctx, c.caller(), d)
	c.ran()
	return answer{value: true}, err
}

// radiusParams reads a RADIUS server definition.
func (c *call) radiusParams(id string) (notify.RadiusServer, error) {
	d := notify.RadiusServer{Identifier: id}
	var err error
	if d.Server, err = c.p.str("server"); err != nil {
		return d, err
	}
	if d.Secret, err = c.p.str("secret"); err != nil {
		return d, err
	}
	if d.Port, err = c.p.integer("port", 1812); err != nil {
		return d, err
	}
	if d.Retries, err = c.p.integer("retries", 3); err != nil {
		return d, err
	}
	if d.Timeout, err = c.p.integer("timeout", 5); err != nil {
		return d, err
	}
	if d.Dictionary, err = c.p.str("dictionary"); err != nil {
		return d, err
	}
	if d.Description, err = c.p.str("description"); err != nil {
		return d, err
	}
	if raw, ok := c.p.raw("options"); ok {
		if m, isMap := raw.(map[string]any); isMap {
			d.Options = m
		}
	}
	return d, nil
}

// radiusTest is POST /radiusserver/test_request (authsrv.Ops.TestRadius):
// true iff Access-Accept.
func radiusTest(c *call) (answer, error) {
	id, err := c.p.required("identifier")
	if err != nil {
		return answer{}, c.refused("radiusserver_write", err)
	}
	user, err := c.p.required("username")
	if err != nil {
		return answer{}, c.refused("radiusserver_write", err)
	}
	pw, err := c.p.required("password")
	if err != nil {
		return answer{}, c.refused("radiusserver_write", err)
	}
	ok, err := c.a.s.Ops().TestRadius(c.ctx, c.caller(), id, user, pw)
	c.ran()
	return answer{value: ok}, err
}

// getRadiusServers is GET /radiusserver/ (authsrv.Ops.RadiusServers): a
// list (secrets censored).
func getRadiusServers(c *call) (answer, error) {
	list, err := c.a.s.Ops().RadiusServers(c.ctx, c.caller())
	c.ran()
	if err != nil {
		return answer{}, err
	}
	out := []any{}
	for _, d := range list {
		out = append(out, radiusJSON(d))
	}
	return answer{value: out}, nil
}

// deleteRadiusServer is DELETE /radiusserver/{identifier}.
func deleteRadiusServer(c *call) (answer, error) {
	id, err := c.p.required("radiusid")
	if err != nil {
		return answer{}, c.refused("radiusserver_write", err)
	}
	err = c.a.s.Ops().DeleteRadiusServer(c.ctx, c.caller(), id)
	c.ran()
	return answer{value: true}, err
}
