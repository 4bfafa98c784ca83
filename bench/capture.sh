#!/usr/bin/env bash
# The capture's overhead: the real PyTorch DDP job (examples/ddp, 2 ranks, Gloo on
# CPU) without the capture, with the shim alone and with the wire tap, runs
# interleaved; and the shim's cost per call.
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
. "$(dirname "$0")/lib.sh"

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
# Three configurations in rotating order, so that order effects do not pose as overhead.
configs=(plain shim tap)
run_config() {  # CONFIG MODEL: prints the median iteration time
  rm -rf "$work/l" "$work/c"
  local job=($PY "$src/examples/ddp/launch.py" --nproc 2 --logs "$work/l" -- --model "$2" --iterations $ITERS)
  case $1 in
    plain) "${job[@]}" > /dev/null ;;
    shim) "$tw" capture --out "$work/c" --wire off --quiet -- "${job[@]}" > /dev/null ;;
    tap) "$tw" capture --out "$work/c" --wire auto --quiet -- "${job[@]}" > /dev/null ;;
  esac
  iteration_ms "$work/l"
}
for model in mlp resnet18; do
  declare -A res=()
  for ((k = 0; k < REPS; k++)); do
    for ((i = 0; i < 3; i++)); do
      c=${configs[$(((i + k) % 3))]}
      res[$c]+="$(run_config "$c" $model) "
    done
  done
  p=$(median ${res[plain]}) s=$(median ${res[shim]}) t=$(median ${res[tap]})
  # Is each difference of medians inside the spread of the runs without the capture?
  for c in shim tap; do
    m=$(median ${res[$c]})
    what="shim"
    [ "$c" = shim ] || what="shim + wire tap"
    if within "$m" "$p" "$(range ${res[plain]})"; then
      verdict+=("$model, $what: within the spread of the runs without the capture")
    else
      verdict+=("$model, $what: larger than the spread of the runs without the capture")
    fi
  done
  rows+=("| DDP $model, 2 ranks | $(spread ${res[plain]}) ms | $(spread ${res[shim]}) ms ($(change "$s" "$p")) | $(spread ${res[tap]}) ms ($(change "$t" "$p")) |")
done
echo "The real DDP job of examples/ddp (Gloo on CPU, 2 ranks, batch 8, one thread"
echo "each), median iteration time after 5 warm-up iterations of $ITERS; median (and range) of"
echo "$REPS runs of each configuration in rotating order: without the capture, with"
echo "\`tensorwire capture --wire off\` (the shim alone) and with \`--wire auto\` (shim and"
echo "wire tap on every interface)."
echo
echo "| job | without | shim (difference of medians) | shim + wire tap |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Difference of medians against the range (max - min) of the $REPS runs without the capture:"
printf -- '- %s\n' "${verdict[@]}"
echo
sends=() writes=() tsends=() twrites=() wsends=()
for ((k = 0; k < REPS; k++)); do
  read -r s w < <("$build/bench/shim_cost" 200000)
  sends+=("$s") writes+=("$w")
  read -r s w < <(LD_PRELOAD=$shim TW_CAPTURE_DIR=$work "$build/bench/shim_cost" 200000)
  tsends+=("$s") twrites+=("$w")
  # The same under tensorwire capture with the wire tap: every 1-byte send is a
  # packet (TCP_NODELAY) that the tap copies and writes.
  rm -rf "$work/w"
  "$tw" capture --out "$work/w" --wire auto --quiet -- "$build/bench/shim_cost" 200000 > "$work/w.out"  # to its very end
  read -r s w < "$work/w.out"
  wsends+=("$s")
done
echo "Cost per call (median of $REPS runs of 200000 calls): a 1-byte \`send\` on a loopback"
echo "TCP connection (in batches of 1000 with nothing waiting to read, each batch read back"
echo "between them, untimed: a reader woken by each packet would be timed too) takes $(median "${sends[@]}") ns plainly, $(median "${tsends[@]}") ns traced (the event: two clock"
echo "reads, one enqueue; TCP_INFO at most once a millisecond) and $(median "${wsends[@]}") ns traced with the wire"
echo "tap on (each send is one packet the kernel copies to the tap: 200000 packets a run);"
echo "\`write\` to /dev/null, not a socket, $(median "${writes[@]}") ns plainly and $(median "${twrites[@]}") ns with the shim"
echo "loaded (one atomic load). Ranges: plain $(spread "${sends[@]}"), traced $(spread "${tsends[@]}"),"
echo "with the tap $(spread "${wsends[@]}") ns."
# Where the kernel isolates page tables without PCID, every system call flushes
# the TLB: on such a machine the plain calls above cost several times more.
if grep -q 'Mitigation: PTI' /sys/devices/system/cpu/vulnerabilities/meltdown 2> /dev/null && ! grep -qw pcid /proc/cpuinfo; then
  echo "This machine's kernel isolates page tables (PTI) on a CPU without PCID, so every"
  echo "system call flushes the TLB and costs more than where it does not."
fi
