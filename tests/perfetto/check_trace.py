#!/usr/bin/python3
"""Decodes a Perfetto trace written by `tensorwire view` against the message
definitions in perfetto_trace.proto (compiled here with protoc, the reader is
protobuf's own) and checks what Perfetto needs to draw it as meant:

- every packet of a sequence is on the clock its defaults name, and timestamps
  never run backwards on a sequence (incremental clock, id 64, tied to REALTIME);
- on every track, slices nest: each END closes the latest open slice, and every
  slice is closed by the end of the trace;
- every flow id starts on exactly one slice's BEGIN and terminates on exactly
  one other slice's END, not earlier (Perfetto links flows in time order);
- every event's track, name and annotation names were defined before use.

Prints a JSON summary (slices per category, flows, counters, time range, the
"about" slice's arguments) for the shell tests to compare with what tensorwire
itself reports. Exits 1 with the first problem found.

With --json, checks a trace-event JSON file instead: complete events nest on
every thread, every flow's "s" has its "f", counters have values.

usage: check_trace.py TRACE.pftrace | --json TRACE.json"""
import json
import os
import sys
import zlib

sys.dont_write_bytecode = True  # nothing written into the source tree
import proto_module  # noqa: E402 (this directory)

HERE = os.path.dirname(os.path.abspath(__file__))


def load_module():
    return proto_module.load("perfetto_trace.proto")


def fail(msg):
    print(f"check_trace: {msg}", file=sys.stderr)
    sys.exit(1)


