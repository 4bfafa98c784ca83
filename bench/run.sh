#!/usr/bin/env bash
# Runs benchmarks and regenerates docs/BENCHMARKS.md from their fragments.
#   bench/run.sh            run every benchmark
#   bench/run.sh NAME...    run only these (others keep their last fragment)
# Each benchmark prints a Markdown fragment into bench/results/NAME.md; the page is
# those fragments under a header that says on which machine they were measured.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTW_TESTS=OFF -DTW_BENCH=ON >/dev/null
ninja -C "$build" > "$build/bench-build.log" 2>&1 || { tail -30 "$build/bench-build.log"; exit 1; }

all=(profile_load profile_build view sim dataplane controller testbed capture)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${all[@]}")
machine() {
  echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
    "$(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr)."
}

for name in "${names[@]}"; do
  out=bench/results/$name.md
  # A shared machine slows the baselines as much as us: say how quiet it was.
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  case "$name" in
    profile_load) "$build/bench/profile_load_bench" 40 5 > "$out.new" ;;
    profile_build) "$build/bench/profile_build_bench" 1000000 4 3 > "$out.new" ;;
    view) "$build/bench/view_bench" 1000000 4 3 > "$out.new" ;;
    sim) "$build/bench/sim_bench" 3 > "$out.new" ;;
    dataplane) bash bench/dataplane.sh "$build" > "$out.new" ;;
    controller) bash bench/controller.sh "$build" > "$out.new" ;;
    testbed) bash bench/testbed.sh "$build" > "$out.new" ;;
    capture) bash bench/capture.sh "$build" > "$out.new" ;;
    *) echo "unknown benchmark: $name (known: ${all[*]})" >&2; exit 2 ;;
  esac
  { cat "$out.new"; echo; machine; echo "Load average (1, 5, 15 min) when it started: $load."; } > "$out"
  rm -f "$out.new"
  echo "bench: $name done"
done

{
  echo "# Benchmarks"
  echo
  echo "Regenerate with \`bench/run.sh [NAME...]\`. Every figure stands next to its baseline,"
  echo "measured in the same run on the same machine; each section says when and where."
  for name in "${all[@]}"; do
    [ -f "bench/results/$name.md" ] || continue
    echo
    cat "bench/results/$name.md"
  done
} > docs/BENCHMARKS.md
echo "bench: wrote docs/BENCHMARKS.md"
