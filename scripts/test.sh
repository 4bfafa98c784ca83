#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script). Each integration
# test runs only under the builds that suit it, not under every build, so that the
# suite fits in 30 minutes on 2 cores:
#   1. dependencies: installs missing packages (scripts/install-deps.sh; a no-op when
#      all are present).
#   2. release: build/ (RelWithDebInfo, every target, benchmarks included): the unit
#      tests; the testbed test and the replay tests that measure timing or memory
#      (the open loop's start error, RSS over 20000 iterations), which check rates and
#      times only an optimised, uninstrumented build delivers; the static deploy
#      checks (python over the Docker and Kubernetes files).
#   3. asan: build-asan/ (Debug -O1, AddressSanitizer + UndefinedBehaviorSanitizer, the
#      whole tree: agent, controller, capture shim, CLI): the unit tests again, and the
#      replay tests, the profile CLI, controller and capture tests, where the memory
#      bugs would be. The capture test preloads the ASan-built shim into
#      /usr/bin/python3 behind the ASan runtime (tests/CMakeLists.txt sets
#      TW_CAPTURE_LIB for it), with leak detection off for python's own leaks.
#   4. tsan: build-tsan/ (Debug -O1, ThreadSanitizer, only tensorwire, replay_tests
#      and unit_tests): the replay tests and the controller test, the code with threads
#      (agent io and recorder threads, the control client and its agent thread), and
#      the unit tests of parallel_for and of the diagnosis's what-ifs on several
#      threads; tests/tsan.supp lists each suppression and why it is not our bug.
#   5. fuzz: build-fuzz/ (clang, libFuzzer): the profile loader and its observed
#      sidecar, the frame and framing decoders, run directories (summary and records), capture directories
#      (trace, pcap, Chrome trace) and the control messages, for TW_FUZZ_SECONDS
#      (default 60) in all, each seeded from tests/fuzz/corpus/NAME/.
# Debug -O1 for the sanitizer builds: -O0 runs the PyTorch and controller tests too
# slowly. Integration tests run one at a time (they share loopback with the capture's
# wire tap, and their timeouts); unit tests run TW_JOBS (default 2) at a time. Every
# sanitizer report of any process is written to BUILD/sanitizer/ and counts as a
# failure (agents started over ssh report on their stderr, which fails their test).
# Build logs stay in their build directory (BUILD/configure.log, BUILD/build.log):
# the suite writes only into build*/ and mktemp directories, and leaves `git status`
# clean. Uses ccache when it is installed.
# Ends with the duration of each stage and one line "tests: N passed, M failed"; exits
# non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
fuzz_seconds=${TW_FUZZ_SECONDS:-60}
jobs=${TW_JOBS:-2}
passed=0
failed=0
failures=()
durations=()
launcher=()
# ccache keys on paths relative to the tree and not on the working directory, so
# that a fresh clone elsewhere (CI's) reuses what an earlier build compiled.
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1
fi
# The annotation module is imported from the source tree: no __pycache__ there.
export PYTHONDONTWRITEBYTECODE=1

stage_name=""
stage_t0=0
stage() {
  stage_end
  stage_name=$1
  stage_t0=$SECONDS
  shift
  printf '\n== %s\n' "$*"
}
stage_end() {
  [ -n "$stage_name" ] || return 0
  local s=$((SECONDS - stage_t0))
  durations+=("$(printf '%-13s %3dm%02ds' "$stage_name" $((s / 60)) $((s % 60)))")
  stage_name=""
}
fail() {
  failed=$((failed + 1))
  failures+=("$1")
}

# ctest_count DIR ARGS...: runs ctest and adds its counts to the totals.
ctest_count() {
  local dir=$1
  shift
  local log
  log=$(mktemp)
  ctest --test-dir "$dir" --output-on-failure --no-tests=error "$@" 2>&1 | tee "$log"
  local line
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [ -z "$line" ]; then
    fail "ctest in $dir did not run"
  else
    local f t
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
    t=$(echo "$line" | sed -E 's/.* failed out of ([0-9]+).*/\1/')
    passed=$((passed + t - f))
    failed=$((failed + f))
    [ "$f" -eq 0 ] || failures+=("$f test(s) in $dir")
  fi
  rm -f "$log"
}

# build DIR TARGETS CMAKE_ARGS...: configures and builds TARGETS ("all" for every one),
# logging into DIR/configure.log and DIR/build.log.
build() {
  local dir=$1 targets=$2
  shift 2
  mkdir -p "$dir"
  cmake -S "$root" -B "$dir" -G Ninja "${launcher[@]}" "$@" > "$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; return 1; }
  # shellcheck disable=SC2086  # TARGETS is a list
  ninja -C "$dir" -j "$jobs" $targets > "$dir/build.log" 2>&1 || { tail -50 "$dir/build.log"; return 1; }
}

