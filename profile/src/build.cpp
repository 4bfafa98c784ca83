// `profile build`: the steps in order (docs/profile-build.md). Ranks and the
// connections between them, host clocks onto one time line, iterations, the
// steady iterations used, one op per message position, dependencies, compute
// time, observed timings.
#include "tensorwire/profile/build.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "build_job.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/units.hpp"

namespace tw {

namespace {

using build::Direction;
using build::kNoIteration;

// A connection with messages in fewer of the iterations than this is not part of
// the per-iteration schedule (a heartbeat, a store polled now and then).
constexpr double kRegularShare = 0.5;

// The mean: compute adds up along a path, so the mean keeps the iteration's time.
// (A trimmed mean, or the median, drops the long waits of a rank descheduled by
// its neighbours on shared cores, which are part of the job's time: replays came
// out 3-9% faster with the middle 80%.) A stall far beyond the spread of the
// others (beyond the median plus 5 interquartile ranges: a page fault storm, a
// stop of the process) is left out, as one would otherwise lengthen every
// replayed iteration.
Nanos mean_of(std::vector<Nanos> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))]; };
  const Nanos fence = at(0.5) + 5 * std::max<Nanos>(at(0.75) - at(0.25), 1 * kMicro);
  long double sum = 0;
  std::size_t n = 0;
  for (Nanos x : v) {
    if (x <= fence) sum += static_cast<long double>(x), ++n;
  }
  return static_cast<Nanos>(std::llround(sum / static_cast<long double>(std::max<std::size_t>(n, 1))));
}

Nanos median_of(std::vector<Nanos> v) { return v.empty() ? 0 : percentile(std::move(v), 0.5); }

std::string rank_name(RankId r) { return "r" + std::to_string(r); }

// Which iterations to use: the requested range, or the longest run of
// consecutive iterations that carry the same messages (the same sizes on every
// connection, or failing that the same counts).
struct Choice {
  std::vector<std::int64_t> used;
  bool by_count = false;
  std::vector<std::string> dropped;
};

Choice choose_iterations(const std::vector<std::int64_t>& numbers,
                         const std::map<std::int64_t, std::vector<std::vector<Bytes>>>& sizes, const BuildOptions& o) {
  std::vector<std::int64_t> pool;
  for (std::int64_t n : numbers) {
    if (!o.iterations || (n >= o.iterations->first && n < o.iterations->second)) pool.push_back(n);
  }
  if (pool.empty()) {
    throw std::runtime_error(o.iterations ? "--iterations " + std::to_string(o.iterations->first) + ":" +
                                                std::to_string(o.iterations->second) + " holds none of the iterations found (" +
                                                std::to_string(numbers.empty() ? 0 : numbers.front()) + " to " +
                                                std::to_string(numbers.empty() ? 0 : numbers.back()) + ")"
                                          : "no iteration in which every rank sent");
  }
  Choice c;
  for (int pass = 0; pass < 2; ++pass) {
    c.by_count = pass == 1;
    // Pass 0: the same sizes on every flow (in any order: collectives running at
    // once interleave differently each time). Pass 1: the same number of
    // messages and bytes (messages grouped by timing differ in size).
    const auto signature = [&](std::int64_t n) {
      std::vector<std::vector<Bytes>> s = sizes.at(n);
      for (auto& v : s) {
        if (c.by_count) {
          Bytes total = 0;
          for (Bytes b : v) total += b;
          v = {v.size(), total};
        } else {
          std::sort(v.begin(), v.end());
        }
      }
      return s;
    };
    std::map<std::vector<std::vector<Bytes>>, std::size_t> count;
    for (std::int64_t n : pool) ++count[signature(n)];
    const auto mode = std::max_element(count.begin(), count.end(), [](const auto& x, const auto& y) { return x.second < y.second; })->first;
    std::size_t best_begin = 0, best_len = 0;
    for (std::size_t i = 0; i < pool.size();) {
      if (signature(pool[i]) != mode) {
        ++i;
        continue;
      }
      std::size_t k = i + 1;
      while (k < pool.size() && pool[k] == pool[k - 1] + 1 && signature(pool[k]) == mode) ++k;
      if (k - i > best_len) best_begin = i, best_len = k - i;
      i = k;
    }
    if (best_len >= 2 || pass == 1 || pool.size() == 1) {
      c.used.assign(pool.begin() + static_cast<std::ptrdiff_t>(best_begin), pool.begin() + static_cast<std::ptrdiff_t>(best_begin + best_len));
      break;
    }
  }
  // An iteration starts where the one before it ended; without that one, its
  // first wait is unknown (it would come out as no wait at all).
  std::string first_unknown;
  if (c.used.size() > 2 && !std::binary_search(numbers.begin(), numbers.end(), c.used.front() - 1)) {
    first_unknown = "iteration " + std::to_string(c.used.front()) + ": the first seen, so when it began is unknown";
    c.used.erase(c.used.begin());
  }
  const std::set<std::int64_t> used(c.used.begin(), c.used.end());
  for (std::int64_t n : numbers) {
    if (!first_unknown.empty() && n == c.used.front() - 1) {
      c.dropped.push_back(first_unknown);
      continue;
    }
    if (used.count(n)) continue;
    std::string why = o.iterations && (n < o.iterations->first || n >= o.iterations->second) ? "outside --iterations"
                      : n < c.used.front()                                                  ? "warm-up: other messages than the steady iterations"
                      : n > c.used.back()                                                   ? "after the steady iterations: other messages"
                                                                                            : "other messages than the steady iterations";
    c.dropped.push_back("iteration " + std::to_string(n) + ": " + why);
  }
  return c;
}

}  // namespace

