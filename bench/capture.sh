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
  for ((k = 0; k < REPS; k++)); do
    rm -rf "$work/p" "$work/t" "$work/c"
    $PY "$src/examples/ddp/launch.py" --nproc 2 --logs "$work/p" -- --model $model --iterations $ITERS > /dev/null
    plain+=("$(iteration_ms "$work/p")")
    "$tw" capture --out "$work/c" --quiet -- $PY "$src/examples/ddp/launch.py" --nproc 2 --logs "$work/t" -- --model $model --iterations $ITERS > /dev/null
    traced+=("$(iteration_ms "$work/t")")
  done
  p=$(median "${plain[@]}") t=$(median "${traced[@]}")
  rows+=("| DDP $model, 2 ranks | $p ms | $t ms | $(/usr/bin/python3 -c "print(f'{($t/$p-1)*100:+.1f}%')") |")
done
echo "The real DDP job of examples/ddp (Gloo on CPU, 2 ranks, batch 8, one thread"
echo "each), median iteration time after 5 warm-up iterations of $ITERS, median of $REPS runs"
echo "alternating with and without \`tensorwire capture\` (shim only: the wire tap is not"
echo "built yet)."
echo
echo "| job | without | with the shim | overhead |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
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
