#!/usr/bin/env bash
# The whole loop for each real job in examples/, on the namespace testbed: the job
# runs under `tensorwire capture` on N namespace hosts (rank R on host R), its
# profile is built from the captures, replayed on the same hosts, and compared with
# the capture; one line of figures per job. Needs root (namespaces) and a build.
#
# Usage: examples/testbed-loop.sh [--hosts N] [--iterations K] [--rate RATE]
#          [--jobs ddp,ps,pipeline,mpi] [--out DIR] [--name NAME] [--tw BINARY] [--capture-only]
#   --hosts N       namespace hosts, one rank each (default 3; the pipeline takes 2-4)
#   --iterations K  iterations of each job (default 8; the builder drops warm-up)
#   --rate RATE     every host's link rate, like 1gbit (default: not limited)
#   --jobs LIST     which jobs (default all four)
#   --out DIR       where captures, profiles, runs and logs go (default runs/testbed-loop)
#   --name NAME     testbed name (default twloop); brought up, and down at the end
#   --tw BINARY     tensorwire (default build/cli/tensorwire)
#   --capture-only  run the jobs under capture and stop there
#
# Per job, in DIR/JOB: cap-hR/ (the capture on host R; the MPI job has one capture,
# on host 0, whose daemons on the other hosts write into it too), logs/, job.yaml,
# run/, compare.json, and the figures line, which is also appended to DIR/figures.txt:
#   JOB  hosts N  iterations I  iteration error median X% p95 Y%  start offset p50 A p99 B  flow rate error median Z%
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
hosts=3 iterations=8 rate="" jobs="ddp,ps,pipeline,mpi" out=runs/testbed-loop name=twloop tw=build/cli/tensorwire capture_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --hosts) hosts=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --tw) tw=$2; shift 2 ;;
    --capture-only) capture_only=1; shift ;;
    *) echo "testbed-loop.sh: unknown option $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "testbed-loop.sh: the namespace testbed needs root" >&2; exit 1; }
[ -x "$tw" ] || { echo "testbed-loop.sh: no $tw: build it (ninja -C build cli/tensorwire capture/libtensorwire_capture.so) or pass --tw" >&2; exit 1; }
tw=$(realpath "$tw")
PY=/usr/bin/python3
mkdir -p "$out"
out=$(realpath "$out")
JOB_TIMEOUT=600

up_args=(--hosts "$hosts" --name "$name")
[ -n "$rate" ] && up_args+=(--rate "$rate")
"$tw" testbed up "${up_args[@]}" > /dev/null
trap '"$tw" testbed down --name "$name" > /dev/null 2>&1 || true' EXIT
"$tw" testbed status --name "$name" --json > "$out/testbed.json"
mapfile -t addr < <($PY -c 'import json, sys; [print(h["address"]) for h in json.load(open(sys.argv[1]))["host_list"]]' "$out/testbed.json")
master=${addr[0]}

# One rank per host for the torch.distributed jobs, as torchrun would set them up;
# each host's process under a capture of its own.
run_ranks() {  # DIR SCRIPT ARGS...
  local dir=$1 script=$2
  shift 2
  local port=$((20000 + RANDOM % 20000)) pids=() r rc=0
  for ((r = 0; r < hosts; r++)); do
    ip netns exec "$name-h$r" timeout "$JOB_TIMEOUT" "$tw" capture --out "$dir/cap-h$r" --quiet -- \
      env RANK=$r WORLD_SIZE="$hosts" MASTER_ADDR="$master" MASTER_PORT=$port GLOO_SOCKET_IFNAME=eth0 \
      $PY "$script" --log "$dir/logs/rank-$r.jsonl" "$@" > "$dir/logs/host-$r.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc -eq 0 ] || { tail -n 5 "$dir"/logs/host-*.out >&2; return 1; }
}