std::vector<CaptureInput> read_captures(const std::vector<std::string>& dirs) {
  std::vector<CaptureInput> out;
  for (const std::string& d : dirs) out.push_back({d, read_capture_dir(d)});
  return out;
}

bool is_capture_dir(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return false;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (capture_dir::is_description(e.path().filename().string())) return true;
  }
  return false;
}

BuildCommand parse_build_command(const std::string& generator) {
  BuildCommand c;
  std::vector<std::string> words;
  for (std::size_t i = 0; i < generator.size();) {
    const std::size_t j = generator.find(' ', i);
    words.push_back(generator.substr(i, j == std::string::npos ? std::string::npos : j - i));
    i = j == std::string::npos ? generator.size() : j + 1;
  }
  if (words.size() < 3 || words[0] != "tensorwire" || words[1] != "profile" || words[2] != "build") return c;
  try {
  for (std::size_t i = 3; i < words.size(); ++i) {
    const std::string& w = words[i];
    if ((w == "-o" || w == "--out" || w == "--compute-min-us") && i + 1 < words.size()) {
      if (w == "--compute-min-us") c.options.compute_min = static_cast<Nanos>(std::stod(words[i + 1]) * 1e3);
      ++i;
    } else if (w == "--iterations" && i + 1 < words.size()) {
      const std::string& r = words[++i];
      const auto colon = r.find(':');
      if (colon != std::string::npos) c.options.iterations = std::make_pair(std::stoll(r.substr(0, colon)), std::stoll(r.substr(colon + 1)));
    } else if (w == "--keep-control") {
      c.options.keep_control = true;
    } else if (w == "--typical") {
      c.options.per_iteration = false;
    } else if (!w.empty() && w[0] != '-') {
      c.dirs.push_back(w);
    }
  }
  } catch (const std::exception&) {  // numbers that are not: an edited file, not ours
    return {};
  }
  return c;
}

