#!/usr/bin/env bash
# `tensorwire analyze` on real replays across a 4-host namespace testbed: a ring
# all-reduce and a parameter server, each clean, with an injected straggler
# (--slow-rank) and with an injected slow pair (--pair). The analysis must name
# exactly the injected rank or pair first and nothing on the clean runs, and its
# simulation of each job must reproduce the measured iteration time. The ring's
# slow pair is then mitigated (--emit-mitigated: another ring order) and the new
# profile replayed on the same shaped testbed. A real job (PyTorch DDP) is
# captured on the same hosts, its profile built and analysed like the synthesised
# ones. The compression ranking of a communication-bound parameter server is
# checked by replaying its top three tensors compressed, and `simulate` predicts
# those replays. The clean ring is exported as Chakra traces and decoded. The figures (predicted savings against measured
# differences) go into docs/analysis.md through bench/analysis.sh; here they are
# printed.
# Usage: analysis_test.sh TENSORWIRE_BINARY SOURCE_DIR
set -u
TW=$(realpath "$1")
SRC=$(realpath "$2")
. "$(dirname "$0")/lib.sh"
cd "$TW_TMP"
PY=/usr/bin/python3
NAME=${TW_ANALYSIS_NAME:-twa$((RANDOM % 100))}
trap '"$TW" testbed down --name $NAME > /dev/null 2>&1; rm -rf "$TW_TMP"' EXIT
[ "$(id -u)" = 0 ] || { echo "the testbed needs root"; exit 1; }

# Compute dominates (60 ms per iteration against a few MB of messages), so that
# what is injected shows in the iteration time on 2 shared cores.
cat > small.yaml <<'EOF'
model: small
dtype: float32
fwd: 20ms
bwd: 40ms
tensors:
  - {name: a.weight, shape: [262144]}
  - {name: b.weight, shape: [262144]}
  - {name: c.weight, shape: [131072]}
EOF
"$TW" profile synth --model small.yaml --ranks 4 --iterations 16 -o ring.yaml 2> /dev/null
"$TW" profile synth --model small.yaml --pattern ps --workers 3 --iterations 16 -o ps.yaml 2> /dev/null

# The replays' connections run cubic, whatever the host's default: under BBR one
# pair of an unshaped ring now and then ran at a third of the others' rate for
# part of a run (BBR's slow pacing states on the bridge, docs/dataplane-analyses.md), and
# a clean run's simulation came out 12% off the measured iteration (once, 2026-12-06).
RUN_CC=(--congestion-control cubic)
replay() {  # OUT PROFILE [run options]
  local out=$1 profile=$2
  shift 2
  "$TW" run "$profile" --testbed 4 --name $NAME --keep --quiet --out "$out" "${RUN_CC[@]}" "$@" > "$out.log" 2>&1 &&
    "$TW" analyze "$out" --threshold 0.2 --json --json-out "$out.analysis.json" > /dev/null
}

