// The numbers behind the report's plots, from a view (messages, stages, reads),
// a timeline (iterations, ops, flows) and the profile they belong to.
#include "tensorwire/view/report.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>
#include <optional>
#include <unordered_map>

#include "tensorwire/analysis/compare.hpp"
#include "tensorwire/analysis/diagnosis.hpp"
#include "tensorwire/view/diagnosis_input.hpp"
#include "tensorwire/analysis/sources.hpp"
#include "tensorwire/analysis/timeline.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/profile/build.hpp"
#include "tensorwire/view/sources.hpp"
#include "tensorwire/view/web_pages.hpp"

namespace tw::view {
namespace {

// One source read every way the report needs it.
struct Source {
  std::string label, kind, path;
  View view;
  Profile profile;
  Timeline timeline;
  bool timed = false;  // the timeline has iterations
  std::string note;    // why it has none
  std::vector<std::string> hosts;  // per rank
};

Source read_source(const std::vector<std::string>& paths) {
  Source s;
  s.kind = source_kind(paths.at(0));
  s.label = s.kind;
  for (const auto& p : paths) s.path += (s.path.empty() ? "" : " ") + p;
  s.view = view_of(paths, {});
  try {
    if (s.kind == "run") {
      LoadedRun r = load_run(paths[0]);
      s.profile = std::move(r.profile);
      s.timeline = std::move(r.timeline);
    } else {
      s.profile = s.kind == "profile" ? load_profile_or_throw(paths[0]) : build_profile(read_captures(paths), {}).profile;
      s.timeline = timeline_from_observed(s.profile);
    }
    s.timed = s.timeline.iterations > 0;
  } catch (const std::runtime_error& e) {
    if (s.kind != "capture") throw;
    s.note = e.what();  // a capture the builder cannot make a profile of still has its messages
  }
  for (const Rank& r : s.profile.ranks) s.hosts.push_back(r.host);
  return s;
}

double ms(Nanos t) { return static_cast<double>(t) / 1e6; }

// At most `points` values of a sorted sample, evenly by rank: enough for a CDF.
nlohmann::json quantiles(std::vector<double> v, std::size_t points = 400) {
  std::sort(v.begin(), v.end());
  nlohmann::json out = nlohmann::json::array();
  if (v.empty()) return out;
  const std::size_t n = std::min(points, v.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t k = n == 1 ? v.size() - 1 : i * (v.size() - 1) / (n - 1);
    out.push_back(v[k]);
  }
  return out;
}

// Per message slice of a view: its stages' durations and its end to end time
// (to the end of its read, where it has one), in microseconds.
struct Drawn {
  std::map<std::string, std::vector<double>> stages;
  struct Message {
    std::string name, track;
    std::int64_t bytes = -1, iteration = -1;
    double e2e_us = 0;
  };
  std::vector<Message> messages;
};

Drawn drawn_messages(const View& v) {
  Drawn d;
  const StrId message = [&] {
    for (StrId i = 0; i < v.strings.size(); ++i) {
      if (v.strings[i] == "message") return i;
    }
    return StrId{0};
  }();
  std::map<std::pair<std::uint32_t, std::uint32_t>, Nanos> read_end;
  for (const Arrow& a : v.flows) {
    const Slice& to = v.tracks[a.to.track].slices[a.to.slice];
    if (v.strings[to.category] == "read") read_end[{a.from.track, a.from.slice}] = to.end;
  }
  for (std::uint32_t t = 0; t < v.tracks.size(); ++t) {
    const auto& sl = v.tracks[t].slices;
    for (std::uint32_t i = 0; i < sl.size(); ++i) {
      if (!message || sl[i].category != message || sl[i].depth != 0) continue;
      for (std::uint32_t k = i + 1; k < sl.size() && sl[k].depth > 0; ++k) {
        d.stages[v.strings[sl[k].name]].push_back(static_cast<double>(sl[k].end - sl[k].begin) / 1e3);
      }
      Drawn::Message m;
      m.name = v.strings[sl[i].name];
      m.track = v.tracks[t].name;
      for (std::uint32_t a = sl[i].args; a < sl[i].args + sl[i].nargs; ++a) {
        const std::string& key = v.strings[v.args[a].key];
        if (key == "bytes") m.bytes = v.args[a].value;
        if (key == "iteration") m.iteration = v.args[a].value;
      }
      const auto r = read_end.find({t, i});
      const Nanos end = r == read_end.end() ? sl[i].end : std::max(r->second, sl[i].begin);
      m.e2e_us = static_cast<double>(end - sl[i].begin) / 1e3;
      d.stages["end to end"].push_back(m.e2e_us);
      d.messages.push_back(std::move(m));
    }
  }
  return d;
}

std::string rank_label(const Source& s, std::size_t r) {
  return "rank " + std::to_string(r) + (r < s.hosts.size() && !s.hosts[r].empty() ? " (" + s.hosts[r] + ")" : "");
}

nlohmann::json heatmap(const Source& s) {
  // Per sender and receiver: the bytes of its flows over the time they were
  // busy (summed, so a pair of several flows gets their busy-time-weighted rate).
  // -1: no flow; -2: bytes but no measured busy time (a rate cannot be told).
  const std::size_t n = s.profile.ranks.size();
  nlohmann::json labels = nlohmann::json::array(), gbps = nlohmann::json::array();
  for (std::size_t r = 0; r < n; ++r) labels.push_back(rank_label(s, r));
  std::vector<std::vector<double>> bytes(n, std::vector<double>(n, 0)), busy = bytes;
  std::vector<std::vector<bool>> any(n, std::vector<bool>(n, false));
  for (std::size_t f = 0; f < s.profile.flows.size(); ++f) {
    const Flow& fl = s.profile.flows[f];
    if (fl.src >= n || fl.dst >= n) continue;
    any[fl.src][fl.dst] = true;
    if (f < s.timeline.flow_bytes.size()) bytes[fl.src][fl.dst] += static_cast<double>(s.timeline.flow_bytes[f]);
    if (f < s.timeline.flow_busy.size()) busy[fl.src][fl.dst] += static_cast<double>(s.timeline.flow_busy[f]);
  }
  for (std::size_t a = 0; a < n; ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (std::size_t b = 0; b < n; ++b) {
      row.push_back(!any[a][b] ? -1.0 : busy[a][b] > 0 ? bytes[a][b] * 8 / busy[a][b] : -2.0);  // bits per ns = Gb/s
    }
    gbps.push_back(row);
  }
  return {{"labels", labels}, {"gbps", gbps}};
}

// Per rank, mean per iteration: computing, sending (a message of its own in
// flight, to its arrival), and neither (waiting for data or for the others).
// Intervals merged into disjoint ones, by start.
std::vector<std::pair<Nanos, Nanos>> merged(std::vector<std::pair<Nanos, Nanos>> v) {
  std::sort(v.begin(), v.end());
  std::vector<std::pair<Nanos, Nanos>> out;
  for (const auto& x : v) {
    if (!out.empty() && x.first <= out.back().second) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

Nanos length(const std::vector<std::pair<Nanos, Nanos>>& v) {
  Nanos n = 0;
  for (const auto& [b, e] : v) n += e - b;
  return n;
}

// The time of `a` not inside `b` (both merged).
Nanos outside(const std::vector<std::pair<Nanos, Nanos>>& a, const std::vector<std::pair<Nanos, Nanos>>& b) {
  Nanos n = 0;
  std::size_t j = 0;
  for (const auto& [ab, ae] : a) {
    Nanos cur = ab;
    while (j < b.size() && b[j].second <= cur) ++j;
    for (std::size_t k = j; k < b.size() && b[k].first < ae; ++k) {
      if (b[k].first > cur) n += b[k].first - cur;
      cur = std::max(cur, b[k].second);
    }
    if (cur < ae) n += ae - cur;
  }
  return n;
}

// Per rank, mean per iteration: computing (its compute ops, merged), sending (a
// message of its own in flight, from its start to its arrival, while not
// computing), and neither (waiting for data or for the others).
nlohmann::json breakdown(const Source& s) {
  const Profile& p = s.profile;
  const Timeline& t = s.timeline;
  const std::size_t n = p.ranks.size(), iters = t.iterations;
  std::vector<double> compute(n, 0), sending(n, 0), rank_time(n, 0);
  std::vector<std::size_t> counted(n, 0);
  for (std::size_t i = 0; i < iters && !t.ops.empty(); ++i) {
    std::vector<std::vector<std::pair<Nanos, Nanos>>> sends(n), busy(n);
    for (std::size_t op = 0; op < p.ops.size() && op < t.ops.size(); ++op) {
      const Instance& in = t.ops[op][i];
      if (in.start < 0 || in.end < in.start) continue;
      if (p.ops[op].type == OpType::compute) {
        busy[p.ops[op].rank].emplace_back(in.start, in.end);
      } else {
        sends[p.flows[p.ops[op].flow].src].emplace_back(in.start, in.end);
      }
    }
    for (std::size_t r = 0; r < n; ++r) {
      const Nanos it = !t.rank_iteration.empty() && t.rank_iteration[r][i] >= 0 ? t.rank_iteration[r][i] : t.iteration[i];
      if (it <= 0) continue;
      const auto c = merged(std::move(busy[r]));
      const Nanos computing = std::min(length(c), it);
      const Nanos sending_only = std::min(outside(merged(std::move(sends[r])), c), it - computing);
      compute[r] += ms(computing);
      sending[r] += ms(sending_only);
      rank_time[r] += ms(it);
      ++counted[r];
    }
  }
  nlohmann::json out = {{"ranks", nlohmann::json::array()}, {"compute_ms", nlohmann::json::array()},
                        {"sending_ms", nlohmann::json::array()}, {"waiting_ms", nlohmann::json::array()}};
  for (std::size_t r = 0; r < n; ++r) {
    const double k = counted[r] ? static_cast<double>(counted[r]) : 1;
    out["ranks"].push_back(rank_label(s, r));
    out["compute_ms"].push_back(compute[r] / k);
    out["sending_ms"].push_back(sending[r] / k);
    out["waiting_ms"].push_back(std::max(0.0, (rank_time[r] - compute[r] - sending[r]) / k));
  }
  return out;
}

nlohmann::json sizes(const Drawn& d) {
  // Powers of two from 64 B to 1 GiB.
  std::vector<std::size_t> count(25, 0);
  for (const auto& m : d.messages) {
    if (m.bytes < 0) continue;
    std::size_t b = 0;
    while (b + 1 < count.size() && (std::int64_t{64} << b) < m.bytes) ++b;
    ++count[b];
  }
  std::size_t last = 0;
  for (std::size_t b = 0; b < count.size(); ++b) {
    if (count[b]) last = b;
  }
  nlohmann::json bins = nlohmann::json::array(), counts = nlohmann::json::array();
  for (std::size_t b = 0; b <= last; ++b) {
    // 64 B, 128 B, ... 1 KiB, ... 1 MiB: short labels under the bars.
    static constexpr const char* kUnit[] = {"B", "KiB", "MiB", "GiB"};
    const std::size_t e = b + 6;  // 64 = 2^6
    bins.push_back(std::to_string(Bytes{1} << (e % 10)) + " " + kUnit[e / 10]);
    counts.push_back(count[b]);
  }
  return {{"bins", bins}, {"counts", counts}};
}

nlohmann::json top_flows(const Source& s, std::size_t top) {
  std::vector<std::size_t> order(s.profile.flows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto bytes = [&](std::size_t f) { return f < s.timeline.flow_bytes.size() ? s.timeline.flow_bytes[f] : 0; };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bytes(a) > bytes(b); });
  std::vector<std::size_t> msgs(s.profile.flows.size(), 0);
  for (const Op& op : s.profile.ops) {
    if (op.type == OpType::send && op.flow < msgs.size()) ++msgs[op.flow];
  }
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < order.size() && i < top; ++i) {
    const Flow& f = s.profile.flows[order[i]];
    out.push_back({{"flow", f.id}, {"from", rank_label(s, f.src)}, {"to", rank_label(s, f.dst)}, {"messages_per_iteration", msgs[order[i]]},
                   {"bytes", bytes(order[i])}, {"gbps", flow_rate_bps(s.timeline, static_cast<FlowIndex>(order[i])) / 1e9}});
  }
  return out;
}

nlohmann::json top_messages(Drawn& d, std::size_t top) {
  std::stable_sort(d.messages.begin(), d.messages.end(), [](const auto& a, const auto& b) { return a.e2e_us > b.e2e_us; });
  // Where messages have iterations, those outside them (set-up, other traffic) are not the job's.
  const bool numbered = std::any_of(d.messages.begin(), d.messages.end(), [](const auto& m) { return m.iteration >= 0; });
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < d.messages.size() && out.size() < top; ++i) {
    const auto& m = d.messages[i];
    if (numbered && m.iteration < 0) continue;
    out.push_back({{"message", m.name}, {"on", m.track}, {"iteration", m.iteration}, {"bytes", m.bytes}, {"end_to_end_us", m.e2e_us}});
  }
  return out;
}

// One iteration as a timeline: the median one of the first process that has
// iterations; per row (a rank's compute, a connection's or flow's messages, its
// reads) the slices inside its window, in microseconds from its start. At most
// 48 rows and 6000 slices.
nlohmann::json iteration_timeline(const View& v) {
  std::unordered_map<std::uint64_t, std::size_t> process_of_uuid, track_of_uuid;
  for (std::size_t i = 0; i < v.processes.size(); ++i) process_of_uuid[v.processes[i].uuid] = i;
  for (std::size_t i = 0; i < v.tracks.size(); ++i) track_of_uuid[v.tracks[i].uuid] = i;
  // A track's process and its row name (its group's name for a lane).
  const auto place = [&](std::size_t t) -> std::pair<std::optional<std::size_t>, std::string> {
    const Track& k = v.tracks[t];
    if (const auto p = process_of_uuid.find(k.parent); p != process_of_uuid.end()) return {p->second, k.name};
    if (const auto g = track_of_uuid.find(k.parent); g != track_of_uuid.end()) {
      if (const auto p = process_of_uuid.find(v.tracks[g->second].parent); p != process_of_uuid.end()) return {p->second, v.tracks[g->second].name};
    }
    return {std::nullopt, k.name};
  };
  // Iteration N from its first start on any rank to the first start of N + 1
  // (its compute and waits included, not only its traffic); the median such.
  std::map<std::int64_t, Nanos> start;
  for (const Track& k : v.tracks) {
    for (const Slice& s : k.slices) {
      if (v.strings[s.category] != "iteration") continue;
      for (std::uint32_t a = s.args; a < s.args + s.nargs; ++a) {
        if (v.strings[v.args[a].key] != "iteration") continue;
        auto [it, fresh] = start.try_emplace(v.args[a].value, s.begin);
        if (!fresh) it->second = std::min(it->second, s.begin);
      }
    }
  }
  std::vector<std::tuple<Nanos, std::int64_t, Nanos>> spans;  // length, number, start
  for (auto it = start.begin(); it != start.end(); ++it) {
    const auto next = std::next(it);
    if (next != start.end() && next->first == it->first + 1 && next->second > it->second) {
      spans.emplace_back(next->second - it->second, it->first, it->second);
    }
  }
  if (spans.empty()) return nullptr;
  std::sort(spans.begin(), spans.end());
  // (Plain variables, not a structured binding: lambdas below capture them.)
  const Nanos length = std::get<0>(spans[spans.size() / 2]), lo = std::get<2>(spans[spans.size() / 2]);
  const std::int64_t number = std::get<1>(spans[spans.size() / 2]);
  const Nanos hi = lo + length;
  std::map<std::pair<std::size_t, std::string>, std::size_t> row_of;
  nlohmann::json rows = nlohmann::json::array(), items = nlohmann::json::array();
  std::size_t count = 0;
  for (std::size_t t = 0; t < v.tracks.size(); ++t) {
    const auto [proc, name] = place(t);
    if (!proc || v.tracks[t].kind != TrackKind::slices) continue;
    for (const Slice& s : v.tracks[t].slices) {
      const std::string& cat = v.strings[s.category];
      if (s.end < lo || s.begin > hi || (cat != "compute" && cat != "message" && cat != "stage" && cat != "read")) continue;
      const std::string row = cat == "compute" ? "compute" : name;
      auto [it, fresh] = row_of.try_emplace({*proc, row}, row_of.size());
      if (fresh) {
        if (row_of.size() > 48) {
          row_of.erase(it);
          continue;
        }
        rows.push_back(v.processes[*proc].name.substr(0, v.processes[*proc].name.find(" (")) + " · " + row);
      }
      if (++count > 6000) break;
      const auto at = [&](Nanos x) { return static_cast<double>(std::clamp(x, lo, hi) - lo) / 1e3; };
      items.push_back({it->second, at(s.begin), at(s.end), cat == "stage" ? v.strings[s.name] : cat, v.strings[s.name]});
    }
  }
  return {{"iteration", number}, {"iteration_us", static_cast<double>(hi - lo) / 1e3}, {"rows", rows}, {"items", items}};
}

nlohmann::json source_json(Source& s, Drawn& d, std::size_t top) {
  nlohmann::json it = nlohmann::json::array();
  for (Nanos x : s.timeline.iteration) it.push_back(x >= 0 ? nlohmann::json(ms(x)) : nlohmann::json(nullptr));
  std::vector<double> known;
  for (Nanos x : s.timeline.iteration) {
    if (x >= 0) known.push_back(ms(x));
  }
  std::sort(known.begin(), known.end());
  // Every message drawn (a capture's other traffic too), as the message count.
  Bytes bytes = 0;
  for (const auto& m : d.messages) bytes += m.bytes > 0 ? static_cast<Bytes>(m.bytes) : 0;
  nlohmann::json stages = nlohmann::json::object();
  for (auto& [name, v] : d.stages) stages[name] = quantiles(v);
  return {{"label", s.label},
          {"kind", s.kind},
          {"path", s.path},
          {"ranks", s.profile.ranks.size()},
          {"iterations_ms", it},
          {"median_iteration_ms", known.empty() ? nlohmann::json(nullptr) : nlohmann::json(known[known.size() / 2])},
          {"messages", d.messages.size()},
          {"bytes", bytes},
          {"note", s.note},
          {"clock", s.view.metadata.value("clock", "")},
          {"stages_us", stages},
          {"heatmap", s.timed ? heatmap(s) : nlohmann::json(nullptr)},
          {"breakdown", s.timed ? breakdown(s) : nlohmann::json(nullptr)},
          {"sizes", sizes(d)},
          {"top_flows", s.timed ? top_flows(s, top) : nlohmann::json::array()},
          {"top_messages", top_messages(d, top)},
          {"timeline", iteration_timeline(s.view)}};
}

}  // namespace