# sanitizer_reports DIR: every report a sanitized process wrote is a failure.
sanitizer_reports() {
  local dir=$1/sanitizer r
  for r in "$dir"/*; do
    [ -s "$r" ] || continue
    echo "-- sanitizer report $r:"
    head -80 "$r"
    fail "sanitizer report ${r#"$root"/}"
  done
}
# fresh_reports DIR: an empty DIR/sanitizer/ for this run's reports.
fresh_reports() {
  rm -rf "$1/sanitizer"
  mkdir -p "$1/sanitizer"
}

stage dependencies "dependencies"
bash scripts/install-deps.sh || { echo "tests: 0 passed, 1 failed"; exit 1; }

# replay_tests that measure timing or memory (the open loop's start error, RSS over
# 20000 iterations): meaningful only in the optimised build, where they run; a
# sanitizer's instrumentation and shadow memory would fail them, not the product.
measuring='^Replay\.(OpenLoopKeepsTheOriginalSpacing|MemoryStaysFlatOverManyIterations)$'
stage release "build and test (RelWithDebInfo): unit tests, testbed, deploy checks, pages in a browser"
if build build all -DCMAKE_BUILD_TYPE=RelWithDebInfo; then
  ctest_count build -j "$jobs" -L '^(unit|integration-(testbed|deploy|browser))$'
  ctest_count build -R "$measuring"
else
  fail "build"
fi

# Debug with -O1: sanitizer builds at -O0 run the PyTorch and controller tests too slowly;
# -g1 keeps the line tables sanitizer reports need and compiles faster than -g.
sanitizer_flags=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g1 -O1" -DTW_BENCH=OFF)

stage asan "AddressSanitizer + UndefinedBehaviorSanitizer: unit, replay, profile CLI, controller, capture tests"
if build build-asan all "${sanitizer_flags[@]}" -DTW_SANITIZE=ON -DTW_TSAN=OFF; then
  fresh_reports build-asan
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:log_path=$root/build-asan/sanitizer/asan
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$root/build-asan/sanitizer/ubsan
  ctest_count build-asan -j "$jobs" -L '^unit$'
  # One integration test at a time: they share loopback with the capture's wire
  # tap on every interface, and timeouts that 2 busy cores would stretch.
  ctest_count build-asan -L '^integration-(replay|profile|capture)$' -E "$measuring"
  ctest_count build-asan -L '^integration-controller$'
  unset ASAN_OPTIONS UBSAN_OPTIONS
  sanitizer_reports build-asan
else
  fail "AddressSanitizer build"
fi

stage tsan "ThreadSanitizer: replay and controller tests, the parallel what-ifs"
if build build-tsan "tensorwire replay_tests unit_tests" "${sanitizer_flags[@]}" -DTW_TSAN=ON -DTW_SANITIZE=OFF; then
  fresh_reports build-tsan
  # A report neither stops nor changes the exit status of the process; each report
  # file is counted below instead, so every race is listed, not only the first.
  export TSAN_OPTIONS=halt_on_error=0:exitcode=0:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp:log_path=$root/build-tsan/sanitizer/tsan
  ctest_count build-tsan -L '^integration-replay$' -E "$measuring"
  ctest_count build-tsan -L '^integration-controller$'
  ctest_count build-tsan -j "$jobs" -R '^(ParallelFor\.|Diagnosis\.TheWhatIfs)'
  unset TSAN_OPTIONS
  sanitizer_reports build-tsan
else
  fail "ThreadSanitizer build"
fi

stage fuzz "fuzzing the profile loader and its sidecar, the frame and framing decoders, run directories, captures and control messages for ${fuzz_seconds}s"
if CXX=clang++ build build-fuzz all -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTW_FUZZ=ON -DTW_ONLY_PURE=ON -DTW_TESTS=OFF \
  -DTW_BENCH=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"; then
  targets=$(grep -vE '^(#|$)' tests/fuzz/targets.txt)
  shares=$(awk '{s += $2} END {print s}' <<< "$targets")
  while read -r spec; do
    set -- $spec
    name=$1
    seconds=$((fuzz_seconds * $2 / shares))
    [ "$seconds" -ge 1 ] || seconds=1
    shift 2
    corpus=$(mktemp -d)
    # Seeds from real files (tests/fuzz/corpus/NAME/), where the target has them.
    [ -d "tests/fuzz/corpus/${name%_fuzz}" ] && cp "tests/fuzz/corpus/${name%_fuzz}"/* "$corpus/"
    if timeout $((seconds + 120)) "build-fuzz/tests/fuzz/$name" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
      -rss_limit_mb=2048 "$@" -artifact_prefix="$root/build-fuzz/$name-" "$corpus" > "build-fuzz/$name.log" 2>&1; then
      passed=$((passed + 1))
      echo "$name: $(grep -E '^Done [0-9]+ runs' "build-fuzz/$name.log")"
    else
      tail -40 "build-fuzz/$name.log"
      fail "$name (input saved in build-fuzz/)"
    fi
    rm -rf "$corpus"
  done <<< "$targets"
else
  fail "fuzzer build"
fi
stage_end

echo
echo "stage durations:"
for d in "${durations[@]}"; do echo "  $d"; done
printf '  %-13s %3dm%02ds\n' total $((SECONDS / 60)) $((SECONDS % 60))
for f in "${failures[@]}"; do echo "failed: $f"; done
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
