// Package token owns tokens: the records (seeds sealed, PINs as Argon2id PHC
// strings), their counters, fail counters, windows, validity periods, usage
// counters, tokeninfo, token realms, owners, rollout state, revocation and
// locking; the indexes by owner, realm and type; serial generation; the token
// types (hotp, totp, motp, daypassword, spass, pw, registration, applspec,
// email, sms, paper, tan, indexedsecret, questionnaire, sshkey, yubikey,
// radius) behind a registry that a Go program can extend; the OTP check with
// an atomic check-and-advance; and the challenge store.
//
// The OTP check is split in two: Verify computes a Match against a snapshot
// of the token outside any transaction (cheap, or a network call for the
// radius type), and Commit applies it inside one store transaction on the
// freshly read record, where the match is checked again against the stored
// counter. Two requests with the same OTP can therefore never both succeed:
// the second Commit sees the advanced counter and fails with ErrReplay.
//
// Package token sits on floor 3: it imports realm, resolver, user, policy,
// notify, store, apierr and the internal helpers.
package token
