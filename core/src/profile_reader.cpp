// Loading and validating profiles. One pass over the YAML tree collects every
// problem with its position; semantic checks (references, ranks of dependencies,
// cycles) run on what parsed, so one bad field does not hide the others.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <unordered_set>

#include "tensorwire/core/dag.hpp"
#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/yaml_reader.hpp"

namespace tw {
namespace {

using Node = YamlDoc::Node;
using Kind = YamlDoc::Kind;

class Reader : public YamlReader {
 public:
  Reader(const YamlDoc& doc, std::string base_dir, Diagnostics& diags)
      : YamlReader(doc, diags), base_dir_(std::move(base_dir)) {}

  void read(Profile& p);

 private:
  // --- sections ------------------------------------------------------------
  void read_metadata(const Node* n, Metadata& m);
  void read_ranks(const Node* n, Profile& p);
  void read_flows(const Node* n, Profile& p);
  void read_tensors(const Node* n, Profile& p);
  void read_ops(const Node* n, Profile& p);
  void read_dependencies(Profile& p);
  void check_cycles(const Profile& p);
  void read_observed(const Node* n, Profile& p);
  void read_observed_sidecar(Profile& p, Observed& o, const Node& at);
  // An op's per-iteration list (`durations`, `gaps`); false if it had a problem.
  bool per_iteration(const Node* n, const What& what, const char* field, Nanos min, std::vector<Nanos>& out);

  std::string base_dir_;

