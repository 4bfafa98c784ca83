#!/usr/bin/env bash
# The namespace testbed (root): up, status, down (idempotent, also of leftovers),
# connectivity, a shaped pair delivering its rate, per-pair delay emulated by the
# agents, a bundled profile replayed across 4 namespaces, time dilation. Every
# testbed is torn down when the script ends, whatever happens.
# Usage: testbed_test.sh TENSORWIRE_BINARY SOURCE_DIR
set -u
TW=$(realpath "$1")
SRC=$(realpath "$2")
. "$(dirname "$0")/lib.sh"
cd "$TW_TMP"
PY=/usr/bin/python3
NAME=twt$((RANDOM % 100))
trap '"$TW" testbed down --name $NAME > /dev/null 2>&1; rm -rf "$TW_TMP"' EXIT
[ "$(id -u)" = 0 ] || { echo "the testbed needs root"; exit 1; }

"$TW" profile synth --model mlp --ranks 2 --iterations 5 -o mlp2.yaml 2> /dev/null
cat > stream.yaml <<'EOF'
version: 1
iterations: 40
iteration_barrier: false
ranks: [{id: 0}, {id: 1}]
flows: [{id: f, src: 0, dst: 1}]
ops:
  - {id: s, type: send, flow: f, bytes: 1MiB}
EOF

