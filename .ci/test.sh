#!/usr/bin/env bash
# The whole test suite: installs the Debian packages the tests need when
# they are missing, then runs the go.mod tidiness check, go vet, the gofmt
# check, the dependency-advisory check (catalogue row S12) and go test
# -race.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages that tests start as real services on loopback:
# OpenLDAP for the LDAP resolver, PostgreSQL for the SQL resolver,
# FreeRADIUS for the RADIUS client, OpenSSH's sshd for the ssh-keys command,
# systemd for systemd-analyze verify of the service unit, curl for the
# README's walkthrough.
packages=(slapd ldap-utils postgresql openssl freeradius freeradius-utils openssh-server systemd curl)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	echo "installing: ${missing[*]}"
	# slapd: no configuration of its own; the tests write theirs.
	echo "slapd slapd/no_configuration boolean true" | $sudo debconf-set-selections
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi

echo "== go mod tidy"
# -diff changes nothing and exits non-zero when go.mod or go.sum is untidy.
if ! go mod tidy -diff; then
	echo "go.mod or go.sum is not tidy: run go mod tidy and commit the result"
	exit 1
fi
echo "== go vet"
go vet ./...
echo "== gofmt"
unformatted=$(gofmt -l . | grep -v '^vendor/' || true)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"
	echo "$unformatted"
	exit 1
fi
echo "== S12 dependency advisories (govulncheck)"
# Catalogue row S12: no known-affected symbol of a dependency or of the
# standard library is reachable. The check needs the Go vulnerability
# database; where it cannot be reached it says so and goes on (it is not
# a failure, and it is never silently skipped).
govulncheck_version=v1.9.0
vulndb=${GOVULNDB:-https://vuln.go.dev}
vulndb_reachable() {
	if command -v curl >/dev/null; then
		curl -fsS --max-time 15 -o /dev/null "$vulndb/index/db.json" 2>/dev/null
	else
		local host=${vulndb#*://}
		host=${host%%/*}
		timeout 15 bash -c "exec 3<>/dev/tcp/$host/443" 2>/dev/null
	fi
}
if vulndb_reachable; then
	go run "golang.org/x/vuln/cmd/govulncheck@$govulncheck_version" -db "$vulndb" ./...
else
	echo "S12 dependency advisory check did NOT run: ${vulndb#*://} unreachable"
fi
echo "== go test -race"
go test -race -count=1 -timeout 14m ./...