# A cause is named here when it costs at least 20% of the ideal iteration over
# the others' median (the default is 10%): on 2 cores shared by 4 agents and the
# controller a clean run has cost up to 13% from one link now and then; the
# injections below cost 45% and more.
# The named causes, first one first, and whether the simulation reproduced the job.
# A named link is the injected one, first (another that cost at most half as much
# may follow: see below).
# ALLOWED (ranks, comma-separated) may be named too, after WANT: a real job's
# ranks that were slower than their peers in the capture itself.
expect() {  # ANALYSIS.json KIND WANT  (KIND: rank or link; WANT: "" for none, "2", "h1-h2")
  ALLOWED=${ALLOWED:-} $PY - "$@" <<'EOF'
import json, os, sys
j = json.load(open(sys.argv[1]))
kind, want = sys.argv[2], sys.argv[3]
allowed = [r for r in os.environ["ALLOWED"].split(",") if r]
# A simulation that does not reproduce the job says what it was built from:
# each link's achieved rate, latency and retransmits, and the analysis' notes.
why = "; ".join(f"{l['a']}-{l['b']}: {l['achieved_bps']/1e6:.0f} Mb/s, {l['latency_ns']/1e3:.0f} us, "
                f"{l['evidence']['retransmits']} retransmits" for l in j["links"]) + " | " + " | ".join(j["notes"])
assert j["reproduces"], f"simulated {j['simulated_ns']} against measured {j['measured_ns']} over {j['iterations']} iterations; {why}"
ranks = [str(s["rank"]) for s in j["stragglers"] if s["named"]]
links = [f"{l['a']}-{l['b']}" for l in j["links"] if l["named"]]
print(f"measured {j['measured_ns']/1e6:.2f} ms, simulated {j['sim_error']*100:+.1f}%, stragglers {ranks}, links {links}"
      + (f" (the capture's own slower ranks {allowed} may be named)" if allowed else ""))
# What each named cause cost put back into the ideal job (impact) and what putting
# it right saves in the job as measured (without), for a failure to be told apart
# from a one-off stall of an agent.
named = "; ".join([f"rank {s['rank']}: impact {s['impact_ns']/1e6:.2f} ms, without {s['without_ns']/1e6:.2f} ms, "
                   f"compute {s['compute_ns']/1e6:.2f} ms against {s['peers_compute_ns']/1e6:.2f} ms"
                   for s in j["stragglers"] if s["named"]] +
                  [f"{l['a']}-{l['b']}: impact {l['impact_ns']/1e6:.2f} ms, without {l['without_ns']/1e6:.2f} ms"
                   for l in j["links"] if l["named"]]) + f" (ideal {j['ideal_ns']/1e6:.2f} ms)"
if kind == "rank":
    assert ranks[:1] == ([want] if want else ranks[:1]) and set(ranks) <= set(allowed) | {want} - {""}, (ranks, named)
    assert not links, (links, named)
else:
    # The injected pair first; on 2 cores shared by 4 agents another link now
    # and then costs the threshold too in one run (the ring's h0-h3 once cost
    # 13.9 ms of an ideal 60.7 beside the shaped pair): it may be named after
    # the injected pair if it cost at most half as much. Nothing else.
    if want:
        impact = {f"{l['a']}-{l['b']}": l["impact_ns"] for l in j["links"] if l["named"]}
        assert links[:1] == [want], (links, named)
        assert all(impact[x] <= impact[want] / 2 for x in links[1:]), (links, named)
        if links[1:]:
            print(f"also named, at most half the injected pair's cost: {links[1:]}")
    else:
        assert not links, (links, named)
    assert set(ranks) <= set(allowed), (ranks, named)
EOF
}

# The ranks of a built profile whose compute per iteration is at least 10% above
# the median of the others': the job itself had them slow (4 ranks on 2 cores
# do not always share them evenly), and its replay does too.
slower_ranks() {  # PROFILE
  $PY - "$1" <<'EOF'
import re, statistics, sys, yaml
unit = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
def ns(v):
    m = re.fullmatch(r"([0-9.]+)(ns|us|ms|s)", str(v))
    return float(m.group(1)) * unit[m.group(2)] if m else float(v)
p = yaml.safe_load(open(sys.argv[1]))
compute = {}
for op in p["ops"]:
    if op.get("type") == "compute":
        compute[op["rank"]] = compute.get(op["rank"], 0) + ns(op["duration"])
slow = [r for r, c in compute.items() if c > 1.1 * statistics.median(v for q, v in compute.items() if q != r)]
print(",".join(str(r) for r in sorted(slow)))
EOF
}

"$TW" testbed up --hosts 4 --name $NAME > up.txt || { echo "testbed up failed"; cat up.txt; exit 1; }
addr() { $PY -c 'import json,sys; print(json.load(open("st.json"))["host_list"][int(sys.argv[1])]["address"])' "$1"; }
"$TW" testbed status --name $NAME --json > st.json
pair() {  # the pair of testbed hosts A and B as the analysis names it (each agent names its host by its namespace; sorted)
  $PY -c 'import sys; print("-".join(sorted(sys.argv[1:])))' "$NAME-h$1" "$NAME-h$2"
}