BuiltProfile build_profile(const std::vector<CaptureInput>& captures, const BuildOptions& o) {
  BuiltProfile out;
  BuildReport& rep = out.report;
  std::vector<ProcessTrace> traces;
  std::string dirs_text;
  for (const CaptureInput& c : captures) {
    if (c.traces.empty()) throw std::runtime_error(c.dir + ": no traced process in this capture");
    traces.insert(traces.end(), c.traces.begin(), c.traces.end());
    dirs_text += (dirs_text.empty() ? "" : " ") + c.dir;
  }
  if (traces.empty()) throw std::runtime_error("no capture to build from");

  // Ranks and clocks come from a first look; the messages are made again on the
  // shared time line.
  CaptureAnalysis a = analyse_capture(traces);
  build::Ranks ranks = build::find_ranks(traces, a, rep.warnings);
  if (ranks.ranks.size() < 2) {
    throw std::runtime_error(dirs_text + ": fewer than two processes exchanged traced TCP traffic (" +
                             std::to_string(ranks.ranks.size()) + " rank found)");
  }
  rep.clocks = build::align_clocks(traces, a, ranks.ranks[0].process, rep.warnings);
  if (std::any_of(rep.clocks.begin(), rep.clocks.end(), [](const auto& c) { return c.offset != 0; })) a = analyse_capture(traces);
  std::vector<Direction> dirs = build::directions(a, ranks);
  build::assign_roles(ranks, traces, a, dirs);

  // Iterations, then the connections whose traffic does not follow them; found
  // again without those when there were any.
  build::Iterations its;
  for (int pass = 0; pass < 2; ++pass) {
    its = build::find_iterations(traces, a, ranks, dirs, rep.warnings);
    if (its.numbers.empty()) throw std::runtime_error(dirs_text + ": no iteration in which every rank sent");
    const std::set<std::int64_t> numbers(its.numbers.begin(), its.numbers.end());
    bool changed = false;
    for (Direction& d : dirs) {
      if (d.use != "data") continue;
      std::set<std::int64_t> present;
      for (std::size_t m : d.messages) {
        if (numbers.count(its.of_message[m])) present.insert(its.of_message[m]);
      }
      if (static_cast<double>(present.size()) < kRegularShare * static_cast<double>(numbers.size())) {
        d.use = d.store ? "store" : "irregular";
        changed = true;
      }
    }
    if (!changed) break;
  }
  if (o.keep_control) {
    for (Direction& d : dirs) {
      const Connection& c = a.connections[d.conn];
      if (d.use == "data" || !c.peer) continue;
      const std::optional<RankId> src = ranks.of_process[c.process];
      const std::optional<RankId> dst = ranks.of_process[a.connections[*c.peer].process];
      if (src.has_value() && dst.has_value() && src.value() != dst.value()) d.use = "data", d.src = src.value(), d.dst = dst.value();
    }
  }
  std::vector<std::size_t> data;  // indices into dirs, the profile's flows in order
  for (std::size_t d = 0; d < dirs.size(); ++d) {
    if (dirs[d].use == "data") data.push_back(d);
  }
  std::stable_sort(data.begin(), data.end(), [&](std::size_t x, std::size_t y) {
    return std::tie(dirs[x].src, dirs[x].dst) < std::tie(dirs[y].src, dirs[y].dst);
  });
  if (data.empty()) throw std::runtime_error(dirs_text + ": no connection between two ranks carries per-iteration traffic");

  // Messages per iteration and flow, in stream order (then, once the iterations
  // are chosen, in the order that matches them up across iterations).
  std::map<std::int64_t, std::vector<std::vector<std::size_t>>> per;  // iteration -> [flow] -> messages
  for (std::int64_t n : its.numbers) per[n].resize(data.size());
  for (std::size_t f = 0; f < data.size(); ++f) {
    for (std::size_t m : dirs[data[f]].messages) {
      const auto it = per.find(its.of_message[m]);
      if (it != per.end()) it->second[f].push_back(m);
    }
  }
  std::map<std::int64_t, std::vector<std::vector<Bytes>>> sizes;
  for (const auto& [n, flows] : per) {
    auto& s = sizes[n];
    for (const auto& v : flows) {
      s.emplace_back();
      for (std::size_t m : v) s.back().push_back(a.messages[m].end - a.messages[m].begin);
    }
  }
  const Choice choice = choose_iterations(its.numbers, sizes, o);
  if (choice.by_count) {
    rep.warnings.push_back("message sizes differ between iterations (messages grouped by timing): ops are matched by "
                           "their order on each connection and take the median size");
  }
  if (!choice.by_count) {
    // The same sizes in every used iteration: a message is matched to the one of
    // the same size and the same rank among equal sizes in the other iterations.
    for (std::int64_t n : choice.used) {
      for (auto& v : per.at(n)) {
        std::stable_sort(v.begin(), v.end(), [&](std::size_t x, std::size_t y) {
          return a.messages[x].end - a.messages[x].begin < a.messages[y].end - a.messages[y].begin;
        });
      }
    }
  }
  const std::size_t K = choice.used.size();
  rep.iteration_source = its.source;
  rep.detected = static_cast<std::int64_t>(its.numbers.size());
  rep.first_used = choice.used.front();
  rep.used = static_cast<std::int64_t>(K);
  rep.dropped = choice.dropped;
  if (its.before_first > 0) {
    rep.dropped.insert(rep.dropped.begin(), std::to_string(its.before_first) +
                                                " messages before the first steady iteration: set-up and warm-up");
  }

  // The profile's ranks and flows.
  Profile& p = out.profile;
  p.metadata.source = "capture";
  p.metadata.pattern = "captured";
  p.metadata.description = "built from " + dirs_text + ": iterations " + std::to_string(choice.used.front()) + " to " +
                           std::to_string(choice.used.back()) + " (" + its.source + ")";
  p.metadata.generator = o.generator;
  p.iterations = K;
  p.iteration_barrier = true;
  for (std::size_t r = 0; r < ranks.ranks.size(); ++r) {
    p.ranks.push_back({static_cast<RankId>(r), traces[ranks.ranks[r].process].host, ranks.ranks[r].role});
  }
  std::map<std::pair<RankId, RankId>, int> pair_count;
  for (std::size_t d : data) {
    const int n = ++pair_count[{dirs[d].src, dirs[d].dst}];
    p.flows.push_back({rank_name(dirs[d].src) + "-" + rank_name(dirs[d].dst) + (n > 1 ? "#" + std::to_string(n) : ""), dirs[d].src, dirs[d].dst});
  }

  // When the receiver had each message. A job reads when it asks: a Gloo pair
  // thread at once, a pipeline stage once it is ready for the next micro-batch,
  // an MPI rank inside its next MPI call; the replay's agents read at once. So a
  // receipt is the bytes' arrival plus the connection's wake-up lag (the reads
  // that came soonest after arrival, its 10th percentile: a waiting reader's
  // wake-up, which the agent's own wake-up stands for in the replay), or the read
  // itself when sooner. A job that read later was busy, and what it was busy
  // with stays in the waits of its ops, where a dependency on its own previous
  // op holds it back as in the job. The arrival is the message's send (or its
  // last segment on the wire) plus the connection's fastest delivery.
  const std::size_t C = a.connections.size();
  std::vector<Nanos> delivery(C, std::numeric_limits<Nanos>::max());
  const auto left = [](const Message& m) { return m.wire_last >= 0 ? m.wire_last : m.sent_app; };
  for (const Message& m : a.messages) {
    if (m.recv_last >= 0) delivery[m.connection] = std::min(delivery[m.connection], std::max<Nanos>(0, m.recv_last - left(m)));
  }
  const auto arrived = [&](const Message& m) {
    return std::min(m.recv_last, std::max(m.sent_app, left(m) + delivery[m.connection]));
  };
  std::vector<Nanos> wake_lag(C, 0);
  {
    std::vector<std::vector<Nanos>> lags(C);
    for (const Message& m : a.messages) {
      if (m.recv_last >= 0) lags[m.connection].push_back(m.recv_last - arrived(m));
    }
    for (std::size_t c = 0; c < C; ++c) wake_lag[c] = lags[c].empty() ? 0 : percentile(std::move(lags[c]), 0.1);
  }
  // The replay keeps the lag too: its agents read at once, and an MPI rank that
  // reads only inside its next call left every message about 0.5 ms in the
  // kernel, each hop of a dependency chain that much later (2 ranks on 2 hosts:
  // the replay ran 19-27% fast without it). The agent takes its own wake-up off.
  for (std::size_t f = 0; f < data.size(); ++f) {
    p.flows[f].read_lag = wake_lag[dirs[data[f]].conn];
    if (p.flows[f].read_lag >= kMicro) rep.read_lags.emplace_back(p.flows[f].id, p.flows[f].read_lag);
  }
  std::stable_sort(rep.read_lags.begin(), rep.read_lags.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
  const auto arrival = [&](const Message& m) {
    if (m.recv_last < 0) return Nanos{-1};
    return std::min(m.recv_last, arrived(m) + wake_lag[m.connection]);
  };

  // One send per message position; its instances in the used iterations.
  std::vector<build::SendTimes> sends;
  std::vector<std::pair<FlowIndex, std::size_t>> send_at;  // (flow, position)
  std::vector<Bytes> send_bytes;
  for (std::size_t f = 0; f < data.size(); ++f) {
    const std::size_t positions = per.at(choice.used.front())[f].size();
    for (std::size_t j = 0; j < positions; ++j) {
      build::SendTimes s;
      s.rank = dirs[data[f]].src;
      s.dst = dirs[data[f]].dst;
      std::vector<Nanos> b;  // sizes, in percentile()'s type
      for (std::int64_t n : choice.used) {
        const auto& v = per.at(n)[f];
        const Message* m = j < v.size() ? &a.messages[v[j]] : nullptr;
        s.ready.push_back(m ? m->ready : -1);
        s.sent.push_back(m ? m->sent_app : -1);
        s.received.push_back(m ? arrival(*m) : -1);
        s.read.push_back(m ? m->recv_last : -1);
        if (m) b.push_back(static_cast<Nanos>(m->end - m->begin));
      }
      sends.push_back(std::move(s));
      send_at.emplace_back(static_cast<FlowIndex>(f), j);
      send_bytes.push_back(static_cast<Bytes>(median_of(std::move(b))));
    }
  }
  // When each rank could start each used iteration: its previous iteration's last
  // send returned and last message arrived (the replay's barrier).
  const std::size_t R = ranks.ranks.size();
  std::map<std::int64_t, std::vector<Nanos>> ends;  // iteration -> [rank] last activity
  std::map<std::int64_t, std::vector<Nanos>> firsts;  // iteration -> [rank] first ready
  for (std::size_t d = 0; d < dirs.size(); ++d) {
    if (dirs[d].use != "data") continue;
    for (std::size_t m : dirs[d].messages) {
      const std::int64_t n = its.of_message[m];
      if (n == kNoIteration) continue;
      auto& e = ends.try_emplace(n, std::vector<Nanos>(R, -1)).first->second;
      auto& f = firsts.try_emplace(n, std::vector<Nanos>(R, -1)).first->second;
      const Message& x = a.messages[m];
      e[dirs[d].src] = std::max(e[dirs[d].src], x.sent_app);
      if (x.recv_last >= 0) e[dirs[d].dst] = std::max(e[dirs[d].dst], arrival(x));
      if (f[dirs[d].src] < 0 || x.ready < f[dirs[d].src]) f[dirs[d].src] = x.ready;
    }
  }
  std::vector<std::vector<Nanos>> rank_start(R, std::vector<Nanos>(K, -1)), rank_end(R, std::vector<Nanos>(K, -1));
  for (std::size_t k = 0; k < K; ++k) {
    const std::int64_t n = choice.used[k];
    const auto prev = ends.find(n - 1);
    for (std::size_t r = 0; r < R; ++r) {
      const Nanos first = firsts.count(n) ? firsts.at(n)[r] : -1;
      Nanos start = prev != ends.end() ? prev->second[r] : -1;
      if (start < 0 || (first >= 0 && start > first)) start = first;
      rank_start[r][k] = start;
      rank_end[r][k] = ends.count(n) ? ends.at(n)[r] : -1;
    }
  }
  for (std::size_t r = 0; r < R; ++r) {  // a rank that only receives starts with the job
    for (std::size_t k = 0; k < K; ++k) {
      if (rank_start[r][k] >= 0) continue;
      Nanos s = -1;
      for (std::size_t q = 0; q < R; ++q) {
        if (rank_start[q][k] >= 0 && (s < 0 || rank_start[q][k] < s)) s = rank_start[q][k];
      }
      rank_start[r][k] = s;
    }
  }
  // The replay starts a rank's iteration once the one before is over on it (the
  // barrier). A rank that in the capture began most iterations while messages of
  // the one before were still arriving is held there in the replay, each time:
  // its iterations were cut inside the job's (once, on 3 hosts, two DDP ranks
  // 4.5 and 6.5 ms in, and the replay ran 45% slow, with every iteration alike),
  // or the job overlaps its iterations. In 47 captures on 2 and 3 hosts (DDP 29,
  // the parameter server, the pipeline and MPI 6 each) no rank did in more than
  // 2 of 28 iterations.
  for (std::size_t r = 0; r < R; ++r) {
    std::vector<Nanos> early;  // how long before the iteration before was over on it (arrivals, own sends)
    std::size_t seen = 0;
    for (std::size_t k = 0; k < K; ++k) {
      const auto prev = ends.find(choice.used[k] - 1);
      const auto now = firsts.find(choice.used[k]);
      if (prev == ends.end() || now == firsts.end() || prev->second[r] < 0 || now->second[r] < 0) continue;
      ++seen;
      if (prev->second[r] > now->second[r]) early.push_back(prev->second[r] - now->second[r]);
    }
    if (seen >= 3 && 2 * early.size() > seen) {
      rep.warnings.push_back(rank_name(static_cast<RankId>(r)) + " began " + std::to_string(early.size()) + " of " +
                             std::to_string(seen) + " iterations while messages of the one before were still arriving "
                             "or its own sends still going (" + human_duration(median_of(early)) +
                             " before the last, in the median): the replay holds it until the one before is over on it, "
                             "and runs slow. Either its iterations were cut inside the job's "
                             "(marking them with tensorwire.annotate settles it: docs/profile-build.md) or the job "
                             "overlaps them");
    }
  }
  const build::Inferred inf = build::infer_dependencies(sends, rank_start);

  // The wait before each send: a compute op when long enough and when it did not
  // overlap, in any used iteration, a longer wait of the same rank that already
  // became a compute op (a replayed rank computes one op at a time; the job ran
  // its communication threads beside its compute thread, and a wait that
  // overlapped a long computation only sometimes queued behind it in the replay,
  // 3 ms in one DDP iteration); the send's gap otherwise, which occupies nothing.
  std::vector<std::vector<std::pair<Nanos, std::size_t>>> waits(R);  // (mean, send)
  std::vector<Nanos> spreads;
  for (std::size_t i = 0; i < sends.size(); ++i) {
    spreads.push_back(build::spread(inf.wait[i]));
    const Nanos mean = mean_of(inf.wait[i]);
    if (mean >= o.compute_min) waits[sends[i].rank].emplace_back(mean, i);
  }
  std::vector<bool> is_compute(sends.size(), false);
  for (auto& v : waits) {
    std::stable_sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    // Per used iteration, the computes taken so far: disjoint intervals by start.
    std::vector<std::map<Nanos, Nanos>> taken(K);
    const auto overlaps = [&](std::size_t k, Nanos from, Nanos to) {
      const auto next = taken[k].lower_bound(from);
      if (next != taken[k].end() && next->first < to) return true;
      return next != taken[k].begin() && std::prev(next)->second > from;
    };
    for (const auto& [mean, i] : v) {
      bool free = true;
      for (std::size_t k = 0; k < K && free; ++k) {
        if (sends[i].ready[k] >= 0) free = !overlaps(k, inf.from[i][k], sends[i].ready[k]);
      }
      if (!free) continue;
      for (std::size_t k = 0; k < K; ++k) {
        if (sends[i].ready[k] >= 0 && inf.from[i][k] < sends[i].ready[k]) taken[k].emplace(inf.from[i][k], sends[i].ready[k]);
      }
      is_compute[i] = true;
    }
  }

  // Ops in the order of their median start in the iteration, computes before
  // their sends.
  std::vector<Nanos> start_median(sends.size());
  for (std::size_t i = 0; i < sends.size(); ++i) {
    std::vector<Nanos> rel;
    for (std::size_t k = 0; k < K; ++k) rel.push_back(inf.from[i][k] - rank_start[sends[i].rank][k]);
    start_median[i] = median_of(std::move(rel));
  }
  std::vector<std::size_t> order(sends.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return start_median[x] < start_median[y]; });
  std::vector<OpIndex> send_op(sends.size()), compute_op(sends.size(), 0);
  // Op ids first (dependencies name them), then the ops.
  std::vector<std::string> send_id(sends.size());
  for (std::size_t i = 0; i < sends.size(); ++i) send_id[i] = p.flows[send_at[i].first].id + "." + std::to_string(send_at[i].second);
  {
    OpIndex next = 0;
    for (std::size_t i : order) {
      if (is_compute[i]) compute_op[i] = next++;
      send_op[i] = next++;
    }
  }
  p.ops.resize(sends.size() + static_cast<std::size_t>(std::count(is_compute.begin(), is_compute.end(), true)));
  const auto deps_of = [&](std::size_t i) {
    std::vector<Dependency> after;
    for (const Dependency& d : inf.after[i]) after.push_back({send_op[d.op], d.recv, 0});
    return after;
  };
  // The wait in each used iteration (the typical value where the send is
  // missing); none when every iteration has the typical value.
  const auto each_iteration = [&](std::size_t i, Nanos min, Nanos typical) {
    std::vector<Nanos> v(K, typical);
    for (std::size_t k = 0; k < K; ++k) {
      if (sends[i].ready[k] >= 0) v[k] = std::clamp<Nanos>(inf.wait[i][k], min, limits::kMaxDuration);
    }
    if (std::all_of(v.begin(), v.end(), [&](Nanos x) { return x == typical; })) v.clear();
    return v;
  };
  for (std::size_t i = 0; i < sends.size(); ++i) {
    Op s;
    s.id = send_id[i];
    s.type = OpType::send;
    s.flow = send_at[i].first;
    s.rank = p.flows[s.flow].src;
    s.bytes = std::max<Bytes>(1, send_bytes[i]);
    const Nanos wait = mean_of(inf.wait[i]);
    if (is_compute[i]) {
      Op c;
      c.id = send_id[i] + ".pre";
      c.type = OpType::compute;
      c.rank = s.rank;
      c.duration = std::clamp<Nanos>(wait, 1, limits::kMaxDuration);
      if (o.per_iteration) c.durations = each_iteration(i, 1, c.duration);
      c.after = deps_of(i);
      c.label = "before " + send_id[i];
      p.ops[compute_op[i]] = std::move(c);
      s.after = {{compute_op[i], false, 0}};
      ++rep.compute_ops;
      rep.compute_per_iteration += wait;
    } else {
      s.after = deps_of(i);
      s.gap = std::clamp<Nanos>(wait, 0, limits::kMaxDuration);
      if (o.per_iteration) s.gaps = each_iteration(i, 0, s.gap);
    }
    rep.sends_with_dependencies += !inf.after[i].empty();
    p.ops[send_op[i]] = std::move(s);
  }
  rep.sends = sends.size();
  rep.messages_per_iteration = sends.size();
  for (std::size_t i = 0; i < sends.size(); ++i) rep.bytes_per_iteration += p.ops[send_op[i]].bytes;
  if (!spreads.empty()) {
    rep.gap_spread_p50 = percentile(spreads, 0.5);
    rep.gap_spread_p90 = percentile(spreads, 0.9);
  }

  // Observed timings, relative to each used iteration's job-wide start. An
  // iteration's time runs from the end of the one before (job-wide: its last
  // rank's last event; per rank: that rank's), as the replay's and the
  // simulator's do: where ranks' iterations are staggered (a pipeline, MPI
  // ranks waiting at different points) the earliest start to the latest end
  // counts the stagger twice, once in each neighbour.
  Observed obs;
  obs.source = "capture " + dirs_text;
  for (std::size_t k = 0; k < K; ++k) {
    Nanos start = -1, end = -1, prev_end = -1;
    // The first used iteration from its start, as a replay's first iteration.
    const auto prev = k == 0 ? ends.end() : ends.find(choice.used[k] - 1);
    if (prev != ends.end()) {
      for (Nanos e : prev->second) prev_end = std::max(prev_end, e);
    }
    ObservedIteration it;
    for (std::size_t r = 0; r < R; ++r) {
      if (rank_start[r][k] >= 0 && (start < 0 || rank_start[r][k] < start)) start = rank_start[r][k];
      end = std::max(end, rank_end[r][k]);
      const Nanos from = prev != ends.end() && prev->second[r] >= 0 ? prev->second[r] : rank_start[r][k];
      it.rank_durations.push_back(rank_end[r][k] >= 0 && from >= 0 ? std::max<Nanos>(0, rank_end[r][k] - from) : 0);
    }
    // A rank with nothing of its own in the iteration, or that ended it when it
    // ended the one before, has no time of its own there: the iteration then
    // keeps only its job-wide time (a profile says per-rank times for every
    // rank or none, and each is positive).
    if (std::any_of(it.rank_durations.begin(), it.rank_durations.end(), [](Nanos d) { return d <= 0; })) it.rank_durations.clear();
    it.duration = std::max<Nanos>(1, end - (prev_end >= 0 ? prev_end : start));
    obs.iterations.push_back(it);
    for (std::size_t i = 0; i < sends.size(); ++i) {
      const build::SendTimes& s = sends[i];
      if (s.ready[k] < 0) continue;
      if (is_compute[i]) {
        obs.ops.push_back({compute_op[i], static_cast<std::uint32_t>(k), std::max<Nanos>(0, inf.from[i][k] - start), s.ready[k] - start});
      }
      obs.ops.push_back({send_op[i], static_cast<std::uint32_t>(k), s.ready[k] - start,
                         s.read[k] >= 0 ? std::max(s.ready[k], s.read[k]) - start : s.sent[k] - start});
    }
  }
  std::sort(obs.ops.begin(), obs.ops.end(), [](const ObservedOp& x, const ObservedOp& y) {
    return std::tie(x.iteration, x.op) < std::tie(y.iteration, y.op);
  });
  p.observed = std::move(obs);
  p.index();

  // The report.
  for (std::size_t r = 0; r < R; ++r) {
    const ProcessTrace& t = traces[ranks.ranks[r].process];
    rep.ranks.push_back({static_cast<RankId>(r), t.pid, t.host, role_name(ranks.ranks[r].role),
                         ranks.ranks[r].how + (ranks.ranks[r].role_how.empty() ? "" : ", role from " + ranks.ranks[r].role_how)});
  }
  for (const Direction& d : dirs) {
    const Connection& c = a.connections[d.conn];
    rep.connections.push_back({c.local.address, c.remote.address, traces[c.process].pid, d.use, c.bytes_sent, d.messages.size()});
  }
  return out;
}

}  // namespace tw

