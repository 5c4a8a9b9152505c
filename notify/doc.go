// Package notify owns authsrv's outgoing notification channels: the
// definitions of SMTP servers, SMS gateways, RADIUS servers and remote
// privacyIDEA (or authsrv) servers, and the senders that use them (e-mail
// through github.com/wneessen/go-mail, SMS through the HTTP, SMTP and
// script providers, RADIUS requests through internal/radclient, requests
// forwarded to a remote server by the Federation event handler).
//
// It sits on floor 2: it imports store, apierr, internal/secret,
// internal/radclient and netguard, and never serves HTTP (outgoing HTTP,
// SMTP and UDP clients only). It owns the buckets "smtpservers", "smsgateways",
// "radiusservers" and "privacyideaservers"; no other package reads them.
//
// # Secrets
//
// SMTP passwords and private-key passwords, secret SMS gateway options and
// headers and RADIUS secrets are sealed with AES-256-GCM through
// internal/secret, bound to (bucket, record key, field). Reads return
// [Censored] in their place, and sending [Censored] back keeps the stored
// value. Errors never contain a secret, an OTP text or a remote answer.
//
// # Sending
//
// The functions passed to store.Update only decide and write; every send
// happens after the transaction, so a retried transaction never sends
// twice, and no send is retried. Every send ends at the definition's
// timeout with a short error built on [ErrSendFailed] (apierr ConfigAdmin)
// that names what failed but never echoes the remote server's text: the
// test endpoints must not become a port scanner that reads answers.
//
// # Outbound targets (SSRF)
//
// Every connection this package opens (SMTP, SMS HTTP and its proxies,
// RADIUS over UDP) goes through the dial policy [Config.Dial] (package
// netguard), judged on the resolved address at connect time, so that a
// name resolving to loopback, DNS rebinding and each redirect hop are
// covered; with a proxy the policy sees the proxy's address. The nil
// policy refuses loopback, link-local, private and the other special
// ranges; the error of a refused send names the address and the rule.
// HTTP redirects are capped at three hops and response bodies read to at
// most 64 KiB.
package notify