case_of() {  # OUT PROFILE KIND WANT [run options]
  local out=$1 profile=$2 kind=$3 want=$4
  shift 4
  replay "$out" "$profile" "$@" && expect "$out.analysis.json" "$kind" "$want"
}

check "ring: clean run names nothing" case_of ring-clean ring.yaml rank ''
check "ring: the straggler rank 2 is named" case_of ring-slow ring.yaml rank 2 --slow-rank 2:1.5
# A built profile of a real job: PyTorch DDP (an MLP over Gloo, one rank per
# host) captured on the same 4 hosts, its profile built from the captures, then
# replayed clean, with rank 2's compute 2x slower (its compute is about half of
# its iteration, so that 1.5x costs about the threshold) and over a slow pair.
real_job_once() {
  local master port=$((20000 + RANDOM % 20000)) pids=() r rc=0
  rm -rf real-h? real-logs
  master=$(addr 0)
  mkdir -p real-logs
  for r in 0 1 2 3; do
    ip netns exec $NAME-h$r "$TW" capture --out real-h$r --quiet -- env RANK=$r WORLD_SIZE=4 MASTER_ADDR=$master \
      MASTER_PORT=$port GLOO_SOCKET_IFNAME=eth0 $PY "$SRC/examples/ddp/train.py" --model mlp --iterations 20 \
      --log real-logs/rank-$r.jsonl > real-h$r.out 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  [ $rc -eq 0 ] || { tail -5 real-h*.out; return 1; }
  "$TW" profile build real-h0 real-h1 real-h2 real-h3 -o real.yaml --json > real-build.json 2> real-build.err ||
    { cat real-build.err; return 1; }
  # Enough steady iterations for the replays to be measured over.
  $PY -c 'import json; u = json.load(open("real-build.json"))["iterations"]; assert u["used"] >= 8, u'
}
# Now and then (in 1 of 9 runs of this test; on a slow machine, in 3 of 20
# captures) the build found most iterations unlike the steady ones and kept 1 to
# 4 of 20: it numbered Gloo's notifications, cut at a byte period that fell
# between busy messages, as iterations. They are now placed by time
# (ProfileBuild.ARealDdpCaptureKeepsItsSteadyIterations builds such a capture),
# and the same 20 captures kept 18 each but one, which kept 11. A capture that
# keeps fewer than 8 is still taken once more, and said so at the end.
real_job() {
  real_job_once && return 0
  $PY -c 'import json; print("real job: the first capture kept", json.load(open("real-build.json"))["iterations"]["used"],
          "steady iterations; captured again")' > real-retry.txt 2> /dev/null || return 1
  real_job_once
}
check "a real job (PyTorch DDP on 4 hosts) captured and its profile built" real_job
ALLOWED=$(slower_ranks real.yaml 2> /dev/null)
export ALLOWED
check "real job's built profile: clean run names nothing but the capture's slower ranks" case_of real-clean real.yaml rank ''
check "real job's built profile: the straggler rank 2 is named first" case_of real-slow real.yaml rank 2 --slow-rank 2:2
# The fusion hint of a built profile comes from its DDP twin: the MLP's two
# buckets (DDP closes the first at 1 MiB: the last two layers) and its gradient
# bytes, as the job logged them, from the traffic alone.
real_twin() {
  $PY - <<'EOF'
import json
h = json.load(open("real-clean.analysis.json"))["hints"]["bucket"]
assert h and h["source"] == "twin", h
t = h["twin"]
logged = json.loads(open("real-logs/rank-0.jsonl").readline())["gradient_bytes"]
print(f"twin: buckets {t['buckets']}, {t['gradient_bytes']} bytes against {logged} logged, error {t['error']:+.3f}")
assert len(t["buckets"]) == 2, t
assert abs(t["gradient_bytes"] - logged) <= 0.01 * logged, (t["gradient_bytes"], logged)
assert 1 << 20 <= t["buckets"][0] <= 1.1 * (1 << 20), t  # the first bucket: at least DDP's 1 MiB, then closed
assert abs(t["error"]) < 0.05, t
EOF
}
check "real job's built profile: the fusion hint's DDP twin finds its buckets and gradient bytes" real_twin
"$TW" testbed down --name $NAME > /dev/null
"$TW" testbed up --hosts 4 --name $NAME --pair 1-2:rate=200mbit > up.txt
check "ring: the slow pair 1-2 is named" case_of ring-pair ring.yaml link "$(pair 1 2)"
check "real job's built profile: the slow pair 1-2 is named" case_of real-pair real.yaml link "$(pair 1 2)"
ALLOWED=""
# The mitigation: a ring order that keeps hosts 1 and 2 apart, replayed on the
# same shaped testbed; its measured gain is printed next to the predicted one.
mitigated() {
  "$TW" analyze ring-pair --threshold 0.2 --emit-mitigated ring-mitigated.yaml --json > ring-pair.mitigation.json || return 1
  "$TW" run ring-mitigated.yaml --testbed 4 --name $NAME --keep --quiet --out ring-mitigated "${RUN_CC[@]}" > ring-mitigated.log 2>&1 || return 1
  "$TW" analyze ring-mitigated --json > ring-mitigated.analysis.json || return 1
  $PY - <<'EOF' | tee mitigation.txt
import json
m = json.load(open("ring-pair.mitigation.json"))["mitigation"]
slow = json.load(open("ring-pair.analysis.json"))["measured_ns"]
fixed = json.load(open("ring-mitigated.analysis.json"))["measured_ns"]
print(f"mitigation {m['kind']}: predicted saving {m['predicted_ns']/1e6:.2f} ms, measured {(slow - fixed)/1e6:.2f} ms ({slow/1e6:.2f} -> {fixed/1e6:.2f} ms)")
assert m["kind"] == "reorder", m
assert fixed < 0.7 * slow, (slow, fixed)
EOF
}
check "ring: the mitigated ring order avoids the slow pair and is faster for real" mitigated
"$TW" testbed down --name $NAME > /dev/null
"$TW" testbed up --hosts 4 --name $NAME > up.txt
check "ps: clean run names nothing" case_of ps-clean ps.yaml rank ''
check "ps: the straggler worker 1 is named" case_of ps-slow ps.yaml rank 1 --slow-rank 1:1.5
"$TW" testbed down --name $NAME > /dev/null
"$TW" testbed up --hosts 4 --name $NAME --pair 0-3:rate=200mbit > up.txt
check "ps: the slow pair 0-3 (worker 0 and the server) is named" case_of ps-pair ps.yaml link "$(pair 0 3)"

