// Package secret owns authsrv's cryptography at rest: the encryption key
// file, the AES-256-GCM [Sealer] that protects token seeds and other stored
// secrets, Argon2 PHC hashing of PINs and passwords through a memory-bounded
// [Hasher], and constant-time comparison helpers.
//
// It sits on the lowest floor: it imports only the standard library,
// golang.org/x/crypto and golang.org/x/sync, and nothing of authsrv, so that
// every other package may use it. Its errors are plain sentinels; callers map
// them to apierr codes at their own boundary.
//
// # Sealed format
//
// A sealed value is
//
//	version (1 byte, 0x01) | key id (1 byte) | nonce (12 bytes) | GCM ciphertext and tag
//
// The key id is the first byte of SHA-256 of the key, so that after a key
// rotation [Sealer.Open] can pick the right key without trying all of them.
// The GCM additional data is the version and key id followed by the
// caller's additional-data parts, each prefixed with its length, so that a
// ciphertext bound to (bucket, record key, field) opens for that record only.
// Nonces are random; one key should seal fewer than 2^32 values.
//
// # Password hashes
//
// Hashes are PHC strings such as
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>
//
// with salt and hash in standard base64 without padding. [Hasher.Verify]
// reads the parameters from the string, so hashes imported from privacyIDEA
// (m=65536,t=9,p=4 or m=102400,t=9,p=8) verify, but refuses parameters above
// its [Caps]. Every key derivation waits for its memory in a weighted
// semaphore sized from a budget, so parallel requests queue instead of
// exhausting memory.
//
// Nothing in this package logs, and no error or String method shows key
// material, plaintexts, passwords or hashes.
package secret
