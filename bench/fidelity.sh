#!/usr/bin/env bash
# Fidelity of the loop, regenerating docs/fidelity.md (root: the namespace testbed).
#   bench/fidelity.sh [--reps R] [--iterations K] [--hosts N] [--tw BINARY]
# 1. Each real job in examples/ (DDP over Gloo, parameter server over Gloo, the
#    pipeline over Gloo send/recv, mpi4py over OpenMPI's TCP transport) runs under
#    capture on N namespace hosts, is built, replayed on the same hosts closed loop
#    and open loop, and compared with the capture (examples/testbed-loop.sh), R
#    times; the table gives the median over the repetitions of each figure.
# 2. Predictive check: DDP captured on the unshaped testbed is replayed on a shaped
#    one (every link 1 Gb/s, hosts 0-1 at 300 Mb/s), and the real job runs on that
#    same shaped testbed: the replay's iteration time against the real job's.
# Run it on a quiet machine (no build, test or other benchmark): the load average
# is printed with the tables, and a run above 0.5 is marked.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=3 iterations=30 hosts=3 tw=build/cli/tensorwire
while [ $# -gt 0 ]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --tw) tw=$2; shift 2 ;;
    *) echo "fidelity.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "fidelity.sh: the namespace testbed needs root" >&2; exit 1; }
tw=$(realpath "$tw")
PY=/usr/bin/python3
out=runs/fidelity
rm -rf "$out"
mkdir -p "$out"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
name=twfid

# 1. The loop, R times.
for ((i = 1; i <= reps; i++)); do
  echo "== repetition $i of $reps" >&2
  bash examples/testbed-loop.sh --hosts "$hosts" --iterations "$iterations" --out "$out/rep$i" --name "$name" --tw "$tw" \
    > "$out/rep$i.log" 2>&1 || echo "repetition $i: a job failed (see $out/rep$i.log)" >&2
  for job in ddp ps pipeline mpi; do
    d=$out/rep$i/$job
    [ -f "$d/job.yaml" ] || continue
    "$tw" run "$d/job.yaml" --testbed "$hosts" --name "$name" --open-loop --out "$d/run-open" --quiet > /dev/null 2>&1 &&
      "$tw" compare "$d/job.yaml" "$d/run-open" --json > "$d/compare-open.json" || true
  done
done

# 2. Predictive check.
echo "== predictive check" >&2
p=$out/predict
mkdir -p "$p"
shape=(--rate 1gbit --pair 0-1:rate=300mbit)
job=(--model mlp --iterations "$iterations")
ddp_on_testbed() {  # DIR [testbed up options...]: DDP, one rank per host, under capture
  local dir=$1 r pids=() port=$((20000 + RANDOM % 20000)) master
  shift
  "$tw" testbed up --hosts "$hosts" --name "$name" "$@" > /dev/null
  master=$("$tw" testbed status --name "$name" --json | $PY -c 'import json, sys; print(json.load(sys.stdin)["host_list"][0]["address"])')
  mkdir -p "$dir/logs"
  for ((r = 0; r < hosts; r++)); do
    ip netns exec "$name-h$r" "$tw" capture --out "$dir/cap-h$r" --quiet -- env RANK=$r WORLD_SIZE="$hosts" \
      MASTER_ADDR="$master" MASTER_PORT=$port GLOO_SOCKET_IFNAME=eth0 $PY examples/ddp/train.py "${job[@]}" \
      --log "$dir/logs/rank-$r.jsonl" > "$dir/logs/host-$r.out" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  "$tw" testbed down --name "$name" > /dev/null
}
ddp_on_testbed "$p/unshaped"
"$tw" profile build "$p"/unshaped/cap-h* -o "$p/ddp.yaml" > "$p/build.txt"
ddp_on_testbed "$p/shaped" "${shape[@]}"
"$tw" run "$p/ddp.yaml" --testbed "$hosts" --name "$name" "${shape[@]}" --out "$p/replay" --quiet > /dev/null
"$tw" run "$p/ddp.yaml" --testbed "$hosts" --name "$name" --out "$p/replay-unshaped" --quiet > /dev/null
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

$PY - "$out" "$reps" "$hosts" "$iterations" "$load_before" "$load_after" > docs/fidelity.md <<'PY'
import glob, json, os, statistics, subprocess, sys
out, reps, hosts, iterations, load_before, load_after = sys.argv[1:7]
med = lambda v: statistics.median(v) if v else None
def stats(job, name):
    rows = []
    for d in sorted(glob.glob(f"{out}/rep*/{job}")):
        f = f"{d}/{name}"
        if os.path.exists(f):
            rows.append(json.load(open(f)))
    return rows
def fig(rows, key, q, scale=1.0, unit="%"):
    v = [r[key][q] * scale for r in rows if r.get(key, {}).get("n")]
    m = med(v)
    if m is None:
        return "-"
    return f"{m:+.1f}{unit}" if unit == "%" else f"{m:+.0f} {unit}"
def iteration_ms(logdir):
    per = {}
    for f in glob.glob(f"{logdir}/rank-*.jsonl"):
        for line in open(f):
            x = json.loads(line)
            if "iteration" in x and "start_ns" in x:
                per.setdefault(x["iteration"], []).append((x["start_ns"], x["end_ns"]))
    # job-wide: the earliest start to the latest end, warm-up (first two) left out
    its = sorted(per)[2:]
    return med([(max(e for _, e in per[i]) - min(s for s, _ in per[i])) / 1e6 for i in its])
