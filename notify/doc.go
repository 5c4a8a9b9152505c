// Package notify owns authsrv's outgoing notification channels: the
// definitions of SMTP servers, SMS gateways and RADIUS servers, and the
// senders that use them (e-mail through github.com/wneessen/go-mail, SMS
// through the HTTP, SMTP and script providers, RADIUS requests through
// internal/radclient).
//
// It sits on floor 2: it imports store, apierr, internal/secret and
// internal/radclient, and never serves HTTP (outgoing HTTP, SMTP and UDP
// clients only). It owns the buckets "smtpservers", "smsgateways" and
// "radiusservers"; no other package reads them.
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
// Admin-configured URLs and hosts may point anywhere, loopback included,
// unless the embedder sets [Config.DialControl]: that hook runs on the
// resolved address of every TCP connection this package opens (SMTP and SMS
// HTTP; with a proxy it sees the proxy's address), so it also covers DNS
// rebinding and each redirect hop. RADIUS goes through internal/radclient,
// which the hook does not reach. HTTP redirects are capped at three hops and response bodies
// read to at most 64 KiB.
package notify
