#!/bin/bash
# Regenerates hashes.jsonl: known-answer fixtures for the SQL resolver's
# password formats, made by tools independent of our Go code.
#
#   apt-get install -y openssl whois python3-passlib   # whois ships mkpasswd
#   bash testdata/gen-hashes.sh > testdata/hashes.jsonl
#
# Tools: OpenSSL 3.0 `openssl passwd` ($1$ $5$ $6$), Debian's mkpasswd from
# whois 5.5 on libxcrypt ($1$ $5$ $6$ $2b$ $2a$), passlib 1.7.4 (phpass,
# LDAP digests, sha*_crypt with rounds, bcrypt $2y$), and Python's hashlib
# (OTRS hex SHA-256, {SSHA256} with a 32-byte salt, and Drupal 7 $S$ from a
# transcription of Drupal's _password_crypt in gen_drupal below, since
# passlib has no Drupal handler). Each line: scheme, password, hash, tool.
set -euo pipefail
PY=/usr/bin/python3

# Passwords: the conformance population's (spaces, %, +, &, =, umlauts).
passwords=("alice-Pw1" "b0b p w%+&=ä" "Müller-Pässwort" "c4rol")

emit() { # scheme password hash tool
	"$PY" -c 'import json,sys; print(json.dumps({"scheme":sys.argv[1],"password":sys.argv[2],"hash":sys.argv[3],"tool":sys.argv[4]}, ensure_ascii=False))' "$@"
}

for pw in "${passwords[@]}"; do
	emit md5crypt "$pw" "$(printf '%s' "$pw" | openssl passwd -1 -stdin)" "openssl passwd -1"
	emit sha256crypt "$pw" "$(printf '%s' "$pw" | openssl passwd -5 -stdin)" "openssl passwd -5"
	emit sha512crypt "$pw" "$(printf '%s' "$pw" | openssl passwd -6 -stdin)" "openssl passwd -6"
	emit md5crypt "$pw" "$(printf '%s' "$pw" | mkpasswd -s -m md5crypt)" "mkpasswd -m md5crypt"
	emit sha256crypt "$pw" "$(printf '%s' "$pw" | mkpasswd -s -m sha256crypt -R 12000)" "mkpasswd -m sha256crypt -R 12000"
	emit sha512crypt "$pw" "$(printf '%s' "$pw" | mkpasswd -s -m sha512crypt)" "mkpasswd -m sha512crypt"
	emit bcrypt "$pw" "$(printf '%s' "$pw" | mkpasswd -s -m bcrypt -R 5)" "mkpasswd -m bcrypt -R 5"
	emit bcrypt "$pw" "$(printf '%s' "$pw" | mkpasswd -s -m bcrypt-a -R 5)" "mkpasswd -m bcrypt-a -R 5"
done

"$PY" - "${passwords[@]}" <<'PYEOF'
import hashlib, json, os, sys
from passlib import hash as ph

def emit(scheme, pw, h, tool):
    print(json.dumps({"scheme": scheme, "password": pw, "hash": h, "tool": tool}, ensure_ascii=False))

ITOA64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

def b64_drupal(data, count):
    # Drupal 7 includes/password.inc _password_base64_encode
    out, i = "", 0
    while True:
        value = data[i]; i += 1
        out += ITOA64[value & 0x3f]
        if i < count: value |= data[i] << 8
        out += ITOA64[(value >> 6) & 0x3f]
        if i >= count: break
        i += 1
        if i < count: value |= data[i] << 16
        out += ITOA64[(value >> 12) & 0x3f]
        if i >= count: break
        i += 1
        out += ITOA64[(value >> 18) & 0x3f]
        if i >= count: break
    return out

def gen_drupal(pw, log2=15):
    # Drupal 7 _password_crypt('sha512', ...), cut to DRUPAL_HASH_LENGTH 55
    salt = "".join(ITOA64[b & 0x3f] for b in os.urandom(8))
    setting = "$S$" + ITOA64[log2] + salt
    p = pw.encode()
    h = hashlib.sha512(salt.encode() + p).digest()
    for _ in range(1 << log2):
        h = hashlib.sha512(h + p).digest()
    return (setting + b64_drupal(h, len(h)))[:55]

for pw in sys.argv[1:]:
    b = pw.encode()
    emit("phpass", pw, ph.phpass.using(rounds=13).hash(pw), "passlib phpass rounds=13 (WordPress $P$B)")
    emit("phpass", pw, ph.phpass.using(ident="H", rounds=11).hash(pw), "passlib phpass ident=H rounds=11")
    emit("drupal", pw, gen_drupal(pw), "python hashlib (Drupal 7 _password_crypt transcription)")
    emit("sha", pw, ph.ldap_sha1.hash(pw), "passlib ldap_sha1")
    emit("ssha", pw, ph.ldap_salted_sha1.hash(pw), "passlib ldap_salted_sha1")
    emit("ssha256", pw, ph.ldap_salted_sha256.hash(pw), "passlib ldap_salted_sha256")
    emit("ssha512", pw, ph.ldap_salted_sha512.hash(pw), "passlib ldap_salted_sha512")
    salt = os.urandom(32)
    import base64
    emit("ssha256", pw, "{SSHA256}" + base64.b64encode(hashlib.sha256(b + salt).digest() + salt).decode(),
         "python hashlib, 32-byte salt")
    emit("ssha512", pw, "{ssha512}" + base64.b64encode(hashlib.sha512(b + salt[:8]).digest() + salt[:8]).decode(),
         "python hashlib, lower-case scheme")
    emit("otrs", pw, hashlib.sha256(b).hexdigest(), "python hashlib sha256 hex")
    emit("otrs", pw, "1|" + hashlib.sha256(b).hexdigest().upper(), "python hashlib sha256 HEX with 1| prefix")
    emit("sha256crypt", pw, ph.sha256_crypt.using(rounds=1000).hash(pw), "passlib sha256_crypt rounds=1000")
    emit("sha512crypt", pw, ph.sha512_crypt.using(rounds=20000).hash(pw), "passlib sha512_crypt rounds=20000")
    emit("md5crypt", pw, ph.md5_crypt.hash(pw), "passlib md5_crypt")
    emit("bcrypt", pw, ph.bcrypt.using(ident="2y", rounds=5).hash(pw), "passlib bcrypt ident=2y rounds=5")
    emit("bcrypt", pw, ph.bcrypt.using(ident="2b", rounds=5).hash(pw), "passlib bcrypt ident=2b rounds=5")
PYEOF
