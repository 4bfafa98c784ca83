// Host clocks onto one time line, from the traffic: a byte is read after it was
// sent, so for a message from host A to host B, (B's clock - A's clock) is at most
// B's receive time minus A's send time. Messages both ways bound the offset from
// both sides; the estimate is the middle of the bound, its half-width the
// uncertainty reported.
#include <algorithm>
#include <limits>
#include <map>

#include "build_job.hpp"

namespace tw::build {

namespace {

constexpr Nanos kNone = std::numeric_limits<Nanos>::max();

void shift(ProcessTrace& t, Nanos by) {
  for (auto& e : t.io) e.enter_ns -= by, e.exit_ns -= by;
  for (auto& e : t.conns) e.at_ns -= by;
  for (auto& e : t.tcp_info) e.at_ns -= by;
  for (auto& e : t.marks) e.at_ns -= by;
}

}  // namespace

std::vector<BuildReport::ClockLine> align_clocks(std::vector<ProcessTrace>& traces, const CaptureAnalysis& a,
                                                 std::size_t reference, std::vector<std::string>& warnings) {
  std::vector<std::string> hosts;
  std::map<std::string, std::size_t> host_index;
  std::vector<std::size_t> host_of(traces.size());
  if (reference < traces.size()) host_index.emplace(traces[reference].host, 0), hosts.push_back(traces[reference].host);
  for (std::size_t p = 0; p < traces.size(); ++p) {
    const auto [it, fresh] = host_index.try_emplace(traces[p].host, hosts.size());
    if (fresh) hosts.push_back(traces[p].host);
    host_of[p] = it->second;
  }
  const std::size_t h = hosts.size();
  std::vector<BuildReport::ClockLine> lines;
  if (h <= 1) {
    if (h == 1) lines.push_back({hosts[0], 0, 0});
    return lines;
  }
  // upper[a][b]: the least (receive on b) - (send on a) over messages a -> b.
  std::vector<std::vector<Nanos>> upper(h, std::vector<Nanos>(h, kNone));
  for (const Message& m : a.messages) {
    const Connection& c = a.connections[m.connection];
    if (!c.peer || m.recv_first < 0) continue;
    const std::size_t x = host_of[c.process], y = host_of[a.connections[*c.peer].process];
    if (x == y) continue;
    upper[x][y] = std::min(upper[x][y], m.recv_first - m.ready);
  }
  // Grow a tree from host 0 (the reference's), always over the pair with the
  // tightest bound.
  std::vector<Nanos> offset(h, 0), uncertainty(h, -1);
  std::vector<bool> placed(h, false);
  placed[0] = true;
  uncertainty[0] = 0;
  for (std::size_t round = 1; round < h; ++round) {
    std::size_t best_from = h, best_to = h;
    Nanos best_width = kNone;
    bool best_two_sided = false;
    for (std::size_t x = 0; x < h; ++x) {
      if (!placed[x]) continue;
      for (std::size_t y = 0; y < h; ++y) {
        if (placed[y]) continue;
        const bool up = upper[x][y] != kNone, down = upper[y][x] != kNone;
        if (!up && !down) continue;
        const bool two = up && down;
        const Nanos width = two ? upper[x][y] + upper[y][x] : kNone - 1;
        if (best_to == h || (two && !best_two_sided) || (two == best_two_sided && width < best_width)) {
          best_from = x, best_to = y, best_width = width, best_two_sided = two;
        }
      }
    }
    if (best_to == h) break;  // the rest never exchanged a byte with the placed hosts
    const std::size_t x = best_from, y = best_to;
    // d = clock(y) - clock(x) lies in [-upper[y][x], upper[x][y]].
    Nanos d = 0, u = -1;
    if (best_two_sided) {
      d = (upper[x][y] - upper[y][x]) / 2;
      u = (upper[x][y] + upper[y][x]) / 2;
      if (u < 0) {
        warnings.push_back("the clocks of " + hosts[x] + " and " + hosts[y] + " disagree with causality by " +
                           human_duration(-2 * u) + " (a clock stepped during the capture?)");
        u = 0;
      }
    } else if (upper[x][y] != kNone) {
      d = upper[x][y];  // bounded above only: the receiver's clock is at most this far ahead
    } else {
      d = -upper[y][x];
    }
    offset[y] = offset[x] + d;
    uncertainty[y] = u < 0 || uncertainty[x] < 0 ? -1 : uncertainty[x] + u;
    placed[y] = true;
    if (u < 0) {
      warnings.push_back("the clock of " + hosts[y] + " is bounded from one side only (traffic one way): its offset is a bound");
    }
  }
  for (std::size_t y = 0; y < h; ++y) {
    if (!placed[y]) warnings.push_back("host " + hosts[y] + " exchanged no traced byte with the others: its clock is taken as is");
    lines.push_back({hosts[y], offset[y], placed[y] ? uncertainty[y] : -1});
  }
  for (std::size_t p = 0; p < traces.size(); ++p) {
    if (offset[host_of[p]] != 0) shift(traces[p], offset[host_of[p]]);
  }
  return lines;
}

}  // namespace tw::build
