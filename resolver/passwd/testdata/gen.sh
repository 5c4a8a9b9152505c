#!/bin/sh
# Regenerates hashes.txt: password hashes for resolvertest.Users made
# independently of the Go code, with Debian's openssl (sha256-crypt and
# sha512-crypt, default 5000 rounds) and perl's crypt(3), i.e. libxcrypt
# (explicit rounds and bcrypt). Format: login TAB password-hash.
set -eu
cd "$(dirname "$0")"
perlcrypt() { perl -e 'print crypt($ARGV[0], $ARGV[1])' "$1" "$2"; }
{
	printf 'alice\t%s\n' "$(openssl passwd -6 -salt Q9xTt3nW2eYcLrAb 'alice-Pw1')"
	printf 'bob\t%s\n' "$(openssl passwd -5 -salt 7Hk2mPq0ZsVbN1xR 'b0b p w%+&=ä')"
	printf 'müller\t%s\n' "$(perlcrypt 'Müller-Pässwort' '$6$rounds=10000$Ms4aLw8QpZ1rTy0u$')"
	printf 'carol.smith\t%s\n' "$(perlcrypt 'c4rol' '$2b$05$J3nQ8vXk1pLr5tYb7wZcEu')"
	# Extra shapes for the password table (password alice-Pw1).
	printf 'sha256-rounds\t%s\n' "$(perlcrypt 'alice-Pw1' '$5$rounds=2000$Rr0unds5alt$')"
	printf 'bcrypt-2y\t%s\n' "$(perlcrypt 'alice-Pw1' '$2y$04$abcdefghijklmnopqrstuu')"
	printf 'bcrypt-2a\t%s\n' "$(perlcrypt 'alice-Pw1' '$2a$04$ABCDEFGHIJKLMNOPQRSTUO')"
} > hashes.txt
