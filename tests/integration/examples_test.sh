#!/usr/bin/env bash
# The real jobs of examples/ that other tests do not run, each a few iterations
# under `tensorwire capture` on loopback: the pipeline-parallel job (Gloo
# send/recv) and the MPI job (mpi4py over OpenMPI's TCP transport). Checks each
# job's own logs, and that the capture shows data connections between the right
# ranks carrying what the job says it moved. Then the launcher's timeout, which
# the capture tests rely on to end a job that hangs.
# Usage: examples_test.sh TENSORWIRE_BINARY SOURCE_DIR
set -u
TW=$(realpath "$1")
SRC=$(realpath "$2")
. "$(dirname "$0")/lib.sh"
cd "$TW_TMP"
PY=/usr/bin/python3
ITERS=3

# Each rank's log: a header line and one line per iteration, in order, with
# CLOCK_REALTIME start_ns < end_ns, and losses that are numbers where there are any.
cat > logcheck.py <<'PY'
import glob, json, math, sys
def check(log_dir, ranks, iterations, loss_ranks):
    files = sorted(glob.glob(log_dir + "/rank-*.jsonl"))
    assert len(files) == ranks, files
    logs = {}
    for f in files:
        lines = [json.loads(l) for l in open(f)]
        head, its = lines[0], lines[1:]
        assert head["world_size"] == ranks, head
        assert [x["iteration"] for x in its] == list(range(iterations)), (f, its)
        for x in its:
            assert x["rank"] == head["rank"] and 0 < x["start_ns"] < x["end_ns"], x
            # CLOCK_REALTIME, not a monotonic clock: after 2020.
            assert x["start_ns"] > 1_577_836_800 * 10**9, x
            if head["rank"] in loss_ranks:
                assert math.isfinite(x["loss"]), x
        logs[head["rank"]] = lines
    assert sorted(logs) == list(range(ranks)), sorted(logs)
    return logs
PY

# Bytes each ordered pair of ranks sent each other, from `trace show --json`
# (connections of processes with a rank, to a peer process with a rank).
cat > pairs.py <<'PY'
import collections, json
def load(capture_json):
    j = json.load(open(capture_json))
    rank = {p["pid"]: int(p["rank"].split()[1]) for p in j["processes"] if p["rank"].startswith("rank ")}
    sent = collections.Counter()
    for c in j["connections"]:
        if c["pid"] in rank and c.get("peer_pid") in rank and c["pid"] != c["peer_pid"]:
            sent[(rank[c["pid"]], rank[c["peer_pid"]])] += c["bytes_sent"]
    return j, rank, sent
PY

pipeline() {
  "$TW" capture --out cap-pipe --quiet -- $PY "$SRC/examples/ddp/launch.py" --nproc 3 --logs pipe --timeout 120 \
    --script "$SRC/examples/pipeline/train_pipeline.py" -- --iterations $ITERS --annotate || return 1
  "$TW" trace show cap-pipe --json > cap-pipe.json || return 1
  $PY - <<PY
import sys
sys.path.insert(0, ".")
from logcheck import check
from pairs import load
logs = check("pipe", 3, $ITERS, loss_ranks={2})
j, rank, sent = load("cap-pipe.json")
assert sorted(rank.values()) == [0, 1, 2], rank
act = logs[0][0]["activation_bytes"] * logs[0][0]["micro_batches"] * $ITERS
# Neighbours: activations forward, gradients back, every micro-batch.
for a, b in [(0, 1), (1, 0), (1, 2), (2, 1)]:
    assert sent[(a, b)] >= act, (a, b, sent[(a, b)], act)
# Stages 0 and 2 are not neighbours: their Gloo pair carries the final barrier only.
assert sent[(0, 2)] + sent[(2, 0)] < act / 10, sent
# The annotations: every rank marked each iteration and its three phases.
for t in ("iteration", "forward", "backward", "optimizer"):
    n = sum(1 for s in j["spans"] if s["type"] == t)
    assert n == 3 * $ITERS, (t, n)
PY
}
check "pipeline job: its logs, and activations and gradients between neighbouring stages only" pipeline

mpi() {
  command -v mpirun > /dev/null || { echo "no mpirun: bash scripts/install-deps.sh"; return 1; }
  "$TW" capture --out cap-mpi --quiet -- timeout 120 mpirun --allow-run-as-root --oversubscribe -np 3 \
    --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
    $PY "$SRC/examples/mpi/train_mpi.py" --log-dir mpi --iterations $ITERS --annotate || return 1
  "$TW" trace show cap-mpi --json > cap-mpi.json || return 1
  $PY - <<PY
import sys
sys.path.insert(0, ".")
from logcheck import check
from pairs import load
logs = check("mpi", 3, $ITERS, loss_ranks={0, 1, 2})
grad = logs[0][0]["gradient_bytes"]
assert sum(logs[0][0]["buckets"]) == grad, logs[0][0]
j, rank, sent = load("cap-mpi.json")
# The ranks come from mpirun's OMPI_COMM_WORLD_RANK, which the shim records.
assert sorted(rank.values()) == [0, 1, 2], [p["rank"] for p in j["processes"]]
# Whatever OpenMPI's all-reduce algorithm, each rank must send at least
# (N-1)/N of its gradient per iteration to the other ranks (BTL connections).
for r in range(3):
    out = sum(v for (a, b), v in sent.items() if a == r)
    assert out >= $ITERS * grad * 2 / 3, (r, out, sent)
# The launcher's control connections (OOB, to mpirun) are there and small.
launcher = [p["pid"] for p in j["processes"] if not p["rank"]]
assert len(launcher) == 1, j["processes"]
oob = [c for c in j["connections"] if c.get("peer_pid") == launcher[0] and c["pid"] in rank]
assert len(oob) == 3 and all(c["bytes_sent"] < 64 * 1024 for c in oob), oob
allreduces = sum(1 for s in j["spans"] if s["name"] == "allreduce")
assert allreduces == 3 * $ITERS * len(logs[0][0]["buckets"]), allreduces
PY
}
check "MPI job: its logs, BTL data between the ranks, mpirun's control connections apart" mpi

# A job that outlives launch.py's deadline: each live rank's threads and Python
# stacks on standard error, then every rank gone and a non-zero exit.
launch_timeout() {
  local rc
  timeout 120 $PY "$SRC/examples/ddp/launch.py" --nproc 2 --logs slow --timeout 4 -- --model mlp --iterations 1000000 \
    2> slow.err
  rc=$?
  [ $rc -eq 1 ] || { echo "launch.py exited $rc"; cat slow.err; return 1; }
  grep -q '^launch.py: timed out$' slow.err && [ "$(grep -c ': waits in .*, system call ' slow.err)" -ge 2 ] \
    && [ "$(grep -c 'train.py", line [0-9]* in <module>$' slow.err)" -eq 2 ] || { cat slow.err; return 1; }
  ! pgrep -f "slow/rank-[01].jsonl" > /dev/null || { echo "a rank outlived launch.py"; return 1; }
}
check "launch.py past its timeout: each rank's waits and Python stacks, then all killed" launch_timeout

finish