def check_json(path):
    j = json.load(open(path))
    threads, slices, starts, ends, counters = {}, {}, {}, {}, 0
    for e in j["traceEvents"]:
        ph = e["ph"]
        if ph == "X":
            # Whole nanoseconds: the file has microseconds with three decimals.
            threads.setdefault((e["pid"], e["tid"]), []).append((round(e["ts"] * 1000), round(e["dur"] * 1000), e["name"]))
            slices[e.get("cat", "")] = slices.get(e.get("cat", ""), 0) + 1
        elif ph == "s":
            if e["id"] in starts:
                fail(f"flow {e['id']} starts twice")
            starts[e["id"]] = e
        elif ph == "f":
            ends[e["id"]] = e
        elif ph == "C":
            if "value" not in e.get("args", {}):
                fail("a counter without a value")
            counters += 1
    # Slices of one thread nest: sorted by start (longer first), each within the open one.
    for key, xs in threads.items():
        xs.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for ts, dur, name in xs:
            while stack and stack[-1] <= ts:
                stack.pop()
            if stack and ts + dur > stack[-1]:
                fail(f"thread {key}: {name} at {ts} overlaps its neighbour without nesting")
            stack.append(ts + dur)
    if set(starts) != set(ends):
        fail(f"{len(set(starts) ^ set(ends))} flows with one end only")
    for i, s in starts.items():
        if ends[i]["ts"] < s["ts"]:
            fail(f"flow {i} ends before it starts")
    print(json.dumps({"slices": slices, "flows": len(starts), "counter_samples": counters, "threads": len(threads),
                      "metadata": j.get("metadata", {})}, indent=1))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--json":
        check_json(sys.argv[2])
        return
    if len(sys.argv) != 2:
        fail(__doc__)
    pb = load_module()
    raw = open(sys.argv[1], "rb").read()
    trace = pb.Trace()
    trace.ParseFromString(raw)
    packets = []
    compressed = 0
    for p in trace.packet:
        if p.HasField("compressed_packets"):
            compressed += 1
            if len(p.SerializeToString()) >= 512 * 1024:
                fail("a compressed packet of 512 KiB or more (Perfetto reads less)")
            inner = pb.Trace()
            inner.ParseFromString(zlib.decompress(p.compressed_packets))
            packets.extend(inner.packet)
        else:
            packets.append(p)

    tracks = {}      # uuid -> descriptor
    processes = {}   # uuid -> name
    seq = {}         # sequence id -> state
    open_slices = {}  # track uuid -> stack of (begin, name, category)
    slices = {}      # category -> count
    names = {}
    flows_begun, flows_ended = {}, {}
    counters = {}
    about = None
    lo, hi = None, None
    primary = None
    events = 0
    for i, p in enumerate(packets):
        where = f"packet {i}"
        if not p.HasField("trusted_packet_sequence_id"):
            fail(f"{where}: no sequence id")
        sid = p.trusted_packet_sequence_id
        st = seq.setdefault(sid, {"clock": None, "last": None, "track": None, "names": {}, "cats": {}, "anns": {}, "cleared": False})
        if p.HasField("clock_snapshot"):
            cs = p.clock_snapshot
            if cs.HasField("primary_trace_clock"):
                primary = cs.primary_trace_clock
            ids = {c.clock_id: c for c in cs.clocks}
            if 64 in ids:
                if not ids[64].is_incremental or 1 not in ids or ids[1].timestamp != ids[64].timestamp:
                    fail(f"{where}: clock 64 is not an incremental clock tied to REALTIME")
                st["clock"] = ids[64].timestamp
                st["last"] = ids[64].timestamp
            continue
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            if d.uuid in tracks:
                fail(f"{where}: track {d.uuid} described twice")
            if d.HasField("parent_uuid") and d.parent_uuid not in tracks:
                fail(f"{where}: track {d.uuid}'s parent {d.parent_uuid} is not described before it")
            tracks[d.uuid] = d
            if d.HasField("process"):
                processes[d.uuid] = d.process.process_name
            continue
        if not p.HasField("track_event"):
            fail(f"{where}: neither an event, a track nor a clock")
        events += 1
        if p.sequence_flags & 1:
            st["cleared"] = True
        if p.HasField("trace_packet_defaults"):
            dft = p.trace_packet_defaults
            if dft.timestamp_clock_id != 64:
                fail(f"{where}: defaults on clock {dft.timestamp_clock_id}, not 64")
            st["track"] = dft.track_event_defaults.track_uuid
        if not st["cleared"] or st["track"] is None or st["clock"] is None:
            fail(f"{where}: event before its sequence's clock and defaults")
        if p.HasField("interned_data"):
            for e in p.interned_data.event_names:
                st["names"][e.iid] = e.name
            for e in p.interned_data.event_categories:
                st["cats"][e.iid] = e.name
            for e in p.interned_data.debug_annotation_names:
                st["anns"][e.iid] = e.name
        ts = st["last"] + p.timestamp  # an unsigned delta: never backwards
        st["last"] = ts
        lo = ts if lo is None else min(lo, ts)
        hi = ts if hi is None else max(hi, ts)
        ev = p.track_event
        track = ev.track_uuid if ev.HasField("track_uuid") else st["track"]
        if track not in tracks:
            fail(f"{where}: event on undescribed track {track}")
        stack = open_slices.setdefault(track, [])
        if ev.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            if ev.name_iid not in st["names"]:
                fail(f"{where}: name iid {ev.name_iid} not interned on sequence {sid}")
            name = st["names"][ev.name_iid]
            cat = st["cats"].get(ev.category_iids[0], "?") if ev.category_iids else ""
            for c in ev.category_iids:
                if c not in st["cats"]:
                    fail(f"{where}: category iid {c} not interned")
            args = {}
            for a in ev.debug_annotations:
                if a.name_iid not in st["anns"]:
                    fail(f"{where}: annotation name iid {a.name_iid} not interned")
                args[st["anns"][a.name_iid]] = a.string_value if a.HasField("string_value") else a.int_value
            for f in ev.flow_ids:
                if f in flows_begun:
                    fail(f"{where}: flow {f} starts twice")
                flows_begun[f] = ts
            if ev.terminating_flow_ids:
                fail(f"{where}: a flow ends on a BEGIN (Perfetto links flows in time order: ends go on ENDs)")
            if stack and ts < stack[-1][0]:
                fail(f"{where}: slice begins before its parent")
            stack.append((ts, name, cat))
            slices[cat] = slices.get(cat, 0) + 1
            names[name] = names.get(name, 0) + 1
            if cat == "about":
                about = args
        elif ev.type == pb.TrackEvent.TYPE_SLICE_END:
            if not stack:
                fail(f"{where}: END with no open slice on track {track} ({tracks[track].name})")
            stack.pop()
            if ev.flow_ids:
                fail(f"{where}: a flow starts on an END")
            for f in ev.terminating_flow_ids:
                if f in flows_ended:
                    fail(f"{where}: flow {f} ends twice")
                flows_ended[f] = ts
        elif ev.type == pb.TrackEvent.TYPE_COUNTER:
            if not tracks[track].HasField("counter"):
                fail(f"{where}: counter value on a track that is not a counter")
            counters[tracks[track].name] = counters.get(tracks[track].name, 0) + 1
        else:
            fail(f"{where}: event of type {ev.type}")
    for t, stack in open_slices.items():
        if stack:
            fail(f"track {t} ({tracks[t].name}): {len(stack)} slices never end")
    if primary != 1:
        fail("the trace's clock is not REALTIME")
    if set(flows_begun) != set(flows_ended):
        fail(f"{len(set(flows_begun) ^ set(flows_ended))} flows with one end only")
    for f, t in flows_begun.items():
        if flows_ended[f] < t:
            fail(f"flow {f} ends before it starts")
    print(json.dumps({"bytes": len(raw), "packets": len(packets), "compressed_packets": compressed, "events": events,
                      "processes": sorted(processes.values()), "tracks": len(tracks), "slices": slices,
                      "flows": len(flows_begun), "counter_tracks": len(counters), "counter_samples": sum(counters.values()),
                      "counters": sorted(counters), "first_ns": lo, "last_ns": hi, "about": about,
                      "names": sorted(names)[:200]}, indent=1))


if __name__ == "__main__":
    main()