# Compression, checked by replay: a communication-bound parameter server (every
# host's link shaped to 1 Gbit/s, three tensors of 4, 2 and 1 MB). The run's
# compression ranking predicts each tensor's saving at 4x; the top three are
# compressed in turn (`simulate --compress T:4 --emit`) and replayed on the same
# testbed. The top one must give the largest measured saving. Each profile's
# iteration time is also predicted by `simulate` on the link model alone (1 Gbit/s
# per host, shared by its flows, nothing fitted from a run) and set against its
# replay.
cat > comm.yaml <<'EOF2'
model: comm
dtype: float32
fwd: 10ms
bwd: 20ms
tensors:
  - {name: big.weight, shape: [1048576]}
  - {name: mid.weight, shape: [524288]}
  - {name: small.weight, shape: [262144]}
EOF2
"$TW" profile synth --model comm.yaml --pattern ps --workers 3 --iterations 10 -o comm-ps.yaml 2> /dev/null
"$TW" testbed down --name $NAME > /dev/null
"$TW" testbed up --hosts 4 --name $NAME --rate 1gbit > up.txt
compression() {
  replay comm-base comm-ps.yaml || { cat comm-base.log; return 1; }
  $PY - > top3.txt <<'EOF2' || return 1
import json
for t in json.load(open("comm-base.analysis.json"))["compression"]["tensors"][:3]:
    print(t["tensor"])
EOF2
  [ "$(wc -l < top3.txt)" = 3 ] || { echo "fewer than three tensors ranked"; return 1; }
  local i=0 t
  while read -r t; do
    "$TW" simulate comm-ps.yaml --compress "$t:4" --emit "comm-c$i.yaml" > /dev/null || return 1
    replay "comm-c$i" "comm-c$i.yaml" || { cat "comm-c$i.log"; return 1; }
    i=$((i + 1))
  done < top3.txt
  for f in comm-ps comm-c0 comm-c1 comm-c2; do
    "$TW" simulate $f.yaml --link-rate 1gbit --shared --json > $f.sim.json || return 1
  done
  $PY - <<'EOF2' | tee compression.txt
import json
base = json.load(open("comm-base.analysis.json"))
ranked = base["compression"]["tensors"][:3]
k = base["compression"]["factors"].index(4)
measured = [base["measured_ns"] - json.load(open(f"comm-c{i}.analysis.json"))["measured_ns"] for i in range(3)]
for t, m in zip(ranked, measured):
    print(f"compress {t['tensor']} 4x: predicted saving {t['saving_ns'][k]/1e6:.2f} ms, measured {m/1e6:.2f} ms")
assert measured[0] == max(measured), measured
assert measured[0] > 0, measured
for f, run in (("comm-ps", "comm-base"), ("comm-c0", "comm-c0"), ("comm-c1", "comm-c1"), ("comm-c2", "comm-c2")):
    sim = json.load(open(f + ".sim.json"))["mean_iteration_ns"]
    meas = json.load(open(run + ".analysis.json"))["measured_ns"]
    print(f"simulate {f}.yaml at 1gbit shared: {sim/1e6:.2f} ms, replayed {meas/1e6:.2f} ms ({(sim - meas) / meas * 100:+.1f}%)")
    # A loose bound: the link model is given, not fitted, and the shaped link's
    # goodput sits below its nominal rate; docs/analysis.md reports the errors.
    assert abs(sim - meas) <= 0.25 * meas, (f, sim, meas)
EOF2
}
check "compression: the ranking's top tensor, compressed and replayed, saves the most; simulate predicts the replays" compression

