# Statistics shared by the benchmark scripts (sourced, not run): each figure is a
# median of repeated runs shown with its range, next to its baseline as a ratio.
# Values are plain numbers, one per argument; output is printed for $(...).

# median VALUES...: the middle value (the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
# spread VALUES...: "median (min-max)".
spread() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {printf "%s (%s-%s)", v[int((NR+1)/2)], v[1], v[NR]}'; }
# spread_signed VALUES...: "median (min to max)", for values that may be negative.
spread_signed() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {printf "%s (%s to %s)", v[int((NR+1)/2)], v[1], v[NR]}'; }
# maximum VALUES...: the largest value, as given.
maximum() { printf '%s\n' "$@" | sort -g | tail -1; }
# range VALUES...: max - min.
range() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[NR] - v[1]}'; }
# paired_ratio "A1 A2 ..." "B1 B2 ...": each Ak as a percentage of Bk (a run and
# the baseline run beside it), as "median% (min-max%)". On a machine whose speed
# drifts between runs, a ratio of neighbours cancels the drift that a ratio of
# two medians taken over different minutes keeps.
paired_ratio() {
  /usr/bin/python3 -c "
import sys
a, b = sys.argv[1].split(), sys.argv[2].split()
assert len(a) == len(b) and a, 'paired_ratio: runs and baselines differ in number'
r = sorted(float(x) / float(y) * 100 for x, y in zip(a, b))
print(f'{r[(len(r) - 1) // 2]:.0f}% ({r[0]:.0f}-{r[-1]:.0f}%)')" "$1" "$2"
}
# change A B: A's difference from B as a signed percentage, like "+1.5%".
change() { /usr/bin/python3 -c "print(f'{($1/$2-1)*100:+.1f}%')"; }
# within A B RANGE: true when |A - B| <= RANGE.
within() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= r)}'; }

# Benchmarks need a quiet machine: a build, a test or another benchmark slows the
# baseline as much as or more than us. load1: the 1-minute load average.
load1() { cut -d' ' -f1 /proc/loadavg; }
# table_start, then table_load after the table: a line giving the 1-minute load
# average when the table's runs began and when they ended, so that every table
# says what the machine was doing while it was measured.
table_start() { table_load_at_start=$(load1); }
# quiet_table_start: table_start once the 1-minute load is down to TW_BENCH_MAX_LOAD
# (0.5), or after 10 minutes without (the table then says the load it began at).
quiet_table_start() { wait_quiet "${TW_BENCH_MAX_LOAD:-0.5}" 600 || true; table_start; }
table_load() { echo; echo "1-minute load average while this table was measured: $table_load_at_start at the start, $(load1) at the end (nothing else ran; its own runs keep both cores busy)."; }
# wait_quiet MAX SECONDS: waits up to SECONDS for the 1-minute load average to
# fall to MAX or below; true if it did.
wait_quiet() {
  local max=$1 deadline=$((SECONDS + $2))
  while awk -v l="$(load1)" -v m="$max" 'BEGIN {exit !(l > m)}'; do
    [ $SECONDS -lt "$deadline" ] || return 1
    sleep 5
  done
}
# human_bytes N: like "1.5 MB" (decimal units).
human_bytes() { /usr/bin/python3 -c "
n = float($1)
for u in ('B', 'kB', 'MB', 'GB', 'TB'):
    if n < 1000 or u == 'TB':
        print(f'{n:.0f} {u}' if u == 'B' else f'{n:.1f} {u}'); break
    n /= 1000"; }

# namespace_cc ALGORITHM NAMESPACE...: the namespaces' default TCP congestion
# control, which every socket made in them then starts with, a baseline's
# included. A namespace may only take an algorithm that the host allows to
# everyone (net.ipv4.tcp_allowed_congestion_control, the host's own): the host's
# list is widened for the moment the namespaces take it, then put back. iperf3 -C
# is no substitute: it sets the algorithm on a connected socket, where BBR's start
# has already made the socket paced by the kernel (in 3 runs under -C cubic, iperf3
# moved 19-33 Gb/s with one flow, against 64-71 under a cubic namespace).
namespace_cc() {
  local cc=$1 allowed ns ok=0
  shift
  allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
  case " $allowed " in *" $cc "*) ;; *) sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed $cc" || return 1 ;; esac
  for ns in "$@"; do ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$cc" || ok=1; done
  sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed"
  return $ok
}