def run_ms(rundir):
    j = json.load(open(f"{rundir}/run.json"))
    v = [(e - s) / 1e6 for s, e in j.get("iteration_times_ns", []) if e > s]
    return med(v[2:])  # as for the job: warm-up left out
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
print("# Fidelity: replays against the jobs they came from")
print()
print("Regenerate with `bench/fidelity.sh` (root, a quiet machine). Every job in")
print("`examples/` runs unchanged under `tensorwire capture` on the namespace testbed")
print(f"({hosts} hosts, one rank each, {iterations} iterations; `examples/testbed-loop.sh`), its profile is")
print("built (`tensorwire profile build`), replayed on the same hosts, and compared with the capture")
print(f"(`tensorwire compare`). Each figure is the median over {reps} repetitions of that run's figure.")
print("Errors are replay minus capture: iteration time (job-wide) in percent, per message start offset")
print("within its iteration in microseconds.")
print()
print("## Closed loop (dependencies honoured) and open loop (each send at its captured time)")
print()
print("| job | loop | iteration error p50 | p95 | start offset p50 | p99 | flow rate error p50 |")
print("|---|---|---|---|---|---|---|")
for job in ["ddp", "ps", "pipeline", "mpi"]:
    for loop, name in [("closed", "compare.json"), ("open", "compare-open.json")]:
        rows = stats(job, name)
        if not rows:
            print(f"| {job} | {loop} | (no run) | | | | |")
            continue
        print(f"| {job} | {loop} | {fig(rows, 'iteration_error_pct', 'p50')} | {fig(rows, 'iteration_error_pct', 'p95')} | "
              f"{fig(rows, 'start_offset_error_ns', 'p50', 1e-3, 'us')} | {fig(rows, 'start_offset_error_ns', 'p99', 1e-3, 'us')} | "
              f"{fig(rows, 'flow_rate_error_pct', 'p50')} |")
print()
print("Targets (issue 12): median iteration-time error at most 5%, heading for 2%; start offset p50 within")
print("50 us and p99 within 200 us. A flow's rate is its bytes over the time it had a message in flight")
print("(from the first call to the last byte's arrival), in the capture and in the replay alike.")
print()
print("### Where and why replay and capture differ")
print()
print("- **Closed loop runs faster than the job** (negative errors), most for the pipeline and MPI. A")
print("  replay's agent reads every byte the moment it arrives and starts what waits for it at once; the")
print("  job reads when it asks (a pipeline stage calls recv once it is done with the previous")
print("  micro-batch; OpenMPI progresses a rendezvous only inside an MPI call). `profile build` takes a")
print("  receipt to be the last byte's arrival (its send or last segment plus the connection's fastest")
print("  delivery) and turns the time until the job used it into compute, but a job that was busy")
print("  elsewhere (Python between calls, contention for the 2 cores by 3 ranks) still shows up as")
print("  waiting that the replay does not reproduce.")
print("- **MPI**: a large message is a rendezvous (its header, the receiver's PUT request or ACK, then")
print("  the data). It is two messages in the profile, and the data waits for the request's receipt, as")
print("  in the job; an MPI rank still progresses only inside MPI calls, which the replay does not model.")
print("- **Open loop** (each send at its captured offset from the iteration start, dependencies ignored)")
print("  keeps the median close by construction; its p95 and start offsets show how much the network")
print("  of the replay moves sends that the capture timed.")
print("- **p95 and start offsets** are far from the targets: with 3 ranks on 2 cores, both the job and the")
print("  replay share the CPU with each other's ranks, and a descheduled rank delays its iteration by")
print("  milliseconds. The targets (5% median, 50/200 us starts) are for a machine with a core per rank.")
print()
p = f"{out}/predict"
print("## Predictive check")
print()
print(f"DDP (MLP, {hosts} ranks) captured on the unshaped testbed; its profile replayed on a shaped one (every")
print("link 1 Gb/s, hosts 0-1 at 300 Mb/s); the real job run on that same shaped testbed. Median job-wide")
print("iteration times, warm-up left out:")
print()
try:
    real_unshaped, real_shaped = iteration_ms(f"{p}/unshaped/logs"), iteration_ms(f"{p}/shaped/logs")
    rep_unshaped, rep_shaped = run_ms(f"{p}/replay-unshaped"), run_ms(f"{p}/replay")
    print("| testbed | real job | replay of the unshaped capture | error |")
    print("|---|---|---|---|")
    print(f"| unshaped | {real_unshaped:.2f} ms | {rep_unshaped:.2f} ms | {100 * (rep_unshaped - real_unshaped) / real_unshaped:+.1f}% |")
    print(f"| shaped | {real_shaped:.2f} ms | {rep_shaped:.2f} ms | {100 * (rep_shaped - real_shaped) / real_shaped:+.1f}% |")
    print()
    print("Target: at most 10% on the shaped testbed. The real job's iteration times come from its own log")
    print("(start and end of each iteration on each rank, CLOCK_REALTIME; one clock: the hosts are")
    print("namespaces of one machine).")
except Exception as e:  # a part that did not run says so
    print(f"(not measured: {e})")
print()
print(f"Measured {subprocess.run(['date', '-u', '+%Y-%m-%d'], capture_output=True, text=True).stdout.strip()} on "
      f"{os.cpu_count()} cores ({cpu}), {os.uname().sysname} {os.uname().release}.")
quiet = all(float(x) <= 0.5 for x in load_before.split()[:1])
print(f"Load average (1, 5, 15 min) before: {load_before}; after: {load_after}" + ("" if quiet else " (above 0.5: the machine was not quiet)") + ".")
PY
echo "bench: wrote docs/fidelity.md" >&2
