// Package sysconfig owns the system configuration: privacyIDEA's
// system settings (DefaultOtpLen, PrependPin, totp.hashlib, ...) with
// their kinds, limits, defaults and descriptions, stored in its own
// bucket and shared by every node on the store. A compiled Snapshot of the
// effective values (stored, else the program's default) is cached by the
// configuration revision: a change made through the Service takes effect
// at once, one made by another node within a second.
//
// Package sysconfig sits on floor 2: it imports only apierr and store of
// authsrv (never token, server or net/http server types); the root hands
// in the defaults and turns a snapshot into the token settings.
package sysconfig
