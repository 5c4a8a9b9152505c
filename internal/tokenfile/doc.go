// Package tokenfile owns the parsers for token import files, the files an
// administrator uploads to create many tokens at once (privacyIDEA's
// /token/load). It reads three formats:
//
//   - OATH CSV (privacyIDEA's "oathcsv"): one HOTP or TOTP token per line,
//     see ParseOATHCSV.
//   - Yubikey CSV (privacyIDEA's "yubikeycsv"): the log of the Yubico
//     personalization tool and the yubikey-ksm key file, see
//     ParseYubikeyCSV.
//   - PSKC (RFC 6030) XML, with plain, preshared-key or password-encrypted
//     secrets and an optional MAC, see ParsePSKC.
//
// Parsing is all it does: it turns a file into Records (and Failures for the
// entries it could not read) and leaves storing, owners and policies to the
// token subsystem. It sits on floor 1: it imports the standard library only,
// and nothing of authsrv (not even otp or internal/otp), so that no store,
// HTTP or policy code can creep in.
//
// # Untrusted input
//
// An import file is untrusted even though an administrator uploads it. Every
// parser reads at most Limits.MaxBytes and accepts at most Limits.MaxRecords
// entries, and a whole-file error (ErrTooLarge, ErrMalformed) returns no
// records at all, so that an import is either refused or reported entry by
// entry. PSKC documents with a DOCTYPE are refused outright, and the PBKDF2
// iteration count is capped so that a document cannot pin a CPU.
//
// Error messages and Failure reasons are meant to be shown to the
// administrator; they never contain a seed, a MAC key, a preshared key or a
// password. Record and PSKCOptions carry secrets and have a redacting String
// method. The package never logs.
package tokenfile
