#!/usr/bin/env bash
# Runs benchmarks and regenerates docs/BENCHMARKS.md from their fragments.
#   bench/run.sh            run every benchmark
#   bench/run.sh NAME...    run only these (others keep their last fragment)
# Each benchmark prints a Markdown fragment into bench/results/NAME.md; the page is
# those fragments under a header that says on which machine they were measured.
# A benchmark starts only on a quiet machine: it waits up to 5 minutes for the
# 1-minute load average to fall to TW_BENCH_MAX_LOAD (default 0.5), then refuses
# to run; TW_BENCH_FORCE=1 runs it anyway and marks its fragment in bold. The load
# average before and after each benchmark goes into its fragment.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
max_load=${TW_BENCH_MAX_LOAD:-0.5}
build=${BUILD_DIR:-build-bench}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTW_TESTS=OFF -DTW_BENCH=ON >/dev/null
ninja -C "$build" > "$build/bench-build.log" 2>&1 || { tail -30 "$build/bench-build.log"; exit 1; }

all=(profile_load profile_build view chrome_import sim dataplane flows naps shared_cores controller setup testbed capture)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${all[@]}")
machine() {
  echo "Measured $(date -u +%Y-%m-%d) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
    "$(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr)."
}

for name in "${names[@]}"; do
  out=bench/results/$name.md
  # A shared machine slows the baselines as much as us: wait for a quiet one, and
  # say how quiet it was.
  noisy=""
  if ! wait_quiet "$max_load" 300; then
    if [ "${TW_BENCH_FORCE:-0}" != 1 ]; then
      echo "bench: $name not run: the load average is $(load1), above $max_load (stop what else runs, or TW_BENCH_FORCE=1)" >&2
      exit 1
    fi
    noisy="**Not a quiet machine: the load average was above $max_load when this started; the figures are not comparable.**"
  fi
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  case "$name" in
    profile_load) "$build/bench/profile_load_bench" 40 5 > "$out.new" ;;
    profile_build) "$build/bench/profile_build_bench" 1000000 4 3 > "$out.new" ;;
    view) "$build/bench/view_bench" 1000000 4 3 > "$out.new" ;;
    chrome_import) "$build/bench/chrome_import_bench" 250000 3 > "$out.new" ;;
    sim) "$build/bench/sim_bench" 3 > "$out.new" ;;
    dataplane) bash bench/dataplane.sh "$build" > "$out.new" ;;
    flows) bash bench/flows.sh "$build" > "$out.new" ;;
    naps) bash bench/naps.sh "$build" > "$out.new" ;;
    shared_cores) bash bench/shared_cores.sh "$build" > "$out.new" ;;
    controller) bash bench/controller.sh "$build" > "$out.new" ;;
    setup) "$build/bench/setup_bench" 5 > "$out.new" ;;
    testbed) bash bench/testbed.sh "$build" > "$out.new" ;;
    capture) bash bench/capture.sh "$build" > "$out.new" ;;
    *) echo "unknown benchmark: $name (known: ${all[*]})" >&2; exit 2 ;;
  esac
  { cat "$out.new"; echo; machine; echo "Load average (1, 5, 15 min) when it started: $load; when it ended: $(cut -d' ' -f1-3 /proc/loadavg)."
    [ -z "$noisy" ] || { echo; echo "$noisy"; }; } > "$out"
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
