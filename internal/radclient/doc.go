// Package radclient sends one RADIUS Access-Request (PAP, RFC 2865) over UDP
// and waits for its authenticated answer. It owns the wire security of
// authsrv's RADIUS client: every request carries a Message-Authenticator
// (RFC 3579 section 3.2, HMAC-MD5 with the shared secret), and a reply counts
// only when both its Response Authenticator and its Message-Authenticator are
// right. Requiring the Message-Authenticator on replies closes the
// BlastRADIUS class of forgeries (CVE-2024-3596), as privacyIDEA 3.12 does.
//
// layeh.com/radius encodes the packets; it neither adds nor checks the
// Message-Authenticator, so this package does both.
//
// radclient sits on floor 1: it imports no authsrv package. The RADIUS token,
// passthru policies and the RADIUS server definitions build on it.
package radclient
