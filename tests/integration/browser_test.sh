#!/usr/bin/env bash
# The report in a real browser: Debian's Chromium, headless, driven by
# playwright-core (tests/browser/page_check.cjs). A report of a run against
# another run of the same profile loads with no console error, fetches nothing
# beyond itself, and every chart has data; its numbers are the runs' own
# (results rates). Timelines of the same runs as JSON load too.
# Usage: browser_test.sh TENSORWIRE_BINARY SOURCE_DIR BROWSER_MODULES_DIR
set -u
TW=$(realpath "$1")
SRC=$(realpath "$2")
MODULES=$(realpath "$3")
. "$(dirname "$0")/lib.sh"
cd "$TW_TMP"
PY=/usr/bin/python3
PAGE="node $SRC/tests/browser/page_check.cjs $MODULES"

"$TW" profile synth --model mlp --ranks 3 --iterations 12 -o mlp3.yaml 2> /dev/null
for r in a b; do "$TW" run mlp3.yaml --local 3 --out run-$r --quiet > run-$r.txt 2>&1 || cat run-$r.txt; done

report_in_browser() {
  "$TW" report run-a --against run-b -o report.html 2> report.err || { cat report.err; return 1; }
  $PAGE "file://$TW_TMP/report.html" > page.json || { cat page.json; return 1; }
  "$TW" report run-a --against run-b --json -o report.json || return 1
  "$TW" results rates run-a --json > rates.json || return 1
  $PY - <<'PY'
import json
page = json.load(open("page.json")); data = json.load(open("report.json")); rates = json.load(open("rates.json"))
titles = [c["title"] for c in page["charts"]]
# Every plot the report promises, each drawn with data (page_check fails a chart without).
for want in ["iteration time", "sender (rows) to receiver", "queued in stack", "on the wire", "awaiting ACK", "end to end",
             "ms per iteration", "messages by size", "top flows", "slowest messages"]:
    assert any(want in t for t in titles), (want, titles)
assert page["requests"] == 1, page["requests"]  # the file itself, nothing else
assert sum(c["canvases"] for c in page["charts"]) >= 6
a, b = data["sources"]
assert a["kind"] == b["kind"] == "run" and b["label"] == "run (against)", (a["label"], b["label"])
assert len(a["iterations_ms"]) == 12 and all(x > 0 for x in a["iterations_ms"]), a["iterations_ms"]
assert a["messages"] == sum(f["messages"] for f in rates["flows"]), (a["messages"], rates)
assert a["bytes"] > 0 and len(a["heatmap"]["labels"]) == 3
# Against another run of the same profile: compare's figures are in the report.
assert data["comparison"] and data["comparison"]["iterations"] == 12, data["comparison"]
# Every flow of the run in the heatmap (3 ranks in a ring: 3 pairs), each with a rate.
assert sum(v > 0 for row in a["heatmap"]["gbps"] for v in row) == len(rates["flows"]) == 3, (a["heatmap"], rates["flows"])
assert a["timeline"] and a["timeline"]["items"] and 0 < a["timeline"]["iteration_us"] < 1e6
# The diagnosis of the run, drawn as tables: a row per rank, per host pair, per tensor.
an = data["analysis"]
assert an and an["measured_ns"] > 0 and len(an["stragglers"]) == 3, an
rows = {c["title"].split(":")[0]: c["rows"] for c in page["charts"]}
assert rows.get("stragglers") == 1 + 3 and rows.get("links", 0) >= 2 and rows.get("compression", 0) >= 2, rows
PY
}
check "report: loads in Chromium with no error, fetches nothing, every chart has data, numbers are the run's" report_in_browser

# The live dashboard of a run in progress: it loads with no console error,
# talks only to its own controller, draws iterations as they complete, and
# shows the agent that was killed. A link's rate needs two progress messages
# (every 100 ms), so the agent is killed only once every flow has one: a busy
# machine can draw 3 iterations from the first message alone.
dashboard_live() {
  "$TW" profile synth --model mlp --ranks 3 --iterations 3000 -o long.yaml 2> /dev/null
  "$TW" run long.yaml --local 3 --out live --quiet --dashboard > live.txt 2> live.err &
  local pid=$! url="" i
  for i in $(seq 100); do
    [ -s live/dashboard.url ] && url=$(cat live/dashboard.url) && break
    sleep 0.1
  done
  [ -n "$url" ] || { cat live.err; kill $pid; return 1; }
  # Readable by its owner only; the printed line names the file, not the token.
  [ "$(stat -c %a live/dashboard.url)" = 600 ] || { kill $pid; return 1; }
  ! grep -q "${url#*#token=}" live.err || { echo "the token was printed"; kill $pid; return 1; }
  # Until the end: the run failed, and the controller closed the feed after its last status.
  $PAGE "$url" --allow-origin "${url%/dashboard*}" --wait-state "iterations>=3,links>=3" --kill-agent 1 \
    --then-state "failed_agents>=1,state=failed,closed=true" > dash.json || { cat dash.json; kill $pid; return 1; }
  wait $pid
  [ ! -e live/dashboard.url ] || { echo "the address file outlived the run"; return 1; }
  $PY - <<'PY'
import json
d = json.load(open("dash.json"))
s = d["state"]
titles = {c["title"]: c["points"] for c in d["charts"]}
assert titles["iteration time"] >= 3 and titles["links"] >= 3 and titles["agents"] == 3, titles
killed = [a for a in s["agents"] if a["rank"] == 1]
assert killed and killed[0]["error"], s["agents"]  # the killed agent is shown as failed
assert s["state"] == "failed" and s["closed"], s
PY
}
check "dashboard: live in Chromium, only its own server, iterations drawn as they complete, a killed agent shown" dashboard_live

report_bad_input() {
  ! "$TW" report /nonexistent -o r.html 2> e1 && [ "$(wc -l < e1)" = 1 ] && grep -q /nonexistent e1 || { cat e1; return 1; }
  ! "$TW" report mlp3.yaml -o r.html 2> e2 && [ "$(wc -l < e2)" = 1 ] && grep -q 'no observed timings' e2 || { cat e2; return 1; }
  [ ! -e r.html ]
}
check "report: bad input gets one line naming it, and no file" report_bad_input

finish
