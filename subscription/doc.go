// Package subscription owns the subscription files of authsrv: it parses
// an uploaded file, verifies its signature against the public key the
// operator configured, stores one row per application, and compares a
// subscription with the tokens and users in use (privacyIDEA's states
// none, valid, expiring, exceeded and expired).
//
// # The file
//
// A subscription file is a YAML mapping of the fields of privacyIDEA's
// subscription table, each a single-line scalar:
//
//	application: privacyidea
//	for_name: Example Corp
//	by_name: Vendor GmbH
//	date_from: 2026-01-01
//	date_till: 2027-01-01
//	num_users: 100
//	num_tokens: 100
//	num_clients: 10
//	level: gold
//	signature: ed25519:3q2+7w...
//
// The text fields are application, for_name, for_address, for_email,
// for_phone, for_url, for_comment, by_name, by_email, by_address,
// by_phone, by_url and level; date_from and date_till are dates
// (YYYY-MM-DD, a day in UTC); num_users, num_tokens and num_clients are
// integers of at least 0. application, date_from, date_till and signature
// are required; any other field may be left out (an empty value is the
// same as a missing one). An unknown field, a line break or other control
// character in a value, a value that is not a scalar, or date_till before
// date_from make the file invalid.
//
// # The signature
//
// The signature covers a canonical text of every other field, so that
// reformatting the YAML (quoting, order, comments, spacing) keeps it valid
// while any change of a value, or adding or removing a field, breaks it.
// The canonical text is the line "authsrv-subscription-v1" followed by one
// line "name=value" per present field, in the order application,
// for_name, for_address, for_email, for_phone, for_url, for_comment,
// by_name, by_email, by_address, by_phone, by_url, date_from, date_till,
// num_users, num_tokens, num_clients, level (Fields), each line ending in
// "\n", all UTF-8. Dates are
// written YYYY-MM-DD, integers in decimal without sign or leading zeros,
// text as it is. SignedText builds it.
//
// The signature field is "<algorithm>:<base64>" (standard base64; white
// space is ignored), where algorithm is "ed25519" (an Ed25519 signature of
// the canonical text) or "rsa-pss-sha256" (RSASSA-PSS with SHA-256 of the
// canonical text; any salt length). It must match the type of the
// configured key. Sign makes one, for vendors and tests.
//
// Without a configured key every upload is refused: an unsigned or
// unverifiable file is never stored.
//
// Package subscription imports only floor-1 packages (apierr, store); it
// knows nothing of HTTP or of the token store: the caller hands in the
// counts of what is in use.
package subscription