  // Per op: its YAML node and its `after` node, for the semantic checks.
  std::vector<const Node*> op_nodes_;
  std::vector<const Node*> op_after_;
  std::vector<bool> op_valid_;
  std::unordered_set<std::string> buckets_;
  std::unordered_set<std::string> broken_flows_;  // ids of flows reported as wrong
  // False when 'ranks' itself was reported (missing, not a list, empty, too long): rank numbers
  // elsewhere are then not checked against a count that means nothing, which
  // would add an error per flow and per compute op to the one that matters.
  bool ranks_read_ = true;
  std::uint64_t iterations_ = 1;  // the profile's, for the per-iteration lists
  std::uint64_t per_iteration_entries_ = 0;
};

void Reader::read(Profile& p) {
  const Node& root = doc_.root();
  if (root.kind == Kind::null) {
    error_at(doc_.file(), 1, 1, "empty file: expected a tensorwire profile (a map with version, ranks, flows, ops)");
    return;
  }
  if (root.kind != Kind::map) {
    error(root, "a profile must be a map with version, ranks, flows, ops; got " + describe(root));
    return;
  }
  const auto f = fields(root, "the profile",
                        {"version", "metadata", "iterations", "iteration_barrier", "ranks", "flows", "tensors", "ops",
                         "observed"},
                        {"version", "iterations", "ranks", "flows", "ops"});
  if (f[0] != nullptr) {
    const Node* s = scalar(f[0], "the profile", "version", "a whole number");
    if (s != nullptr && s->value != std::to_string(kProfileVersion)) {
      error(*s, "unsupported profile version " + describe(*s) + ": this tensorwire reads version " +
                    std::to_string(kProfileVersion));
      return;  // the rest of a file in another version would only produce noise
    }
  }
  read_metadata(f[1], p.metadata);
  if (auto v = uint_field(f[2], "the profile", "iterations", 1, limits::kMaxIterations)) p.iterations = *v;
  if (auto v = bool_field(f[3], "the profile", "iteration_barrier")) p.iteration_barrier = *v;
  iterations_ = p.iterations;
  read_ranks(f[4], p);
  read_flows(f[5], p);
  read_tensors(f[6], p);
  read_ops(f[7], p);
  read_dependencies(p);
  check_cycles(p);
  read_observed(f[8], p);
}

void Reader::read_metadata(const Node* n, Metadata& m) {
  if (n == nullptr) return;
  const auto f = fields(*n, "metadata", {"source", "framework", "pattern", "model", "description", "created", "generator"}, {});
  std::string* targets[] = {&m.source, &m.framework, &m.pattern, &m.model, &m.description, &m.created, &m.generator};
  const char* names[] = {"source", "framework", "pattern", "model", "description", "created", "generator"};
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (auto v = string_field(f[i], "metadata", names[i])) *targets[i] = *v;
  }
  if (f[0] != nullptr && !m.source.empty() && m.source != "synth" && m.source != "capture" && m.source != "manual") {
    error(*f[0], "metadata: 'source' must be synth, capture or manual, got " + quote(m.source));
  }
}

void Reader::read_ranks(const Node* n, Profile& p) {
  if (n == nullptr) {  // reported as a missing required field
    ranks_read_ = false;
    return;
  }
  if (n->kind == Kind::scalar) {
    // `ranks: 4`: a count where the list of ranks belongs.
    error(*n, "'ranks' must be a list of rank entries, got " + describe(*n) + " (for example: ranks: [{id: 0}, {id: 1}])");
    ranks_read_ = false;
    return;
  }
  const auto items = list(n, "'ranks'");
  if (n->kind != Kind::sequence) ranks_read_ = false;
  if ((n->kind == Kind::null || n->kind == Kind::sequence) && items.empty()) {
    error(*n, "'ranks' is empty: a profile needs at least one rank");
    ranks_read_ = false;
  }
  if (items.size() > limits::kMaxRanks) {
    error(*n, "'ranks' lists " + std::to_string(items.size()) + " ranks, more than the limit of " +
                  std::to_string(limits::kMaxRanks));
    ranks_read_ = false;
    return;
  }
  const std::size_t count = items.size();
  p.ranks.assign(count, Rank{});
  std::vector<bool> seen(count, false);
  for (std::size_t i = 0; i < count; ++i) {
    const std::string what = "rank entry " + std::to_string(i);
    const auto f = fields(items[i], what, {"id", "host", "role"}, {"id"});
    const auto id = uint_field(f[0], what, "id", 0, limits::kMaxRanks);
    if (!id) continue;
    if (*id >= count) {
      error(*f[0], "rank id " + std::to_string(*id) + " is out of range: " + std::to_string(count) +
                       " ranks are numbered 0 to " + std::to_string(count - 1));
      continue;
    }
    if (seen[*id]) {
      error(*f[0], "rank id " + std::to_string(*id) + " is listed twice");
      continue;
    }
    seen[*id] = true;
    Rank& r = p.ranks[*id];
    r.id = static_cast<RankId>(*id);
    if (auto v = string_field(f[1], what, "host")) r.host = *v;
    if (auto v = string_field(f[2], what, "role")) {
      if (*v == "worker") r.role = Role::worker;
      else if (*v == "server") r.role = Role::server;
      else error(*f[2], what + ": 'role' must be worker or server, got " + quote(*v));
    }
  }
}

void Reader::read_flows(const Node* n, Profile& p) {
  const auto items = list(n, "'flows'");
  for (std::size_t i = 0; i < items.size(); ++i) {
    const What what("flow entry", i);
    const auto f = fields(items[i], what, {"id", "src", "dst", "read_lag"}, {"id", "src", "dst"});
    const auto id = id_field(f[0], what, "id");
    const What fwhat = id ? What("flow", *id) : what;
    const auto src = uint_field(f[1], fwhat, "src", 0, limits::kMaxRanks);
    const auto dst = uint_field(f[2], fwhat, "dst", 0, limits::kMaxRanks);
    bool ok = id && src && dst;
    for (auto [v, node, name] : {std::tuple{src, f[1], "src"}, std::tuple{dst, f[2], "dst"}}) {
      if (v && *v >= p.ranks.size()) {
        ok = false;
        if (!ranks_read_) continue;
        error(*node, fwhat + ": '" + name + "' names rank " + std::to_string(*v) + ", but the profile has " +
                         std::to_string(p.ranks.size()) + " ranks");
      }
    }
    if (src && dst && *src == *dst) {
      error(items[i], fwhat + ": 'src' and 'dst' are both rank " + std::to_string(*src) + "; a flow joins two ranks");
      ok = false;
    }
    if (id && p.flow_by_id.count(*id) != 0) {
      error(*f[0], "flow id " + quote(*id) + " is used twice");
      ok = false;
    }
    Nanos read_lag = 0;  // a bad one is reported; the flow stays, so that its ops are not reported too
    if (auto d = duration_field(f[3], fwhat, "read_lag", 0, limits::kMaxDuration)) read_lag = *d;
    if (!ok) {
      // Its ops are not reported again as sending on an unknown flow.
      if (id && p.flow_by_id.count(*id) == 0) broken_flows_.insert(*id);
      continue;
    }
    p.flow_by_id.emplace(*id, static_cast<FlowIndex>(p.flows.size()));
    p.flows.push_back({*id, static_cast<RankId>(*src), static_cast<RankId>(*dst), read_lag});
  }
}

void Reader::read_tensors(const Node* n, Profile& p) {
  const auto items = list(n, "'tensors'");
  std::unordered_set<std::string> names;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string what = "tensor entry " + std::to_string(i);
    const auto f = fields(items[i], what, {"name", "bytes", "bucket", "dtype"}, {"name", "bytes"});
    const auto name = string_field(f[0], what, "name");
    const std::string twhat = name ? "tensor " + quote(*name) : what;
    const auto bytes = bytes_field(f[1], twhat, "bytes", limits::kMaxMessageBytes);
    Tensor t;
    if (auto v = string_field(f[2], twhat, "bucket")) t.bucket = *v;
    if (auto v = string_field(f[3], twhat, "dtype")) t.dtype = *v;
    if (!name || !bytes) continue;
    if (!names.insert(*name).second) {
      error(*f[0], "tensor name " + quote(*name) + " is used twice");
      continue;
    }
    t.name = *name;
    t.bytes = *bytes;
    if (!t.bucket.empty()) buckets_.insert(t.bucket);
    p.tensors.push_back(std::move(t));
  }
}