# The order hint, checked by replay. A parameter server whose forward waits for
# each layer's own pulls of the iteration before (--overlap-forward, as BytePS
# and P3 run), on the same 1 Gbit/s hosts: sent first-ready first-sent, the
# first layer's parameters, pushed last in backward, come back last, and the
# next forward waits for them all. Given every send its urgency (`simulate
# --prioritize --emit`), the first layers go first and the forward overlaps the
# rest. The analysis of the first-ready run predicts a saving; the replay of
# the prioritised profile must save time, and both figures are reported.
cat > layers.yaml <<'EOF2'
model: layers
dtype: float32
fwd: 80ms
bwd: 40ms
tensors:
  - {name: l0.weight, shape: [262144]}
  - {name: l1.weight, shape: [262144]}
  - {name: l2.weight, shape: [262144]}
  - {name: l3.weight, shape: [262144]}
  - {name: l4.weight, shape: [262144]}
  - {name: l5.weight, shape: [262144]}
EOF2
"$TW" profile synth --model layers.yaml --pattern ps --workers 3 --iterations 10 --overlap-forward -o order-ps.yaml 2> /dev/null
order_hint() {
  replay order-fifo order-ps.yaml || { cat order-fifo.log; return 1; }
  "$TW" simulate order-ps.yaml --prioritize --emit order-prio.yaml | grep -q 'what-if: sends by urgency' || return 1
  grep -q 'priority: ' order-prio.yaml || return 1
  replay order-prio order-prio.yaml || { cat order-prio.log; return 1; }
  "$TW" analyze order-fifo | grep -q '^order hint: ' || return 1
  for f in order-ps order-prio; do
    "$TW" simulate $f.yaml --link-rate 1gbit --shared --json > $f.sim.json || return 1
  done
  $PY - <<'EOF2' | tee order.txt
import json
fifo, prio = json.load(open("order-fifo.analysis.json")), json.load(open("order-prio.analysis.json"))
h = fifo["order"]
measured = fifo["measured_ns"] - prio["measured_ns"]
sim = [json.load(open(f + ".sim.json"))["mean_iteration_ns"] for f in ("order-ps", "order-prio")]
print(f"order hint: predicted saving {h['predicted_saving_ns']/1e6:.2f} ms, measured {measured/1e6:.2f} ms "
      f"({fifo['measured_ns']/1e6:.2f} -> {prio['measured_ns']/1e6:.2f} ms); simulate on the link model {(sim[0] - sim[1])/1e6:.2f} ms")
assert h["changed"] > 0 and h["predicted_saving_ns"] > 0, h
assert measured > 0, (fifo["measured_ns"], prio["measured_ns"])
EOF2
}
check "order hint: the urgency order, replayed, saves time; predicted against measured" order_hint