namespace tw {

CaptureJob read_capture_job(const std::vector<std::string>& dirs, Nanos gap) {
  CaptureJob job;
  for (const std::string& d : dirs) {
    std::vector<ProcessTrace> t = read_capture_dir(d);
    if (t.empty()) throw std::runtime_error(d + ": no traced process in this capture (trace-PID.json)");
    job.traces.insert(job.traces.end(), std::make_move_iterator(t.begin()), std::make_move_iterator(t.end()));
  }
  job.analysis = analyse_capture(job.traces, gap);
  job.rank_of_process.assign(job.traces.size(), std::nullopt);
  build::Ranks ranks = build::find_ranks(job.traces, job.analysis, job.notes);
  if (!ranks.ranks.empty()) {
    job.rank_of_process = ranks.of_process;
    job.clocks = build::align_clocks(job.traces, job.analysis, ranks.ranks[0].process, job.notes);
  }
  std::map<std::string, Nanos> shift;
  for (const auto& c : job.clocks) {
    if (c.offset != 0) shift[c.host] = c.offset;
  }
  WireCapture wire = read_wire_captures(dirs, shift);
  job.wire = wire.present() && wire.index.segment_count() > 0;
  job.analysis = analyse_capture(job.traces, gap, job.wire ? &wire.index : nullptr);
  job.iteration_of_message.assign(job.analysis.messages.size(), -1);
  if (ranks.ranks.size() < 2) {
    job.notes.push_back("fewer than two ranks exchanged traced traffic: no iterations");
    return job;
  }
  try {
    std::vector<build::Direction> ds = build::directions(job.analysis, ranks);
    build::assign_roles(ranks, job.traces, job.analysis, ds);
    const build::Iterations its = build::find_iterations(job.traces, job.analysis, ranks, ds, job.notes);
    job.iteration_source = its.source;
    for (std::size_t m = 0; m < its.of_message.size() && m < job.iteration_of_message.size(); ++m) {
      if (its.of_message[m] != build::kNoIteration) job.iteration_of_message[m] = its.of_message[m];
    }
  } catch (const std::runtime_error& e) {
    job.notes.push_back(std::string("no iterations: ") + e.what());
  }
  return job;
}

}  // namespace tw
