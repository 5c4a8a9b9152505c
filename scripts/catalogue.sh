#!/usr/bin/env bash
# The long runs of the reliability catalogue's load and fault rows
# (shared/spec/reliability.md section 5) with the catalogue's bounds:
# L1, L4, L5, L7 (each load phase DURATION long), F2 (CYCLES kill -9
# cycles, each after 3 to 10 s of admin writes) and S4 (the timing of the
# refusal paths of /validate/check, 200 requests per path). Every row starts its own
# authsrv on 127.0.0.1 with a new data directory.
#
#   scripts/catalogue.sh [DURATION] [ROW...]     e.g. scripts/catalogue.sh 60s
#
# DURATION defaults to 60s; ROWs default to L1 L4 L5 L7 F2 S4. Environment:
#   RESULTS      file the figures are appended to (default catalogue-results.txt)
#   CYCLES       F2's kill cycles (default 20)
#   SLOW         L7's slow connections (default 500)
#   BOUNDS       catalogue (default) or ci
#   SERVER_ARGS  extra arguments for "authsrv serve", split on spaces
#                (e.g. "-allow-dial=127.0.0.0/8" where loopback SMTP needs it)
# The exit status is 1 when any row failed a property; each row's verdict
# and figures are in RESULTS either way.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-60s}
[ $# -gt 0 ] && shift
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(L1 L4 L5 L7 F2 S4)
results=${RESULTS:-catalogue-results.txt}
cycles=${CYCLES:-20}
slow=${SLOW:-500}
bounds=${BOUNDS:-catalogue}

if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/authsrv" ./cmd/authsrv
go build -o "$bin/authbench" ./cmd/authbench

server_args=()
for a in ${SERVER_ARGS:-}; do server_args+=("-server-arg=$a"); done

echo "== catalogue run $(date -u +%FT%TZ), $(nproc) CPUs, load phases of $duration, bounds $bounds" | tee -a "$results"
failed=()
for row in "${rows[@]}"; do
	args=(catalogue -row "$row" -server "$bin/authsrv" -bounds "$bounds" "${server_args[@]}")
	case "$row" in
	L1 | L4 | L5) args+=(-duration "$duration") ;;
	L7) args+=(-duration "$duration" -slow "$slow") ;;
	F2) args+=(-cycles "$cycles" -kill-min 3s -kill-max 10s) ;;
	S4) ;;
	*)
		echo "unknown row $row (want L1, L4, L5, L7, F2 or S4; L6 is scripts/soak.sh)" >&2
		exit 2
		;;
	esac
	echo "-- $row" >&2
	if ! "$bin/authbench" "${args[@]}" | tee -a "$results"; then
		failed+=("$row")
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "FAILED rows: ${failed[*]} (figures in $results)" | tee -a "$results"
	exit 1
fi
echo "all rows passed (figures in $results)" | tee -a "$results"