bool Reader::per_iteration(const Node* n, const What& what, const char* field, Nanos min, std::vector<Nanos>& out) {
  if (n == nullptr || n->kind == Kind::null) return true;
  if (n->kind != Kind::sequence) {
    error(*n, what + ": '" + field + "' must be a list of durations, one per iteration; got " + describe(*n));
    return false;
  }
  const auto items = doc_.children(*n);
  if (items.size() > iterations_) {
    error(*n, what + ": '" + field + "' has " + std::to_string(items.size()) + " entries, more than the profile's " +
                  std::to_string(iterations_) + " iterations");
    return false;
  }
  per_iteration_entries_ += items.size();
  if (per_iteration_entries_ > limits::kMaxPerIterationEntries) {
    error(*n, what + ": more than " + std::to_string(limits::kMaxPerIterationEntries) +
                  " entries in 'durations' and 'gaps' over the whole profile");
    return false;
  }
  bool ok = true;
  out.reserve(items.size());
  for (const Node& d : items) {
    if (auto v = duration_field(&d, what, field, min, limits::kMaxDuration)) out.push_back(*v);
    else ok = false;
  }
  return ok;
}

void Reader::read_ops(const Node* n, Profile& p) {
  const auto items = list(n, "'ops'");
  if (items.size() > limits::kMaxOps) {
    error(*n, "'ops' lists " + std::to_string(items.size()) + " ops, more than the limit of " +
                  std::to_string(limits::kMaxOps));
    return;
  }
  p.ops.resize(items.size());
  op_nodes_.assign(items.size(), nullptr);
  op_after_.assign(items.size(), nullptr);
  op_valid_.assign(items.size(), false);
  p.op_by_id.reserve(items.size());
  std::unordered_set<std::string> tensor_names;
  for (const auto& t : p.tensors) tensor_names.insert(t.name);

  for (std::size_t i = 0; i < items.size(); ++i) {
    const Node& item = items[i];
    const What what("op entry", i);
    const auto f = fields(item, what, {"id", "type", "rank", "duration", "flow", "bytes", "tensor", "label", "gap", "after",
                           "durations", "gaps", "priority"},
                          {"id", "type"});
    const auto id = id_field(f[0], what, "id");
    if (!id) continue;
    Op& op = p.ops[i];
    op.id = *id;
    const What owhat("op", op.id);
    if (!p.op_by_id.emplace(*id, static_cast<OpIndex>(i)).second) {
      error(*f[0], "op id " + quote(*id) + " is used twice (first at line " +
                       std::to_string(op_nodes_[p.op_by_id[*id]] ? op_nodes_[p.op_by_id[*id]]->line : 0) + ")");
      continue;
    }
    op_nodes_[i] = &item;
    op_after_[i] = f[9];
    bool ok = true;
    const auto type = string_field(f[1], owhat, "type");
    if (!type) continue;
    if (*type == "compute") {
      op.type = OpType::compute;
    } else if (*type == "send") {
      op.type = OpType::send;
    } else {
      error(*f[1], owhat + ": 'type' must be compute or send, got " + quote(*type));
      continue;
    }
    // Fields of the other type are mistakes, not extras.
    const bool compute = op.type == OpType::compute;
    const std::pair<const Node*, const char*> foreign[] = {
        {compute ? f[4] : f[2], compute ? "flow" : "rank"},
        {compute ? f[5] : f[3], compute ? "bytes" : "duration"},
        {compute ? f[6] : nullptr, "tensor"},
        {compute ? f[12] : nullptr, "priority"},
        {compute ? nullptr : f[10], "durations"}};
    for (const auto& [node, name] : foreign) {
      if (node == nullptr) continue;
      const char* why = compute ? "" : (std::string_view(name) == "rank" ? " (its rank is its flow's src)" : "");
      error(*node, owhat + ": field '" + name + "' does not apply to a " + *type + " op" + why);
      ok = false;
    }
    if (compute) {
      if (f[2] == nullptr) error(item, owhat + " is missing the required field 'rank'");
      if (f[3] == nullptr) error(item, owhat + " is missing the required field 'duration'");
      if (auto r = uint_field(f[2], owhat, "rank", 0, limits::kMaxRanks)) {
        if (*r >= p.ranks.size()) {
          if (ranks_read_) {
            error(*f[2], owhat + ": 'rank' is " + std::to_string(*r) + ", but the profile has " +
                             std::to_string(p.ranks.size()) + " ranks");
          }
          ok = false;
        }
        op.rank = static_cast<RankId>(*r);
      } else {
        ok = false;
      }
      if (auto d = duration_field(f[3], owhat, "duration", 1, limits::kMaxDuration)) op.duration = *d;
      else ok = false;
      ok = per_iteration(f[10], owhat, "durations", 1, op.durations) && ok;
    } else {
      if (f[4] == nullptr) error(item, owhat + " is missing the required field 'flow'");
      if (f[5] == nullptr) error(item, owhat + " is missing the required field 'bytes'");
      if (auto fl = id_field(f[4], owhat, "flow")) {
        const auto it = p.flow_by_id.find(*fl);
        if (it == p.flow_by_id.end() && broken_flows_.count(*fl) != 0) {
          ok = false;  // the flow's own error says what is wrong
        } else if (it == p.flow_by_id.end()) {
          std::vector<std::string> cands;
          if (p.flows.size() <= 1024) {
            for (const auto& x : p.flows) cands.push_back(x.id);
          }
          const std::string hint = closest_match(*fl, cands);
          error(*f[4], owhat + " sends on unknown flow " + quote(*fl) + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
          ok = false;
        } else {
          op.flow = it->second;
          op.rank = p.flows[it->second].src;
        }
      } else {
        ok = false;
      }
      if (auto b = bytes_field(f[5], owhat, "bytes", limits::kMaxMessageBytes)) op.bytes = *b;
      else ok = false;
      if (auto t = string_field(f[6], owhat, "tensor")) {
        op.tensor = *t;
        if (!p.tensors.empty() && tensor_names.count(*t) == 0 && buckets_.count(*t) == 0) {
          error(*f[6], owhat + ": 'tensor' " + quote(*t) + " is neither a tensor nor a bucket of 'tensors'");
        }
      }
      if (f[12] != nullptr) {
        if (auto v = uint_field(f[12], owhat, "priority", 0, limits::kMaxPriority)) op.priority = static_cast<std::uint32_t>(*v);
        else ok = false;
      }
    }
    if (auto v = string_field(f[7], owhat, "label")) op.label = *v;
    if (auto g = duration_field(f[8], owhat, "gap", 0, limits::kMaxDuration)) op.gap = *g;
    ok = per_iteration(f[11], owhat, "gaps", 0, op.gaps) && ok;
    op_valid_[i] = ok && (compute ? f[2] && f[3] : f[4] && f[5]);
  }
}

// Whether an op's `after` list already holds a dependency: a scan while the list
// is short (most ops wait for a few others, and a scan of a few beats hashing),
// a hash set of the list from kScanned entries on, so that an op waiting for
// 400 000 others is checked in linear time, not quadratic (20 s and more).
class ListedDependencies {
 public:
  explicit ListedDependencies(const std::vector<Dependency>& after) : after_(after) {}

  bool contains(const Dependency& d) {
    if (after_.size() < kScanned) return std::find(after_.begin(), after_.end(), d) != after_.end();
    // What was appended since the last call, edges of broken ops included.
    for (; hashed_ < after_.size(); ++hashed_) set_.insert(key(after_[hashed_]));
    return set_.contains(key(d));
  }

 private:
  static constexpr std::size_t kScanned = 32;
  static std::uint64_t key(const Dependency& d) {
    // op < 2^32, iterations_back <= kMaxIterationsBack < 2^31
    return std::uint64_t{d.op} << 32 | std::uint64_t{d.iterations_back} << 1 | (d.recv ? 1 : 0);
  }
  const std::vector<Dependency>& after_;
  std::unordered_set<std::uint64_t> set_;
  std::size_t hashed_ = 0;
};

void Reader::read_dependencies(Profile& p) {
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Node* after = op_after_[i];
    if (after == nullptr || op_nodes_[i] == nullptr) continue;
    Op& op = p.ops[i];
    ListedDependencies listed(op.after);
    const What owhat("op", op.id);
    std::span<const Node> refs;
    if (after->kind == Kind::scalar) {
      refs = {after, 1};
    } else if (after->kind == Kind::sequence) {
      refs = doc_.children(*after);
    } else if (after->kind != Kind::null) {
      error(*after, owhat + ": 'after' must be a list of op references, got " + describe(*after));
      continue;
    }
    op.after.reserve(refs.size());
    for (const Node& r : refs) {
      if (r.kind != Kind::scalar) {
        error(r, owhat + ": a dependency must be an op reference (ID, recv:ID, ID@-K), got " + describe(r));
        continue;
      }
      std::string_view text = r.value;
      Dependency d;
      if (text.starts_with("recv:")) {
        d.recv = true;
        text.remove_prefix(5);
      }
      if (const auto at = text.rfind('@'); at != std::string_view::npos) {
        const std::string_view back = text.substr(at + 1);
        std::uint32_t k = 0;
        const auto [ptr, ec] = std::from_chars(back.data() + (back.empty() ? 0 : 1), back.data() + back.size(), k);
        if (back.size() < 2 || back[0] != '-' || ec != std::errc{} || ptr != back.data() + back.size() || k == 0 ||
            k > limits::kMaxIterationsBack) {
          error(r, owhat + ": dependency " + quote(r.value) + " must end in @-K with K from 1 to " +
                       std::to_string(limits::kMaxIterationsBack) + " (K iterations back)");
          continue;
        }
        d.iterations_back = k;
        text = text.substr(0, at);
      }
      if (!valid_id(text)) {
        error(r, owhat + ": dependency " + quote(r.value) + " is not an op reference (ID, recv:ID, ID@-K)");
        continue;
      }
      const auto it = p.op_by_id.find(text);
      if (it == p.op_by_id.end()) {
        std::vector<std::string> cands;
        if (p.ops.size() <= 1024) {
          for (const auto& o : p.ops) cands.push_back(o.id);
        }
        const std::string hint = closest_match(std::string(text), cands);
        error(r, owhat + " depends on unknown op " + quote(text) + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
        continue;
      }
      d.op = it->second;
      if (!op_valid_[i] || !op_valid_[d.op]) {
        // Ranks of broken ops are unknown: keep the edge for cycle detection only.
        op.after.push_back(d);
        continue;
      }
      const Op& target = p.ops[d.op];
      if (d.recv) {
        if (target.type != OpType::send) {
          error(r, owhat + " waits for recv:" + target.id + ", but " + quote(target.id) +
                       " is a compute op; only a send can be received");
          continue;
        }
        const Flow& fl = p.flows[target.flow];
        if (fl.dst != op.rank) {
          error(r, owhat + " (rank " + std::to_string(op.rank) + ") waits for the receipt of " + quote(target.id) + ", which flow " +
                       quote(fl.id) + " delivers to rank " + std::to_string(fl.dst) + ", not to rank " +
                       std::to_string(op.rank));
          continue;
        }
      } else if (target.rank != op.rank) {
        const bool addressed_here = target.type == OpType::send && p.flows[target.flow].dst == op.rank;
        error(r, owhat + " (rank " + std::to_string(op.rank) + ") depends on " + quote(target.id) + " of rank " +
                     std::to_string(target.rank) + ": across ranks only the receipt of a message can be awaited" +
                     (addressed_here ? " (write recv:" + target.id + ")" : ""));
        continue;
      }
      if (listed.contains(d)) {
        error(r, owhat + " lists dependency " + quote(r.value) + " twice");
        continue;
      }
      op.after.push_back(d);
    }
  }
}

void Reader::check_cycles(const Profile& p) {
  const auto cycles = find_cycles(same_iteration_predecessors(p));
  for (const auto& c : cycles) {
    std::string path;
    constexpr std::size_t kShown = 12;
    for (std::size_t k = 0; k < c.size(); ++k) {
      if (c.size() > kShown && k == kShown / 2) {
        path += " -> ... (" + std::to_string(c.size() - kShown) + " more)";
        k = c.size() - kShown / 2;
      }
      path += (k == 0 ? "" : " -> ") + p.ops[c[k]].id;
    }
    const Node* at = op_nodes_[c.front()];
    if (at != nullptr) error(*at, "dependency cycle: " + path);
    else error_at(doc_.file(), 0, 0, "dependency cycle: " + path);
  }
}

void Reader::read_observed(const Node* n, Profile& p) {
  if (n == nullptr || n->kind == Kind::null) return;
  const auto f = fields(*n, "observed", {"source", "iterations", "ops", "ops_file"}, {});
  Observed o;
  if (auto v = string_field(f[0], "observed", "source")) o.source = *v;
  const auto iters = list(f[1], "observed: 'iterations'");
  for (std::size_t i = 0; i < iters.size(); ++i) {
    const std::string what = "observed iteration " + std::to_string(i);
    ObservedIteration it;
    if (iters[i].kind == Kind::scalar) {
      if (auto d = duration_field(&iters[i], what, "duration", 1, limits::kMaxDuration)) it.duration = *d;
    } else {
      const auto g = fields(iters[i], what, {"duration", "ranks"}, {"duration"});
      if (auto d = duration_field(g[0], what, "duration", 1, limits::kMaxDuration)) it.duration = *d;
      const auto ranks = list(g[1], what + ": 'ranks'");
      if (g[1] != nullptr && g[1]->kind == Kind::sequence && ranks.size() != p.ranks.size()) {
        if (ranks_read_) {  // else the profile's own 'ranks' was reported
          error(*g[1], what + ": 'ranks' has " + std::to_string(ranks.size()) + " entries, one per rank (" +
                           std::to_string(p.ranks.size()) + ") is needed");
        }
      } else {
        for (const Node& r : ranks) {
          if (auto d = duration_field(&r, what, "ranks", 1, limits::kMaxDuration)) it.rank_durations.push_back(*d);
        }
      }
    }
    o.iterations.push_back(std::move(it));
  }
  const std::uint64_t max_iteration = o.iterations.empty() ? p.iterations : o.iterations.size();
  const auto ops = list(f[2], "observed: 'ops'");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string what = "observed op entry " + std::to_string(i);
    const auto g = fields(ops[i], what, {"op", "iteration", "start", "end"}, {"op", "iteration", "start", "end"});
    const auto id = id_field(g[0], what, "op");
    const auto iter = uint_field(g[1], what, "iteration", 0, max_iteration > 0 ? max_iteration - 1 : 0);
    const auto start = duration_field(g[2], what, "start", 0, limits::kMaxDuration);
    const auto end = duration_field(g[3], what, "end", 0, limits::kMaxDuration);
    if (!id || !iter || !start || !end) continue;
    const auto it = p.op_by_id.find(*id);
    if (it == p.op_by_id.end()) {
      error(*g[0], what + " names unknown op " + quote(*id));
      continue;
    }
    if (*end < *start) {
      error(*g[3], what + ": 'end' (" + format_duration(*end) + ") is before 'start' (" + format_duration(*start) + ")");
      continue;
    }
    o.ops.push_back({it->second, static_cast<std::uint32_t>(*iter), *start, *end});
  }
  if (auto v = string_field(f[3], "observed", "ops_file")) {
    o.ops_file = *v;
    read_observed_sidecar(p, o, *f[3]);
  }
  p.observed = std::move(o);
}