up_status_down() {
  "$TW" testbed up --hosts 3 --name $NAME --rate 2gbit > up.txt || return 1
  ip netns list | grep -q "^$NAME-h2" && [ -e /sys/class/net/$NAME-br ] || return 1
  "$TW" testbed status --name $NAME > st.txt && grep -q "3 hosts on bridge $NAME-br" st.txt && grep -q 'link rate 2gbit' st.txt || return 1
  "$TW" testbed status --name $NAME --json > st.json || return 1
  local a1
  a1=$($PY -c 'import json; print(json.load(open("st.json"))["host_list"][1]["address"])')
  # Connectivity: host 0 reaches host 1 over the bridge.
  ip netns exec $NAME-h1 $PY -c '
import socket; s = socket.socket(); s.bind(("'$a1'", 17333)); s.listen(); c, _ = s.accept(); c.sendall(c.recv(5))' &
  local srv=$!
  sleep 0.3
  [ "$(ip netns exec $NAME-h0 $PY -c '
import socket; s = socket.create_connection(("'$a1'", 17333), timeout=5); s.sendall(b"hello"); print(s.recv(5).decode())')" = hello ] || return 1
  wait $srv
  # A second `up` with another host count is refused; with the same one it re-shapes.
  ! "$TW" testbed up --hosts 2 --name $NAME 2> again.err && grep -q 'is up with 3 hosts' again.err || return 1
  "$TW" testbed up --hosts 3 --name $NAME > /dev/null || return 1
  "$TW" testbed down --name $NAME | grep -q 'removed' || return 1
  ! ip netns list | grep -q "^$NAME-" && [ ! -e /sys/class/net/$NAME-br ] || return 1
  "$TW" testbed down --name $NAME | grep -q 'nothing to remove' || return 1
  # Leftovers of a crash, without any state: found by name.
  ip netns add $NAME-h7 && ip link add $NAME-br type bridge || return 1
  "$TW" testbed down --name $NAME > /dev/null && ! ip netns list | grep -q "^$NAME-h7" && [ ! -e /sys/class/net/$NAME-br ]
}
check "testbed up, status, connectivity, down (idempotent, and of leftovers)" up_status_down

shaped_pair() {
  "$TW" run stream.yaml --testbed 2 --name $NAME --pair 0-1:rate=200mbit --out sp --quiet > /dev/null 2> sp.err || { cat sp.err; return 1; }
  # Brought up for the run, so down again after it.
  [ ! -e /sys/class/net/$NAME-br ] || return 1
  "$TW" results rates sp --json > sp-rates.json || return 1
  $PY - <<'PY'
import json
rate = json.load(open("sp-rates.json"))["ranks"][1]["bits_per_second"] / 1e6
print(f"{rate:.1f} Mb/s")
# Goodput: TCP/IP headers take ~4% of what htb counts.
assert abs(rate - 200) <= 20, rate
PY
}
check "a pair shaped to 200 Mb/s delivers 200 Mb/s (within 10%, measured by the agents)" shaped_pair

four_namespaces() {
  "$TW" run "$SRC/traffic_profiles/resnet50-ring-4.yaml" --testbed 4 --name $NAME --rate 5gbit --iterations 2 --out r4 --json \
    > r4.json 2> r4.err || { cat r4.err; return 1; }
  "$TW" results check r4 | grep -q 'ok: ' || return 1
  $PY - <<'PY'
import json
j = json.load(open("r4.json"))
assert j["ok"] and len(j["iteration_ns"]) == 2, j
hosts = set()
for a in j["agents"]:
    # One kernel clock under the namespaces: every offset within its bound of zero.
    assert abs(a["clock_offset_ns"]) <= a["clock_bound_ns"], a
r = json.load(open("r4/run.json"))
peers = {a["peer"].split(":")[0] for a in r["agents"]}
assert len(peers) == 4, peers  # four hosts, four addresses
# Shaped links have a queueing discipline in each host: --tx-sched auto asks
# for TX_SCHED on every outgoing flow there (on loopback, replay_test, on none).
for rank in range(4):
    o = json.load(open(f"r4/rank-{rank}.json"))["options"]
    assert o["tx_sched_flows"] == 1, (rank, o)
PY
}
check "a bundled profile across 4 namespaces; clock offsets within their bounds" four_namespaces

pair_delay() {
  "$TW" run mlp2.yaml --testbed 2 --name $NAME --pair 0-1:delay=20ms --keep --out pd --quiet > /dev/null 2> pd.err || { cat pd.err; return 1; }
  [ -e /sys/class/net/$NAME-br ] || { echo "--keep did not keep it"; return 1; }
  "$TW" testbed status --name $NAME | grep -q '0-1 .* 20.00 ms' || return 1
  $PY - <<'PY'
import struct
for rank in (0, 1):
    data = open(f"pd/rank-{rank}.twr", "rb").read()[16:]
    n = 0
    for i in range(0, len(data), 64):
        if data[i] != 2: continue
        t = struct.unpack_from("<5q", data, i + 24)
        # delivered = last byte read + the pair's emulated one-way delay
        assert abs(t[2] - t[1] - 20_000_000) <= 1000, t
        n += 1
    assert n > 0
PY
  "$TW" testbed down --name $NAME > /dev/null
}
check "per-pair delay is emulated by the agents; --keep keeps the testbed" pair_delay

time_scaled() {
  "$TW" run mlp2.yaml --testbed 2 --name $NAME --time-scale 4 --out ts > ts.txt 2> ts.err || { cat ts.err; return 1; }
  grep -q 'time-scaled: the agents ran 4x slower' ts.txt || return 1
  $PY - <<'PY'
import json, re
raw = json.load(open("ts/rank-0.json"))["iteration_times_ns"]
raw_median = sorted(e - s for s, e in raw)[len(raw) // 2]
shown = re.search(r"iterations: median ([0-9.]+) ms", open("ts.txt").read()).group(1)
ratio = raw_median / 1e6 / float(shown)
assert 3.0 < ratio < 5.0, (raw_median, shown, ratio)
assert json.load(open("ts/run.json"))["time_scale"] == 4
assert "scaled back" in json.load(open("ts/compare.json"))["replay"]
PY
}
check "--time-scale stretches the replay and scales the results back" time_scaled

# The capture's wire tap inside a namespace host, sending to another over the
# switch: the wire times carry the link's rate; when the switch's queue is too
# short, the tap sees the retransmissions the sender's kernel counts.
cat > rx.py <<'EOF'
import socket, sys
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind((sys.argv[1], int(sys.argv[2]))); l.listen(); open(sys.argv[3], "w").close()
a, _ = l.accept(); n = 0
while True:
    d = a.recv(1 << 20)
    if not d: break
    n += len(d)
a.close()
print(n)
EOF
cat > tx.py <<'EOF'
import socket, struct, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
c.sendall(b"x" * int(sys.argv[3]))
c.shutdown(socket.SHUT_WR); c.recv(1)
print(struct.unpack_from("I", c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104), 100)[0])  # total_retrans
EOF
capture_send() {  # OUT PORT BYTES: the receiver's count in OUT.rx, the kernel's retransmissions in OUT.tx
  rm -f ready
  ip netns exec $NAME-h1 timeout 60 $PY rx.py "$h1" "$2" ready > "$1.rx" &
  local rx=$!
  for _ in $(seq 100); do [ -e ready ] && break; sleep 0.05; done
  ip netns exec $NAME-h0 "$TW" capture --out "$1" --quiet -- timeout 60 $PY tx.py "$h1" "$2" "$3" > "$1.tx" || return 1
  wait $rx && "$TW" trace show "$1" --json > "$1.json"
}
wire_on_testbed() {
  "$TW" testbed up --hosts 2 --name $NAME --rate 100mbit > /dev/null || return 1
  h1=$("$TW" testbed status --name $NAME --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["host_list"][1]["address"])')
  capture_send capa 7001 6000000 || return 1
  $PY - capa <<'EOF' || return 1
import json, sys
out = sys.argv[1]
assert int(open(out + ".rx").read()) == 6000000
j = json.load(open(out + ".json"))
c = [c for c in j["connections"] if c["bytes_sent"]][0]
assert c["on_wire"] and c["wire_bytes"] == 6000000, c
m = [m for m in j["messages"] if m["connection"] == j["connections"].index(c)]
first, last = min(x["wire_first_ns"] for x in m), max(x["wire_last_ns"] for x in m)
rate = 6000000 * 8 / ((last - first) / 1e9)
# The tap is in the sender's namespace, before the switch's 100 Mb/s queue:
# frames leave as fast as acknowledgements allow, which the shaped queue paces.
assert 85e6 < rate < 115e6, rate
print(f"{rate / 1e6:.1f} Mb/s on the wire")
EOF
  # A switch queue of 30 kB drops: the sender retransmits, and the tap sees it.
  tc qdisc replace dev $NAME-v1 root tbf rate 100mbit burst 50000b limit 30000 || return 1
  capture_send capb 7002 6000000 || return 1
  $PY - capb <<'EOF'
import json, sys
out = sys.argv[1]
assert int(open(out + ".rx").read()) == 6000000
kernel = int(open(out + ".tx").read())
j = json.load(open(out + ".json"))
c = [c for c in j["connections"] if c["bytes_sent"]][0]
assert c["wire_bytes"] == 6000000, c
assert kernel > 0 and c["retransmits"] > 0 and c["retransmitted_bytes"] > 0, (kernel, c)
# Every message still completes: its last byte was seen and acknowledged.
assert all(m["wire_last_ns"] > 0 and m["acked_ns"] >= m["wire_last_ns"] for m in j["messages"])
print(f"kernel {kernel} segments, wire {c['retransmits']} frames / {c['retransmitted_bytes']} bytes retransmitted")
EOF
  local rc=$?
  "$TW" testbed down --name $NAME > /dev/null
  return $rc
}
check "the wire tap in a testbed host: the link's rate in the wire times; retransmissions seen" wire_on_testbed

bad_input() {
  local out
  out=$("$TW" testbed up --hosts 2 --name $NAME --pair 0-5:rate=1mbit 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q "the testbed has hosts 0 to 1" || return 1
  out=$("$TW" testbed up --hosts 2 --name $NAME --rate fast 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q "expected a rate like 10gbit" || return 1
  out=$("$TW" testbed up --hosts 2 --name 'bad name!' 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q "up to 8 letters" || return 1
  out=$("$TW" run mlp2.yaml --local 2 --rate 1gbit 2>&1)
  [ $? -ne 0 ] && echo "$out" | grep -q "use them with --testbed N" || return 1
  out=$("$TW" testbed status --name $NAME 2>&1)
  [ $? -eq 1 ] && echo "$out" | grep -q "is not up"
}
check "bad testbed input gets one clear line" bad_input

finish