# Chakra execution traces of the clean ring: decoded with protobuf's own reader
# against Chakra's field numbers, every send paired with its receive, and as
# many nodes as the profile has ops and messages.
chakra() {
  "$TW" trace chakra ring-clean -o ring-et 2> chakra.err || { cat chakra.err; return 1; }
  $PY "$SRC/tests/perfetto/check_chakra.py" ring-et 4 > chakra.json || return 1
  "$TW" profile show ring.yaml > show.txt || return 1
  $PY - <<'EOF'
import json, re
c = json.load(open("chakra.json"))
m = re.search(r"ops per iteration (\d+): (\d+) compute, (\d+) send", open("show.txt").read())
ops, compute, send = map(int, m.groups())
n = c["nodes"]
assert n["COMP_NODE"] == compute and n["COMM_SEND_NODE"] == send == n["COMM_RECV_NODE"], (n, m.groups())
assert c["dependencies"] > 0 and c["bytes"] > 0, c
EOF
}
check "trace chakra: one file per rank, every send paired with its receive, the profile's ops" chakra

# The text form names the same, and bad input gets one line and exit 1.
check "text output names the straggler" bash -c "'$TW' analyze ring-slow | grep -q 'rank 2 (.*) is a straggler'"
bucket_hint() {
  "$TW" analyze ring-clean > hint.txt && grep -q '^fusion hint: ' hint.txt || { cat hint.txt; return 1; }
  $PY -c '
import json
h = json.load(open("ring-clean.analysis.json"))["hints"]["bucket"]
assert h["best_ns"] <= h["current_ns"] and len(h["tried"]) == 8 and h["current_mib"] == 25, h'
}
check "a synthesised ring gets a bucket-size hint from the fitted link model" bucket_hint
check "simulate runs a profile with a what-if" bash -c "'$TW' simulate ring.yaml --slow-rank 2:1.5 | grep -q 'what-if: rank 2 computes 1.5x slower'"
check "analyze of a missing path fails in one line" bash -c "! '$TW' analyze /nonexistent 2> err.txt && [ \$(wc -l < err.txt) = 1 ] && grep -q /nonexistent err.txt"
check "simulate of a bad what-if fails" bash -c "! '$TW' simulate ring.yaml --compress nothing:4 2> err.txt && grep -q nothing err.txt"
[ -f mitigation.txt ] && head -1 mitigation.txt
[ -f compression.txt ] && cat compression.txt
[ -f order.txt ] && cat order.txt
[ -f real-retry.txt ] && cat real-retry.txt
# The validation tables (bench/analysis.sh puts them into docs/analysis.md, the
# median of several runs): each prediction against the measured difference.
if [ -n "${TW_ANALYSIS_KEEP:-}" ]; then
  mkdir -p "$TW_ANALYSIS_KEEP" && cp ./*.analysis.json ./*.sim.json ./*.mitigation.json "$TW_ANALYSIS_KEEP"/ 2> /dev/null
fi
$PY "$SRC/tests/integration/analysis_table.py" "${TW_ANALYSIS_TABLE:--}" .
finish