// The sidecar is CSV: a header "iteration,op,start_ns,end_ns", then one row per
// observed op instance. Errors name the sidecar's own file and line.
void Reader::read_observed_sidecar(Profile& p, Observed& o, const Node& at) {
  // A file next to the profile (as `profile build` writes it), never elsewhere.
  const std::filesystem::path named(o.ops_file);
  if (named.is_absolute() || std::any_of(named.begin(), named.end(), [](const auto& part) { return part == ".."; })) {
    error(at, "observed: 'ops_file' " + quote(o.ops_file) + " must name a file next to the profile (no absolute path, no '..')");
    return;
  }
  const std::filesystem::path path = std::filesystem::path(base_dir_) / named;
  const std::string name = path.string();
  if (const std::string bad = data_file_problem(name, limits::kMaxDataFile); !bad.empty()) {
    error(at, "observed: 'ops_file' " + quote(name) + " " + bad);
    return;
  }
  std::ifstream in(path);
  if (!in) {
    error(at, "observed: cannot open 'ops_file' " + quote(name));
    return;
  }
  const std::uint64_t max_iteration = o.iterations.empty() ? p.iterations : o.iterations.size();
  std::string line;
  int lineno = 0;
  constexpr std::size_t kMaxLine = 4096;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lineno == 1) {
      if (line != "iteration,op,start_ns,end_ns") {
        error_at(name, 1, 1, "expected the header 'iteration,op,start_ns,end_ns'");
        return;
      }
      continue;
    }
    if (line.empty()) continue;
    if (line.size() > kMaxLine) {
      error_at(name, lineno, 1, "line longer than " + std::to_string(kMaxLine) + " characters");
      continue;
    }
    std::vector<std::string_view> cols;
    std::string_view rest = line;
    for (std::size_t pos; (pos = rest.find(',')) != std::string_view::npos;) {
      cols.push_back(rest.substr(0, pos));
      rest.remove_prefix(pos + 1);
    }
    cols.push_back(rest);
    if (cols.size() != 4) {
      error_at(name, lineno, 1, "expected 4 columns (iteration,op,start_ns,end_ns), got " + std::to_string(cols.size()));
      continue;
    }
    std::uint64_t iter = 0;
    std::int64_t start = 0, end = 0;
    auto num = [](std::string_view s, auto& v) {
      const auto [ptr, e] = std::from_chars(s.data(), s.data() + s.size(), v);
      return e == std::errc{} && ptr == s.data() + s.size() && !s.empty();
    };
    if (!num(cols[0], iter) || iter >= max_iteration) {
      error_at(name, lineno, 1, "iteration " + quote(cols[0]) + " is not a number from 0 to " + std::to_string(max_iteration - 1));
      continue;
    }
    const auto it = p.op_by_id.find(std::string(cols[1]));
    if (it == p.op_by_id.end()) {
      error_at(name, lineno, 0, "unknown op " + quote(cols[1]));
      continue;
    }
    if (!num(cols[2], start) || !num(cols[3], end) || start < 0 || end < start || end > limits::kMaxDuration) {
      error_at(name, lineno, 0, "start_ns and end_ns must be nanoseconds with 0 <= start_ns <= end_ns <= 1 hour");
      continue;
    }
    o.ops.push_back({it->second, static_cast<std::uint32_t>(iter), start, end});
  }
  if (lineno == 0) error_at(name, 1, 1, "empty file: expected the header 'iteration,op,start_ns,end_ns'");
}

