#!/usr/bin/env bash
# Catalogue row L6, the soak (shared/spec/reliability.md section 5): L1's
# request (a pw token, otppin=none, 50 clients) at 30 % of the maximum rate
# measured first, for DURATION, against an authsrv it starts on 127.0.0.1
# with a new data directory. Every SAMPLE it records the server's RSS,
# open descriptors, threads and store size in a CSV file; after the
# warm-up it fits a line through each series and fails when RSS, the
# descriptors or the threads rise clearly. Only 200s, as in L1. The
# server runs with an audit retention (authsrv serve -audit-max-entries,
# -audit-cleanup-interval): the row checks that every request left its
# audit entry, that the retention ran (the log holds at most
# AUDIT_MAX_ENTRIES entries and its oldest entry moved) and that the store's
# file stops growing once bbolt reuses the freed pages.
#
#   scripts/soak.sh [DURATION]          e.g. scripts/soak.sh 2m, scripts/soak.sh 8h
#
# DURATION defaults to 60m. Environment:
#   SAMPLE       interval between samples (default 10s)
#   WARMUP       samples before it are left out of the slopes (default DURATION/5, 10s to 10m)
#   RESULTS      file the figures are appended to (default soak-results.txt)
#   CSV          the samples (default soak-<time>.csv)
#   BOUNDS       catalogue (default) or ci
#   SERVER_ARGS  extra arguments for "authsrv serve", split on spaces
#   AUDIT_MAX_ENTRIES       audit entries the server keeps (default 50000;
#                           0: no retention, every entry is kept and counted)
#   AUDIT_CLEANUP_INTERVAL  how often the retention runs (default 10s)
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-60m}
sample=${SAMPLE:-10s}
results=${RESULTS:-soak-results.txt}
csv=${CSV:-soak-$(date -u +%Y%m%dT%H%M%SZ).csv}
bounds=${BOUNDS:-catalogue}

if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then
	export PATH="/usr/local/go/bin:$PATH"
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/authsrv" ./cmd/authsrv
go build -o "$bin/authbench" ./cmd/authbench

args=(catalogue -row L6 -server "$bin/authsrv" -bounds "$bounds" -duration "$duration" -sample "$sample" -csv "$csv"
	-audit-max-entries "${AUDIT_MAX_ENTRIES:-50000}" -audit-cleanup-interval "${AUDIT_CLEANUP_INTERVAL:-10s}")
[ -n "${WARMUP:-}" ] && args+=(-warmup "$WARMUP")
for a in ${SERVER_ARGS:-}; do args+=("-server-arg=$a"); done

echo "== soak $(date -u +%FT%TZ), $(nproc) CPUs, $duration, a sample every $sample into $csv" | tee -a "$results"
"$bin/authbench" "${args[@]}" | tee -a "$results"
