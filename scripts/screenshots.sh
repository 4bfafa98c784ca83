#!/usr/bin/env bash
# The screenshots in docs/images/ (shown in README.md), taken in Debian's
# Chromium through tests/browser/page_check.cjs, which also checks each page as
# the tests do: the report of a run against its capture, its one-iteration
# timeline, and the live dashboard of a run in progress. (Perfetto's UI, which
# draws `tensorwire view`'s files, is a web site: not reachable from an offline
# machine.) Needs a build (build/) with its browser modules.
#   scripts/screenshots.sh [RUN_DIR CAPTURE_DIR...]   (default: runs/quickstart's, from scripts/quickstart.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
tw=build/cli/tensorwire
modules=build/tests/browser/node_modules
run=${1:-runs/quickstart/run}
shift || true
captures=("$@")
[ ${#captures[@]} -gt 0 ] || captures=(runs/quickstart/capture)
mkdir -p docs/images
tmp=$(mktemp -d)  # absolute
trap 'rm -rf "$tmp"' EXIT

"$tw" report "$run" --against "${captures[@]}" -o "$tmp/report.html"
node tests/browser/page_check.cjs "$modules" "file://$tmp/report.html" --screenshot docs/images/report.png \
  --chart-shot "run: one iteration" docs/images/timeline.png > /dev/null

"$tw" profile synth --model mlp --ranks 4 --iterations 4000 -o "$tmp/live.yaml" 2> /dev/null
"$tw" run "$tmp/live.yaml" --local 4 --out "$tmp/live" --quiet --dashboard > /dev/null 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/live/dashboard.url" ] && break; sleep 0.1; done
url=$(cat "$tmp/live/dashboard.url")
node tests/browser/page_check.cjs "$modules" "$url" --allow-origin "${url%/dashboard*}" --wait-state "iterations>=60" \
  --screenshot docs/images/dashboard.png > /dev/null
kill "$pid" 2> /dev/null || true
wait "$pid" 2> /dev/null || true
echo "screenshots: docs/images/report.png docs/images/timeline.png docs/images/dashboard.png"
