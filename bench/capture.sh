#!/usr/bin/env bash
# The capture's overhead: the real PyTorch DDP job (examples/ddp, 2 ranks, Gloo on
# CPU) with and without the shim, runs interleaved; and the shim's cost per call.
# Usage: bench/capture.sh BUILD_DIR > fragment.md
set -euo pipefail
build=$(realpath "$1")
src=$(cd "$(dirname "$0")/.." && pwd)
tw=$build/cli/tensorwire
shim=$build/capture/libtensorwire_capture.so
work=$(mktemp -d /tmp/tw-bench-cap.XXXXXX)
trap 'rm -rf "$work"' EXIT
REPS=${REPS:-5}
ITERS=${ITERS:-30}
PY=/usr/bin/python3
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
spread() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {printf "%s (%s-%s)", v[int((NR+1)/2)], v[1], v[NR]}'; }

# Median iteration time (ms) over both ranks, iterations 5.. (after warm-up).
iteration_ms() {
  $PY - "$1" <<'PY'
import glob, json, sys
t = []
for f in glob.glob(sys.argv[1] + "/rank-*.jsonl"):
    for l in open(f).readlines()[1:]:
        j = json.loads(l)
        if j["iteration"] >= 5:
            t.append((j["end_ns"] - j["start_ns"]) / 1e6)
t.sort()
print(f"{t[len(t)//2]:.2f}")
PY
}

echo "## Capture"
echo
for model in mlp resnet18; do
  plain=() traced=()
  run_plain() {
    rm -rf "$work/p"
    $PY "$src/examples/ddp/launch.py" --nproc 2 --logs "$work/p" -- --model $model --iterations $ITERS > /dev/null
    plain+=("$(iteration_ms "$work/p")")
  }
  run_traced() {
    rm -rf "$work/t" "$work/c"
    "$tw" capture --out "$work/c" --quiet -- $PY "$src/examples/ddp/launch.py" --nproc 2 --logs "$work/t" -- --model $model --iterations $ITERS > /dev/null
    traced+=("$(iteration_ms "$work/t")")
  }
  for ((k = 0; k < REPS; k++)); do
    # Alternate which goes first, so that order effects do not pose as overhead.
    if ((k % 2 == 0)); then run_plain; run_traced; else run_traced; run_plain; fi
  done
  p=$(median "${plain[@]}") t=$(median "${traced[@]}")
  # Is the difference within the spread of either configuration's runs?
  noisy+=("$(printf '%s\n' "${plain[@]}" "${traced[@]}" | awk -v p="$p" -v t="$t" -v n=${#plain[@]} '
    NR <= n {a[NR] = $1} NR > n {b[NR - n] = $1}
    END {lo = a[1]; hi = a[1]; for (i in a) {if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i]}
         d = p - t; if (d < 0) d = -d; print (d < hi - lo) ? "yes" : "no"}')")
  rows+=("| DDP $model, 2 ranks | $(spread "${plain[@]}") ms | $(spread "${traced[@]}") ms | $(/usr/bin/python3 -c "print(f'{($t/$p-1)*100:+.1f}%')") |")
done
echo "The real DDP job of examples/ddp (Gloo on CPU, 2 ranks, batch 8, one thread"
echo "each), median iteration time after 5 warm-up iterations of $ITERS, median of $REPS runs"
echo "alternating with and without \`tensorwire capture\` (shim only: the wire tap is not"
echo "built yet)."
echo
echo "| job | without | with the shim | difference of medians |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
if [[ " ${noisy[*]} " != *" no "* ]]; then
  echo "On this shared 2-core VM the runs without the shim spread wider than the difference"
  echo "between the two medians: the shim's overhead is below what this machine can"
  echo "resolve; the cost per call below bounds it."
else
  echo "For at least one job the difference between the medians exceeds the spread of the"
  echo "runs without the shim: read it as the shim's overhead on this machine."
fi
echo
sends=() writes=() tsends=() twrites=()
for ((k = 0; k < REPS; k++)); do
  read -r s w < <("$build/bench/shim_cost" 200000)
  sends+=("$s") writes+=("$w")
  read -r s w < <(LD_PRELOAD=$shim TW_CAPTURE_DIR=$work "$build/bench/shim_cost" 200000)
  tsends+=("$s") twrites+=("$w")
done
echo "Cost per call (median of $REPS runs of 200000 calls): a 1-byte \`send\` on a loopback"
echo "TCP connection takes $(median "${sends[@]}") ns plainly and $(median "${tsends[@]}") ns traced (the event: two clock"
echo "reads, one enqueue; TCP_INFO at most once a millisecond); \`write\` to /dev/null, not a"
echo "socket, $(median "${writes[@]}") ns plainly and $(median "${twrites[@]}") ns with the shim loaded (one atomic load)."