ProfileLoad finish(Profile p, Diagnostics diags, bool truncated, const std::string& file) {
  ProfileLoad out;
  // Semantic checks run after the structural pass; present everything in file order.
  // Problems in a sidecar file follow those of the profile itself.
  std::stable_sort(diags.begin(), diags.end(), [&file](const Diagnostic& a, const Diagnostic& b) {
    const bool sa = a.file != file;
    const bool sb = b.file != file;
    if (sa != sb) return sb;
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
  if (truncated) {
    diags.push_back({file, 0, 0, "too many problems; only the first " + std::to_string(kMaxDiagnostics) + " are shown"});
  }
  if (diags.empty()) out.profile = std::move(p);  // the reader built the indexes
  out.diagnostics = std::move(diags);
  return out;
}

ProfileLoad load_doc(const std::optional<YamlDoc>& doc, const Diagnostic& syntax, const std::string& file,
                     const std::string& base_dir) {
  if (!doc) return {std::nullopt, {syntax}};
  Diagnostics diags;
  Profile p;
  Reader reader(*doc, base_dir, diags);
  reader.read(p);
  return finish(std::move(p), std::move(diags), reader.truncated(), file);
}

}  // namespace

ProfileLoad load_profile_text(std::string_view text, const std::string& file, const std::string& base_dir) {
  Diagnostic syntax;
  const auto doc = YamlDoc::parse(std::string(text), file, &syntax);
  return load_doc(doc, syntax, file, base_dir);
}

Profile load_profile_or_throw(const std::string& path) {
  ProfileLoad load = load_profile_file(path);
  if (!load.ok()) throw InputError(std::move(load.diagnostics));
  return std::move(*load.profile);
}

ProfileLoad load_profile_file(const std::string& path) {
  if (const std::string bad = data_file_problem(path, limits::kMaxProfileFile); !bad.empty()) {
    return {std::nullopt, {{path, 0, 0, bad == "is a directory" ? "is a directory, not a profile" : bad}}};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return {std::nullopt, {{path, 0, 0, std::string("cannot open: ") + std::strerror(errno)}}};
  try {
    Diagnostic syntax;
    const auto doc = YamlDoc::parse(in, path, &syntax);
    const std::string base = std::filesystem::path(path).parent_path().string();
    return load_doc(doc, syntax, path, base.empty() ? "." : base);
  } catch (const std::bad_alloc&) {
    // A YAML tree takes tens of times its text: a file within the size limit
    // can ask for more than the machine has. Named, where it said only "out of memory".
    return {std::nullopt, {{path, 0, 0, "out of memory reading it: it asks for more than this machine has"}}};
  }
}

}  // namespace tw
