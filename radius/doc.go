// Package radius is authsrv's built-in RADIUS server: it answers PAP
// Access-Requests from the NASes it knows (VPN gateways, Wi-Fi
// controllers) with the library's validate decision, as privacyIDEA's
// FreeRADIUS plugin does over HTTP, but without FreeRADIUS and without
// HTTP.
//
// The server is a thin caller: it decodes an Access-Request into a
// validate.Request (the NAS address as the client, user agent
// "authsrv-radius", action "RADIUS Access-Request") and hands it to a
// Checker, which is (*authsrv.Server).Validator() in the binary, so that
// policies, the audit, event handlers, client applications and metrics
// apply as for /validate/check. It holds no policy, audit or event logic
// of its own. The caller's role is caller.APIKey: the shared secret
// authenticates the NAS as an API key authenticates an HTTP client, so
// the policy api_key_required does not refuse RADIUS requests.
//
// What it does on the wire:
//   - Access-Accept, Access-Reject (Reply-Message: the decision's message)
//     or Access-Challenge (State: the transaction id; Reply-Message: the
//     challenge text). A request that carries a State answers that
//     challenge.
//   - A Message-Authenticator on every answer, and one required on every
//     Access-Request (Blast-RADIUS, CVE-2024-3596) unless the client is
//     marked legacy. A wrong one, a malformed or oversized packet, an
//     attribute of the wrong length and a packet from an unknown address
//     are dropped without an answer and without an OTP check.
//   - Proxy-State echoed in order; retransmissions (same source, identifier
//     and authenticator within DuplicateWindow) get the first answer
//     again, never a second OTP check.
//   - Bounded concurrency per client and overall: requests beyond it are
//     dropped (a NAS retransmits), counted, and logged once a minute.
//
// Package radius sits on floor 6 beside server: it imports validate,
// caller and apierr, never server or the root package authsrv.
package radius
