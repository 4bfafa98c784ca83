#!/usr/bin/env bash
# From a fresh Debian 12 machine to the main job: installs the packages, builds
# tensorwire, and runs the whole loop on a bundled real training job: PyTorch DDP
# over Gloo (a small MLP, 2 ranks on loopback) runs unchanged under `tensorwire
# capture`; its traffic profile is built from the capture; a controller and 2
# agents replay it as real TCP traffic; and the replay is held against the
# capture. The headline is the fidelity: how far the replayed iteration times are
# from the job's own.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DTW_TESTS=OFF -DTW_BENCH=OFF > /dev/null
ninja -C build-release > build-release/build.log 2>&1 || { tail -40 build-release/build.log; exit 1; }
tw=build-release/cli/tensorwire
out=${TW_OUT:-runs/quickstart}
ranks=${TW_RANKS:-2}
iterations=${TW_ITERATIONS:-40}
rm -rf "$out/capture" "$out/job" "$out/run"
mkdir -p "$out"
echo "== tensorwire capture: PyTorch DDP over Gloo, MLP, $ranks ranks, $iterations iterations (the job is not changed)"
"$tw" capture --out "$out/capture" -- /usr/bin/python3 examples/ddp/launch.py --nproc "$ranks" --logs "$out/job" --timeout 600 \
  -- --model mlp --iterations "$iterations"
echo
echo "== tensorwire profile build (ranks, flows, iterations, dependencies from the capture alone)"
"$tw" profile build "$out/capture" -o "$out/ddp-mlp-$ranks.yaml"
"$tw" profile validate "$out/ddp-mlp-$ranks.yaml"
echo
echo "== tensorwire run --local $ranks (a controller and $ranks agents, real TCP on loopback)"
"$tw" run "$out/ddp-mlp-$ranks.yaml" --local "$ranks" --out "$out/run" > "$out/run.log" 2>&1 || { cat "$out/run.log"; exit 1; }
sed -n '/iterations: median/,/results in/p' "$out/run.log"
echo
echo "== tensorwire compare (the replay against the capture)"
"$tw" compare "$out/capture" "$out/run" | sed -n '1,10p'
"$tw" compare "$out/capture" "$out/run" --json > "$out/compare.json"
echo
/usr/bin/python3 - "$out/compare.json" <<'PY'
import json, statistics, sys
j = json.load(open(sys.argv[1]))
e, s = j["iteration_error_pct"], j["start_offset_error_ns"]
ref = statistics.median(j["reference_iteration_ns"]) / 1e6
rep = statistics.median(j["replay_iteration_ns"]) / 1e6
print(f"fidelity: the replay's iteration time is {e['p50']:+.1f}% from the captured job's (median over {e['n']} iterations; "
      f"p95 {e['p95']:+.1f}%): {rep:.2f} ms replayed, {ref:.2f} ms captured; "
      f"message starts within the iteration {s['p50'] / 1e3:+.0f} us (p50)")
PY
echo
echo "== tensorwire report and view (the replay against the capture: an HTML report, a Perfetto timeline)"
"$tw" report "$out/run" --against "$out/capture" -o "$out/report.html"
"$tw" view "$out/run" --against "$out/capture" -o "$out/timeline.pftrace"
echo "Binary: $tw   Capture: $out/capture   Profile: $out/ddp-mlp-$ranks.yaml   Run: $out/run"
echo "Report: $out/report.html (open it in a browser)   Timeline: $out/timeline.pftrace (open it in ui.perfetto.dev)"