# mpirun on host 0 starts an orted on every other host through this agent in
# place of ssh: OpenMPI calls it as AGENT HOST COMMAND..., the command a shell line.
# The namespace hosts share one file system and one host name, so each daemon
# gets a session directory of its own: in a shared one the daemons overwrite each
# other's shared-memory files (hwloc's topology, PMIx's store), and crash.
nsexec_agent() {  # DIR
  local f=$1/nsexec.sh r
  {
    echo '#!/bin/sh'
    echo 'host=$1; shift'
    echo 'case $host in'
    for ((r = 0; r < hosts; r++)); do echo "  ${addr[$r]}) ns=$name-h$r ;;"; done
    echo '  *) echo "nsexec.sh: $host is no host of testbed '"$name"'" >&2; exit 1 ;;'
    echo 'esac'
    echo "tmp=$1/tmp-\$ns"
    echo 'mkdir -p "$tmp"'
    echo 'exec ip netns exec "$ns" env OMPI_MCA_orte_tmpdir_base="$tmp" /bin/sh -c "$*"'
  } > "$f"
  chmod +x "$f"
  echo "$f"
}

run_mpi() {  # DIR
  local dir=$1 agent list r
  agent=$(nsexec_agent "$dir")
  list=$(for ((r = 0; r < hosts; r++)); do printf '%s:1,' "${addr[$r]}"; done)
  ip netns exec "$name-h0" timeout "$JOB_TIMEOUT" "$tw" capture --out "$dir/cap-h0" --quiet -- \
    mpirun --allow-run-as-root --oversubscribe -np "$hosts" --host "${list%,}" --mca plm_rsh_agent "$agent" \
    --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 \
    $PY "$SRC/examples/mpi/train_mpi.py" --log-dir "$dir/logs" --iterations "$iterations" > "$dir/logs/mpirun.out" 2>&1 ||
    { tail -n 5 "$dir/logs/mpirun.out" >&2; return 1; }
}

figures() {  # JOB DIR
  $PY - "$1" "$2/compare.json" "$hosts" <<'PY'
import json, sys
job, path, hosts = sys.argv[1], sys.argv[2], sys.argv[3]
j = json.load(open(path))
it, so, fr = j["iteration_error_pct"], j["start_offset_error_ns"], j["flow_rate_error_pct"]
# "-" where the reference has no such timings (n = 0), not a made-up zero.
pct = lambda s, q: f"{s[q]:+.1f}%" if s["n"] else "-"
us = lambda s, q: f"{s[q] / 1000:+.0f} us" if s["n"] else "-"
print(f"{job:<9} hosts {hosts}  iterations {j['iterations']}  iteration error median {pct(it, 'p50')} p95 {pct(it, 'p95')}  "
      f"start offset p50 {us(so, 'p50')} p99 {us(so, 'p99')}  flow rate error median {pct(fr, 'p50')}")
PY
}

status=0
IFS=, read -r -a job_list <<< "$jobs"
for job in "${job_list[@]}"; do
  dir=$out/$job
  rm -rf "$dir"
  mkdir -p "$dir/logs"
  echo "== $job: capture on $hosts hosts" >&2
  case $job in
    # Unannotated: iterations from the traffic alone. (Annotating DDP registers a
    # Python communication hook, with which PyTorch 1.13 can deadlock at exit.)
    ddp) run_ranks "$dir" "$SRC/examples/ddp/train.py" --model mlp --iterations "$iterations" ;;
    ps) run_ranks "$dir" "$SRC/examples/ps/train_ps.py" --model mlp --iterations "$iterations" ;;
    pipeline) run_ranks "$dir" "$SRC/examples/pipeline/train_pipeline.py" --iterations "$iterations" --annotate ;;
    mpi) run_mpi "$dir" ;;
    *) echo "testbed-loop.sh: unknown job $job (ddp, ps, pipeline, mpi)" >&2; false ;;
  esac || { echo "$job: the job failed under capture (logs in $dir/logs)" >&2; status=1; continue; }
  [ $capture_only -eq 1 ] && { echo "$job: captured in $dir/cap-h*" >&2; continue; }
  echo "== $job: build, replay on the same hosts, compare" >&2
  if "$tw" profile build "$dir"/cap-h* -o "$dir/job.yaml" > "$dir/build.txt" &&
    "$tw" run "$dir/job.yaml" --testbed "$hosts" --name "$name" --out "$dir/run" --quiet --timeout "$JOB_TIMEOUT" > "$dir/run.txt" &&
    "$tw" compare "$dir/job.yaml" "$dir/run" --json > "$dir/compare.json"; then
    figures "$job" "$dir" | tee -a "$out/figures.txt"
  else
    echo "$job: build, replay or compare failed (output in $dir)" >&2
    status=1
  fi
done
exit $status
