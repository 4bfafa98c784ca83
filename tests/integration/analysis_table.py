#!/usr/bin/env python3
"""The validation tables of docs/analysis.md from the JSON files that
analysis_test.sh leaves (NAME.analysis.json, NAME.sim.json,
ring-pair.mitigation.json), in one or more run directories. With several, every
measured or predicted figure is the median over the runs and each error is
computed from those medians; a cause named differently in some runs is shown as
the most common naming with the count.

Usage: analysis_table.py OUT.md|- RUN_DIR [RUN_DIR...]"""
import json
import os
import statistics
import sys
from collections import Counter

out_path, dirs = sys.argv[1], sys.argv[2:]
runs = len(dirs)


def load(d, name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else None


def each(name):
    """The file from every run that has it."""
    return [j for j in (load(d, name) for d in dirs) if j is not None]


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ms(v):
    return "" if v is None else f"{v / 1e6:.2f} ms"


def err(pred, meas):
    return f"{(pred - meas) / meas * 100:+.1f}%" if pred is not None and meas else ""


def mode(texts):
    (text, n), = Counter(texts).most_common(1)
    return text if n == len(texts) else f"{text} ({n} of {len(texts)} runs)"


def named_causes(j):
    return [s for s in j["stragglers"] if s["named"]] + [l for l in j["links"] if l["named"]]


def cause_name(c):
    return f"rank {c['rank']}" if "rank" in c else f"{c['a']} - {c['b']}"


lines = ["| job | injection | measured | simulated | named | predicted saving | measured difference | error |",
         "|---|---|---|---|---|---|---|---|"]
for job, label in (("ring", "ring all-reduce, 4 ranks"), ("real", "PyTorch DDP (MLP, Gloo), built from its capture, 4 ranks"),
                   ("ps", "parameter server, 3 workers + 1")):
    for kind, inj in (("clean", "none"), ("slow", "--slow-rank " + {"ps": "1:1.5", "ring": "2:1.5", "real": "2:2"}[job]),
                      ("pair", "--pair " + ("0-3" if job == "ps" else "1-2") + ":rate=200mbit")):
        pairs = [(load(d, f"{job}-{kind}.analysis.json"), load(d, f"{job}-clean.analysis.json")) for d in dirs]
        pairs = [(j, c) for j, c in pairs if j is not None]
        if not pairs:
            continue
        named = mode([", ".join(cause_name(c) for c in named_causes(j)) or "nothing" for j, _ in pairs])
        measured = med([j["measured_ns"] for j, _ in pairs])
        sim_error = med([j["sim_error"] for j, _ in pairs])
        pred = meas = None
        if kind != "clean":
            pred = med([named_causes(j)[0]["without_ns"] if named_causes(j) else None for j, _ in pairs])
            meas = med([j["measured_ns"] - c["measured_ns"] if c else None for j, c in pairs])
        lines.append(f"| {label} | `{inj}` | {ms(measured)} | {sim_error * 100:+.1f}% | {named} | {ms(pred)} | {ms(meas)} | {err(pred, meas)} |")

# The mitigation of the ring's slow pair.
mit = [(load(d, "ring-pair.mitigation.json"), load(d, "ring-mitigated.analysis.json"), load(d, "ring-pair.analysis.json")) for d in dirs]
mit = [(m["mitigation"], f, p) for m, f, p in mit if m and f and p]
if mit:
    pred = med([m["predicted_ns"] for m, _, _ in mit])
    before, after = med([p["measured_ns"] for _, _, p in mit]), med([f["measured_ns"] for _, f, _ in mit])
    meas = med([p["measured_ns"] - f["measured_ns"] for _, f, p in mit])
    lines += ["", f"Mitigation of the ring's slow pair (`--emit-mitigated`: {mode([m['description'] for m, _, _ in mit])}): predicted saving "
              f"{ms(pred)}, measured {ms(meas)} ({ms(before)} -> {ms(after)}), error {err(pred, meas)}."]

# The compression ranking, replayed: the ranking of each run, compressed in that run.
comp = [(load(d, "comm-base.analysis.json"), [load(d, f"comm-c{i}.analysis.json") for i in range(3)]) for d in dirs]
comp = [(b, r) for b, r in comp if b and all(r)]
if comp:
    base = med([b["measured_ns"] for b, _ in comp])
    lines += ["", "Compression checked by replay (parameter server, 3 workers + 1, every host's link at 1 Gbit/s; "
              f"base iteration {ms(base)}): the ranking's top three tensors, each compressed 4x and replayed:", "",
              "| rank | tensor | predicted saving | measured saving | error |", "|---|---|---|---|---|"]
    for i in range(3):
        k = [b["compression"]["factors"].index(4) for b, _ in comp]
        tensor = mode([b["compression"]["tensors"][i]["tensor"] for b, _ in comp])
        pred = med([b["compression"]["tensors"][i]["saving_ns"][kk] for (b, _), kk in zip(comp, k)])
        meas = med([b["measured_ns"] - r[i]["measured_ns"] for b, r in comp])
        lines.append(f"| {i + 1} | {tensor} | {ms(pred)} | {ms(meas)} | {err(pred, meas)} |")
    lines += ["", "`simulate` on the link model alone (`--link-rate 1gbit --shared`, nothing fitted from a run) against the replays:", "",
              "| profile | simulated | replayed | error |", "|---|---|---|---|"]
    for f, run in (("comm-ps", "comm-base"), ("comm-c0", "comm-c0"), ("comm-c1", "comm-c1"), ("comm-c2", "comm-c2")):
        sim = med([j["mean_iteration_ns"] for j in each(f + ".sim.json")])
        meas = med([j["measured_ns"] for j in each(run + ".analysis.json")])
        if sim is not None and meas is not None:
            lines.append(f"| {f}.yaml | {ms(sim)} | {ms(meas)} | {err(sim, meas)} |")

# The order hint, replayed.
order = [(load(d, "order-fifo.analysis.json"), load(d, "order-prio.analysis.json")) for d in dirs]
order = [(f, p) for f, p in order if f and p and f.get("order")]
if order:
    fifo, prio = med([f["measured_ns"] for f, _ in order]), med([p["measured_ns"] for _, p in order])
    meas = med([f["measured_ns"] - p["measured_ns"] for f, p in order])
    before, after = med([f["order"]["before_ns"] for f, _ in order]), med([f["order"]["after_ns"] for f, _ in order])
    pred = med([f["order"]["predicted_saving_ns"] for f, _ in order])
    lines += ["", "The order hint checked by replay (parameter server, 3 workers + 1, forward waiting per layer, every host's link at "
              "1 Gbit/s): the profile replayed first-ready first-sent and with every send at its urgency (`simulate --prioritize`):", "",
              "| | first-ready | by urgency | saving | error |", "|---|---|---|---|---|",
              f"| replayed | {ms(fifo)} | {ms(prio)} | {ms(meas)} | |",
              f"| `analyze` of the first-ready run (the order hint) | {ms(before)} | {ms(after)} | {ms(pred)} | {err(pred, meas)} |"]
    sims = [med([j["mean_iteration_ns"] for j in each(f + ".sim.json")]) for f in ("order-ps", "order-prio")]
    if None not in sims:
        lines.append(f"| `simulate --link-rate 1gbit --shared` | {ms(sims[0])} | {ms(sims[1])} | {ms(sims[0] - sims[1])} | "
                     f"{err(sims[0] - sims[1], meas)} |")

# "-" is standard output: opening /dev/stdout anew would truncate a log it goes to.
if out_path == "-":
    sys.stdout.write("\n".join(lines) + "\n")
else:
    with open(out_path, "w") as out:
        out.write("\n".join(lines) + "\n")
