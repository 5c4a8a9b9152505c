package server

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"
)

// routes registers every route of the API. Each route is registered with
// and without its trailing slash (see handle). httprouter panics when a
// static segment and a :param are siblings, so such paths get one :param
// route that dispatches inside its handler.
func (a *api) routes() {
	// Health probes: anonymous, bare JSON bodies, GET only.
	a.probe("/healthz/", a.readyz)
	a.probe("/healthz/livez", a.livez)
	a.probe("/healthz/startupz", a.startupz)
	a.probe("/healthz/readyz", a.readyz)

	a.router.GET("/healthz/resolversz", a.resolversz)
	a.router.GET("/healthz/resolversz/", a.resolversz)
	a.endpoints = append(a.endpoints, routeInfo{http.MethodGet, "/healthz/resolversz", public, ""})

	// Authentication.
	a.handle(http.MethodPost, "/auth", endpoint{access: public, authLimit: true, fn: postAuth})

	// Validation: anonymous, small bodies, envelope id 2.
	for _, v := range []struct {
		path string
		fn   func(c *call) (answer, error)
	}{{"/validate/check", validateCheck}, {"/validate/samlcheck", validateSAMLCheck}, {"/validate/radiuscheck", validateRadiusCheck}} {
		a.handle(http.MethodGet, v.path, endpoint{access: public, authLimit: true, auth: true, fn: v.fn})
		a.handle(http.MethodPost, v.path, endpoint{access: public, authLimit: true, auth: true, fn: v.fn})
	}
	a.handle(http.MethodGet, "/validate/triggerchallenge", endpoint{access: adminRole, action: "triggerchallenge", auth: true, fn: validateTrigger})
	a.handle(http.MethodPost, "/validate/triggerchallenge", endpoint{access: adminRole, action: "triggerchallenge", auth: true, fn: validateTrigger})
	a.handle(http.MethodGet, "/validate/polltransaction", endpoint{access: public, authLimit: true, fn: validatePoll})
	a.handle(http.MethodGet, "/validate/polltransaction/:transaction_id", endpoint{access: public, authLimit: true, fn: validatePoll})
	a.handle(http.MethodPost, "/validate/offlinerefill", endpoint{access: public, authLimit: true, fn: validateOfflineRefill})

	// Realms and the default realm.
	a.handle(http.MethodGet, "/realm/", endpoint{access: adminRole, fn: getRealms})
	a.handle(http.MethodGet, "/realm/superuser", endpoint{access: adminRole, fn: getSuperuserRealms})
	a.handleOp(http.MethodPost, "/realm/:realm", "resolverwrite", endpoint{access: adminRole, fn: postRealm})
	a.handleOp(http.MethodPost, "/realm/:realm/node/:nodeid", "resolverwrite", endpoint{access: adminRole, fn: postRealmNode})
	a.handleOp(http.MethodDelete, "/realm/:realm", "resolverdelete", endpoint{access: adminRole, fn: deleteRealm})
	a.handle(http.MethodGet, "/defaultrealm", endpoint{access: adminRole, fn: getDefaultRealm})
	a.handleOp(http.MethodPost, "/defaultrealm/:realm", "resolverwrite", endpoint{access: adminRole, fn: postDefaultRealm})
	a.handleOp(http.MethodDelete, "/defaultrealm", "resolverdelete", endpoint{access: adminRole, fn: deleteDefaultRealm})

	// Resolvers. POST /resolver/test shares POST /resolver/:resolvername,
	// and GET /resolver/:resolvername/default takes a type there.
	a.handleOp(http.MethodGet, "/resolver/", "resolverread", endpoint{access: adminRole, fn: getResolvers})
	a.handleOp(http.MethodGet, "/resolver/:resolvername", "resolverread", endpoint{access: adminRole, fn: getResolvers})
	a.handle(http.MethodGet, "/resolver/:resolvername/default", endpoint{access: adminRole, fn: getResolverDefaults})
	a.handleOp(http.MethodPost, "/resolver/:resolvername", "resolverwrite", endpoint{access: adminRole, fn: postResolver})
	a.handleOp(http.MethodDelete, "/resolver/:resolvername", "resolverdelete", endpoint{access: adminRole, fn: deleteResolver})

	// Users and custom attributes. DELETE /user/{resolver}/{user} and
	// DELETE /user/attribute/{key}/{user}/{realm} share one route.
	a.handle(http.MethodGet, "/user/", endpoint{access: anyRole, fn: getUsers})
	a.handleOp(http.MethodPost, "/user/", "adduser", endpoint{access: adminRole, fn: postUser})
	a.handle(http.MethodPut, "/user/", endpoint{access: anyRole, fn: putUser})
	a.handle(http.MethodDelete, "/user/:first/*rest", endpoint{access: anyRole, fn: deleteUserOrAttribute})
	a.handle(http.MethodPost, "/user/attribute", endpoint{access: anyRole, fn: postUserAttribute})
	a.handle(http.MethodGet, "/user/attribute", endpoint{access: anyRole, fn: getUserAttribute})
	a.handle(http.MethodGet, "/user/editable_attributes/", endpoint{access: anyRole, fn: getEditableAttributes})
	a.innerActions = append(a.innerActions, "userlist", "updateuser", "deleteuser")

	// Policies. The static children (check, defs, export, enable, disable,
	// import) share the :name routes and are dispatched inside.
	a.handleOp(http.MethodGet, "/policy/", "policyread", endpoint{access: adminRole, fn: getPolicies})
	a.handleOp(http.MethodGet, "/policy/:name", "policyread", endpoint{access: adminRole, fn: getPolicyRoute})
	a.handleOp(http.MethodGet, "/policy/:name/:sub", "policyread", endpoint{access: adminRole, fn: getPolicySub})
	a.handleOp(http.MethodPost, "/policy/:name", "policywrite", endpoint{access: adminRole, fn: postPolicyRoute})
	a.handleOp(http.MethodPost, "/policy/:name/:sub", "policywrite", endpoint{access: adminRole, fn: postPolicySub})
	a.handleOp(http.MethodPatch, "/policy/:oldname", "policywrite", endpoint{access: adminRole, fn: patchPolicy})
	a.handleOp(http.MethodDelete, "/policy/:name", "policydelete", endpoint{access: adminRole, fn: deletePolicy})

	// The audit log: admins (auditlog, auditlog_download) and users, who
	// see their own entries.
	a.handle(http.MethodGet, "/audit/", endpoint{access: anyRole, fn: getAudit})
	a.handle(http.MethodGet, "/audit/:csvfile", endpoint{access: anyRole, fn: getAuditCSV})
	a.innerActions = append(a.innerActions, "auditlog", "auditlog_download")

	// Tokens. Routes with an optional serial are registered with and
	// without it; DELETE /token/{serial}/... carries the info and
	// challenge deletions.
	for _, r := range []struct {
		path string
		fn   func(c *call) (answer, error)
	}{
		{"/token/enable", postTokenEnable}, {"/token/disable", postTokenDisable},
		{"/token/reset", postTokenReset}, {"/token/resync", postTokenResync},
		{"/token/setpin", postTokenSetPIN}, {"/token/setrandompin", postTokenSetRandomPIN},
		{"/token/description", postTokenDescription}, {"/token/revoke", postTokenRevoke},
	} {
		a.handle(http.MethodPost, r.path, endpoint{access: anyRole, fn: r.fn})
		a.handle(http.MethodPost, r.path+"/:serial", endpoint{access: anyRole, fn: r.fn})
	}
	a.handle(http.MethodGet, "/token/", endpoint{access: anyRole, fn: getTokens})
	a.handle(http.MethodPost, "/token/init", endpoint{access: anyRole, fn: postTokenInit})
	a.handle(http.MethodPost, "/token/assign", endpoint{access: anyRole, fn: postTokenAssign})
	a.handle(http.MethodPost, "/token/unassign", endpoint{access: anyRole, fn: postTokenUnassign})
	a.handle(http.MethodPost, "/token/lost/:serial", endpoint{access: anyRole, fn: postTokenLost})
	a.handle(http.MethodDelete, "/token/", endpoint{access: anyRole, fn: deleteToken})
	a.handleExact(http.MethodDelete, "/token/:serial", endpoint{access: anyRole, fn: deleteTokenRoute})
	a.handle(http.MethodDelete, "/token/:serial/*rest", endpoint{access: anyRole, fn: deleteTokenRoute})
	a.handle(http.MethodPost, "/token/set", endpoint{access: adminRole, fn: postTokenSet})
	a.handle(http.MethodPost, "/token/set/:serial", endpoint{access: adminRole, fn: postTokenSet})
	a.handle(http.MethodPost, "/token/realm/:serial", endpoint{access: adminRole, fn: postTokenRealm})
	a.handleOp(http.MethodGet, "/token/getserial/:otp", "getserial", endpoint{access: adminRole, fn: getTokenSerial})
	a.handle(http.MethodPost, "/token/info/:serial/:key", endpoint{access: adminRole, fn: postTokenInfo})
	a.handleOp(http.MethodGet, "/token/challenges/", "getchallenges", endpoint{access: adminRole, fn: getTokenChallenges})
	a.handleOp(http.MethodGet, "/token/challenges/:serial", "getchallenges", endpoint{access: adminRole, fn: getTokenChallenges})
	a.handle(http.MethodPost, "/token/copypin", endpoint{access: adminRole, fn: postTokenCopyPIN})
	a.handle(http.MethodPost, "/token/copyuser", endpoint{access: adminRole, fn: postTokenCopyUser})
	a.handle(http.MethodPost, "/token/load/:filename", endpoint{access: adminRole, fn: postTokenLoad})
	a.innerActions = append(a.innerActions, "tokenlist", "enrollpin", "assign", "unassign", "enable", "disable", "delete",
		"reset", "resync", "setpin", "setrandompin", "setdescription", "revoke", "losttoken", "cancelchallenge",
		"set", "tokenrealms", "settokeninfo", "copytokenpin", "copytokenuser", "importtokens")
	for _, t := range a.s.Tokens().Types().Names() {
		a.innerActions = append(a.innerActions, "enroll"+strings.ToUpper(t))
	}

	// Notification channels. POST .../send_test_email and .../test_request
	// share the :id routes; GET /smsgateway/providers and DELETE
	// /smsgateway/option/{gwid}/{key} share the gateway routes.
	a.handleOp(http.MethodGet, "/smtpserver/", "smtpserver_read", endpoint{access: adminRole, fn: getSMTPServers})
	a.handleOp(http.MethodPost, "/smtpserver/:smtpid", "smtpserver_write", endpoint{access: adminRole, fn: postSMTPServer})
	a.handleOp(http.MethodDelete, "/smtpserver/:smtpid", "smtpserver_write", endpoint{access: adminRole, fn: deleteSMTPServer})
	a.handleOp(http.MethodGet, "/smsgateway/", "smsgateway_read", endpoint{access: adminRole, fn: getSMSGateways})
	a.handleOp(http.MethodGet, "/smsgateway/:gwid", "smsgateway_read", endpoint{access: adminRole, fn: getSMSGateways})
	a.handleOp(http.MethodPost, "/smsgateway", "smsgateway_write", endpoint{access: adminRole, fn: postSMSGateway})
	a.handleOp(http.MethodDelete, "/smsgateway/:identifier", "smsgateway_write", endpoint{access: adminRole, fn: deleteSMSGateway})
	a.handleOp(http.MethodDelete, "/smsgateway/:identifier/:gwid/:key", "smsgateway_write", endpoint{access: adminRole, fn: deleteSMSGateway})
	// Event handler definitions. The static children (available,
	// handlermodules, positions, ...) share the :eventid routes.
	a.handleOp(http.MethodGet, "/event/", rightEventRead, endpoint{access: adminRole, fn: getEvents})
	a.handle(http.MethodGet, "/event/:eventid", endpoint{access: adminRole, fn: getEventRoute})
	a.handle(http.MethodGet, "/event/:eventid/:module", endpoint{access: adminRole, fn: getEventSub})
	a.handle(http.MethodPost, "/event", endpoint{access: adminRole, fn: postEvent})
	a.handle(http.MethodPost, "/event/:eventid/:id", endpoint{access: adminRole, fn: postEventSwitch})
	a.handle(http.MethodDelete, "/event/:eventid", endpoint{access: adminRole, fn: deleteEvent})
	a.innerActions = append(a.innerActions, rightEventRead, rightEventWrite)

	a.handleOp(http.MethodGet, "/radiusserver/", "radiusserver_read", endpoint{access: adminRole, fn: getRadiusServers})
	a.handleOp(http.MethodPost, "/radiusserver/:radiusid", "radiusserver_write", endpoint{access: adminRole, fn: postRadiusServer})
	a.handleOp(http.MethodDelete, "/radiusserver/:radiusid", "radiusserver_write", endpoint{access: adminRole, fn: deleteRadiusServer})
	// Remote privacyIDEA servers; POST .../test_request shares the :id route.
	a.handleOp(http.MethodGet, "/privacyideaserver/", "privacyideaserver_read", endpoint{access: adminRole, fn: getPIServers})
	a.handleOp(http.MethodPost, "/privacyideaserver/:piserverid", rightPIServerWrite, endpoint{access: adminRole, fn: postPIServer})
	a.handleOp(http.MethodDelete, "/privacyideaserver/:piserverid", rightPIServerWrite, endpoint{access: adminRole, fn: deletePIServer})
	// Machine resolvers (POST /machineresolver/test shares the :name
	// route) and the machines they list.
	a.handleOp(http.MethodGet, "/machineresolver/", "mresolverread", endpoint{access: adminRole, fn: getMachineResolvers})
	a.handleOp(http.MethodGet, "/machineresolver/:name", "mresolverread", endpoint{access: adminRole, fn: getMachineResolvers})
	a.handleOp(http.MethodPost, "/machineresolver/:name", "mresolverwrite", endpoint{access: adminRole, fn: postMachineResolver})
	a.handleOp(http.MethodDelete, "/machineresolver/:name", "mresolverdelete", endpoint{access: adminRole, fn: deleteMachineResolver})
	a.handleOp(http.MethodGet, "/machine/", "machinelist", endpoint{access: adminRole, fn: getMachines})
	// Machine tokens, their options and authentication items, and the
	// applications. DELETE /machine/token/{serial}/... carries both
	// detach forms; /machine/deltoken and /machine/deloption are
	// privacyideaadm's.
	a.handle(http.MethodPost, "/machine/token", endpoint{access: adminRole, fn: postMachineToken})
	a.handleOp(http.MethodGet, "/machine/token", rightMachineTokens, endpoint{access: adminRole, fn: getMachineTokens})
	a.handle(http.MethodDelete, "/machine/token/:serial/*rest", endpoint{access: adminRole, fn: deleteMachineToken})
	a.handle(http.MethodPost, "/machine/tokenoption", endpoint{access: adminRole, fn: postMachineTokenOption})
	a.handle(http.MethodPost, "/machine/deltoken", endpoint{access: adminRole, fn: postMachineDelToken})
	a.handle(http.MethodPost, "/machine/deloption", endpoint{access: adminRole, fn: postMachineDelOption})
	a.handleOp(http.MethodGet, "/machine/authitem", rightAuthItems, endpoint{access: adminRole, fn: getMachineAuthItems})
	a.handleOp(http.MethodGet, "/machine/authitem/:application", rightAuthItems, endpoint{access: adminRole, fn: getMachineAuthItems})
	a.handle(http.MethodGet, "/application/", endpoint{access: adminRole, fn: getApplications})
	// Service IDs.
	a.handleOp(http.MethodGet, "/serviceid/", "serviceid_list", endpoint{access: adminRole, fn: getServiceIDs})
	a.handleOp(http.MethodGet, "/serviceid/:name", "serviceid_list", endpoint{access: adminRole, fn: getServiceIDs})
	a.handleOp(http.MethodPost, "/serviceid/:name", "serviceid_add", endpoint{access: adminRole, fn: postServiceID})
	a.handleOp(http.MethodDelete, "/serviceid/:name", "serviceid_delete", endpoint{access: adminRole, fn: deleteServiceID})
	// CA connectors; GET /caconnector/specific/{type} is the
	// /caconnector/:name/:catype route.
	a.handleOp(http.MethodGet, "/caconnector/", "caconnectorread", endpoint{access: adminRole, fn: getCAConnectors})
	a.handleOp(http.MethodGet, "/caconnector/:name", "caconnectorread", endpoint{access: adminRole, fn: getCAConnectors})
	a.handleOp(http.MethodGet, "/caconnector/:name/:catype", "caconnectorread", endpoint{access: adminRole, fn: getCAConnectorSpecific})
	a.handleOp(http.MethodPost, "/caconnector/:name", "caconnectorwrite", endpoint{access: adminRole, fn: postCAConnector})
	a.handleOp(http.MethodDelete, "/caconnector/:name", "caconnectordelete", endpoint{access: adminRole, fn: deleteCAConnector})
	// The system configuration. Users read the public settings; GET
	// /system/random shares the :key route.
	a.handle(http.MethodGet, "/system/", endpoint{access: anyRole, fn: getSystem})
	a.handle(http.MethodGet, "/system/:key", endpoint{access: anyRole, fn: getSystem})
	a.handle(http.MethodGet, "/system/:key/:sub", endpoint{access: anyRole, fn: getSystemNames})
	a.handleOp(http.MethodPost, "/system/setConfig", "configwrite", endpoint{access: adminRole, fn: postSetConfig})
	a.handleOp(http.MethodPost, "/system/setDefault", "configwrite", endpoint{access: adminRole, fn: postSetDefault})
	a.handleOp(http.MethodDelete, "/system/:key", "configdelete", endpoint{access: adminRole, fn: deleteSystem})
	a.innerActions = append(a.innerActions, "configread", "getrandom")
	// Client applications (the callers of /validate/check).
	a.handleOp(http.MethodGet, "/client/", "clienttype", endpoint{access: adminRole, fn: getClients})
	// Statistics.
	a.handleOp(http.MethodGet, "/monitoring/", "statistics_read", endpoint{access: adminRole, fn: getMonitoring})
	a.handleOp(http.MethodGet, "/monitoring/:stats_key", "statistics_read", endpoint{access: adminRole, fn: getMonitoring})
	a.handleOp(http.MethodGet, "/monitoring/:stats_key/last", "statistics_read", endpoint{access: adminRole, fn: getMonitoringLast})
	a.handleOp(http.MethodDelete, "/monitoring/:stats_key", "statistics_delete", endpoint{access: adminRole, fn: deleteMonitoring})
	// Subscriptions; GET /subscriptions/status shares the :application
	// route.
	a.handleOp(http.MethodGet, "/subscriptions/", rightManageSubscription, endpoint{access: adminRole, fn: getSubscriptions})
	a.handleOp(http.MethodGet, "/subscriptions/:application", rightManageSubscription, endpoint{access: adminRole, fn: getSubscriptions})
	a.handleOp(http.MethodPost, "/subscriptions/", rightManageSubscription, endpoint{access: adminRole, fn: postSubscription})
	a.handleOp(http.MethodDelete, "/subscriptions/:application", rightManageSubscription, endpoint{access: adminRole, fn: deleteSubscription})
}

// handleOp registers a route whose operation runs in the library, which
// checks right and audits a refusal itself: the route checks nothing, but
// lists right for the route tests and the rights of /auth.
func (a *api) handleOp(method, path, right string, ep endpoint) {
	a.handle(method, path, ep)
	a.endpoints[len(a.endpoints)-1].action = right
}

// handleExact registers ep for exactly one path form (when the other
// form would collide with a catch-all route).
func (a *api) handleExact(method, path string, ep endpoint) {
	a.router.Handle(method, path, a.metered(method, path, a.wrap(ep)))
	a.endpoints = append(a.endpoints, routeInfo{method, path, ep.access, ep.action})
}

// probe registers a health probe for both slash forms.
func (a *api) probe(path string, h httprouter.Handle) {
	h = a.metered(http.MethodGet, path, h)
	a.router.GET(path, h)
	a.endpoints = append(a.endpoints, routeInfo{http.MethodGet, path, public, ""})
	alt := path[:len(path)-1]
	if path[len(path)-1] != '/' {
		alt = path + "/"
	}
	a.router.GET(alt, h)
}
