#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script):
#   1. installs missing packages (scripts/install-deps.sh; a no-op when all are present),
#   2. builds and runs every unit and integration test (ctest),
#   3. rebuilds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer and runs them,
#   4. fuzzes the profile loader and the frame decoder with libFuzzer for TW_FUZZ_SECONDS (default 60).
# Ends with one line "tests: N passed, M failed"; exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
fuzz_seconds=${TW_FUZZ_SECONDS:-60}
passed=0
failed=0
failures=()

step() { printf '\n== %s\n' "$*"; }

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
    failed=$((failed + 1))
    failures+=("ctest in $dir did not run")
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

build() {
  local dir=$1
  shift
  cmake -S "$root" -B "$dir" -G Ninja "$@" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; return 1; }
  ninja -C "$dir" > "$dir.build.log" 2>&1 || { tail -50 "$dir.build.log"; return 1; }
}

step "dependencies"
bash scripts/install-deps.sh || { echo "tests: 0 passed, 1 failed"; exit 1; }

step "build and test (RelWithDebInfo)"
if build build -DCMAKE_BUILD_TYPE=RelWithDebInfo; then
  ctest_count build
else
  failed=$((failed + 1))
  failures+=("build")
fi

step "unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
if build build-asan -DCMAKE_BUILD_TYPE=Debug -DTW_SANITIZE=ON -DTW_ONLY_PURE=ON -DTW_BENCH=OFF; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest_count build-asan -L unit
else
  failed=$((failed + 1))
  failures+=("sanitizer build")
fi

step "fuzzing the profile loader and the frame decoder for ${fuzz_seconds}s"
if CXX=clang++ build build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTW_FUZZ=ON -DTW_ONLY_PURE=ON -DTW_TESTS=OFF \
  -DTW_BENCH=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"; then
  # name, share of the time, dictionary
  for spec in "profile_fuzz 3 -dict=tests/fuzz/profile.dict" "frame_fuzz 1"; do
    set -- $spec
    name=$1
    seconds=$((fuzz_seconds * $2 / 4))
    [ "$seconds" -ge 1 ] || seconds=1
    shift 2
    corpus=$(mktemp -d)
    [ "$name" = profile_fuzz ] && cp tests/fuzz/corpus/* "$corpus/"
    if timeout $((seconds + 120)) "build-fuzz/tests/fuzz/$name" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
      -rss_limit_mb=2048 "$@" -artifact_prefix="$root/build-fuzz/$name-" "$corpus" > "build-fuzz/$name.log" 2>&1; then
      passed=$((passed + 1))
      echo "$name: $(grep -E '^Done [0-9]+ runs' "build-fuzz/$name.log")"
    else
      tail -40 "build-fuzz/$name.log"
      failed=$((failed + 1))
      failures+=("$name (input saved in build-fuzz/)")
    fi
    rm -rf "$corpus"
  done
else
  failed=$((failed + 1))
  failures+=("fuzzer build")
fi

echo
for f in "${failures[@]}"; do echo "failed: $f"; done
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
