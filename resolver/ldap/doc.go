// Package ldap is the LDAP user store ("ldapresolver"): users live in an
// LDAP directory (OpenLDAP, 389-DS, Active Directory, ...) and are looked
// up, listed, checked (by binding as the user) and, when EDITABLE is set,
// created, changed and deleted there.
//
// The package owns the mapping of privacyIDEA's ldapresolver configuration
// (admin-config 3.2) onto go-ldap: server pool with failover, pooled
// service connections, TLS, filters and DNs. It sits on floor 2 and
// imports only resolver, apierr and netguard from authsrv; it never serves
// HTTP. Every connection goes through the dial policy of resolver.Env
// (Env.Dial), and a refused server is named in the test's answer. The
// per-resolver user cache (CACHE_TIMEOUT) is the service's: this package
// only reports the configured lifetime through Type().CacheTimeout.
//
// # Safety rules
//
//   - Every value placed in a filter goes through go-ldap's EscapeFilter;
//     wildcard searches escape each piece and join them with "*", with runs
//     of "*" collapsed. Every value placed in a DN goes through EscapeDN.
//   - Login names match exactly, ignoring case only: the directory may
//     fold spaces ("ALICE " matches "alice" in slapd) but the answer is
//     checked again here.
//   - An empty password is refused before any bind (reliability A7).
//   - Each call has one time budget, TIMEOUT (default 5 s) or the
//     context's deadline if that is earlier, covering dial, TLS, bind and
//     the operation; cancelling the context aborts the call. Referrals are
//     never followed. Certificates are verified unless TLS_VERIFY is
//     explicitly false.
//   - Passwords and the bind password are never logged nor put into
//     errors.
//
// # Differences from privacyIDEA
//
//   - TLS_VERIFY defaults to true (privacyIDEA: false); the CA comes from
//     TLS_CA_FILE and/or CACERTIFICATE (PEM), else the system roots.
//   - MULTIVALUEATTRIBUTES defaults to none (privacyIDEA: ["mobile"]).
//   - USERINFO and MULTIVALUEATTRIBUTES are JSON (privacyIDEA also reads
//     YAML); MULTIVALUEATTRIBUTES may also be a comma list.
//   - AUTHTYPE SASL Digest-MD5, NTLM and SASL Kerberos are refused as not
//     supported.
//   - LDAPFILTER, NOSCHEMAS, SERVERPOOL_ROUNDS and SERVERPOOL_PERSISTENT
//     are accepted and unused; the group search keys are stored but not
//     implemented. NOREFERRALS is accepted: referrals are never chased.
//   - A login that matches several entries is an error, not the first.
//   - Created users get cn and sn filled from the names when the object
//     classes need them and USERINFO maps neither, and the RDN value is
//     added to the entry.
package ldap