nlohmann::json report_data(const ReportOptions& o) {
  Source a = read_source(o.sources);
  Drawn da = drawn_messages(a.view);
  nlohmann::json j = {{"format", "tensorwire-report"}, {"version", 1}, {"sources", nlohmann::json::array()}, {"comparison", nullptr},
                      {"analysis", nullptr}};
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  j["generated"] = when;
  if (!o.against.empty()) {
    Source b = read_source(o.against);
    if (b.label == a.label) b.label += " (against)";
    Drawn db = drawn_messages(b.view);
    // A run against what it replayed, or against another run: compare's figures too.
    if (a.kind == "run" && b.timed) {
      const CompareResult c = b.kind == "capture" ? compare_with_profile(b.profile, load_run(o.sources[0]))
                                                  : compare_original(o.against[0], o.sources[0]);
      const Comparison& x = c.comparison;
      j["comparison"] = {{"iterations", x.iterations},
                         {"median_iteration_error_pct", x.iteration_pct.p50},
                         {"p95_iteration_error_pct", x.iteration_pct.p95},
                         {"completion_error_p50_pct", x.completion_pct.p50},
                         {"start_offset_error_p99_us", x.start_offset_ns.p99 / 1e3}};
    }
    j["sources"].push_back(source_json(a, da, o.top));
    j["sources"].push_back(source_json(b, db, o.top));
  } else {
    j["sources"].push_back(source_json(a, da, o.top));
  }
  if (o.analyze) {
    // What cannot be diagnosed (no timed iteration) leaves a note, not a failed report.
    try {
      const DiagnosisInput in = diagnosis_input(o.sources, 10e9);
      j["analysis"] = diagnosis_json(diagnose(in), in.profile);
    } catch (const std::exception& e) {
      j["analysis_note"] = std::string("not analysed: ") + e.what();
    }
  }
  return j;
}

}  // namespace tw::view

namespace tw::view {

std::string report_html(const nlohmann::json& data) {
  std::string title = "tensorwire report";
  if (data.contains("sources") && !data["sources"].empty()) title += ": " + data["sources"][0].value("path", "");
  return web::report_page(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), title);
}

}  // namespace tw::view
