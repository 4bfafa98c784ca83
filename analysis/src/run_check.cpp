#include "tensorwire/analysis/run_check.hpp"

#include <optional>
#include <unordered_map>

#include "tensorwire/core/frame.hpp"

namespace tw {
namespace {

struct Instance {
  std::optional<OpTimes> sent;  // send record (sender) or compute record
  std::optional<OpTimes> received;
};

std::uint64_t key(OpIndex op, std::uint32_t iteration) { return (static_cast<std::uint64_t>(op) << 32) | iteration; }

}  // namespace

RunCheck check_run(const Profile& p, const std::vector<std::vector<Record>>& ranks, const RunCheckOptions& o) {
  RunCheck out;
  const std::uint64_t iterations = o.iterations != 0 ? o.iterations : p.iterations;
  const auto problem = [&out](std::string s) {
    if (out.problems.size() < 50) out.problems.push_back(std::move(s));
  };
  std::unordered_map<std::uint64_t, Instance> at;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    for (const Record& record : ranks[r]) {
      const auto times = op_times(record);
      if (!times) continue;
      const OpTimes& rec = *times;
      if (rec.op >= p.ops.size() || rec.iteration >= iterations) {
        problem("rank " + std::to_string(r) + ": a record names op " + std::to_string(rec.op) + " of iteration " +
                std::to_string(rec.iteration) + ", not in the profile");
        continue;
      }
      Instance& in = at[key(rec.op, rec.iteration)];
      const Op& op = p.ops[rec.op];
      const std::string what = op.id + " of iteration " + std::to_string(rec.iteration);
      if (rec.kind == RecordKind::receive) {
        if (p.flows[op.flow].dst != r) problem(what + " was received by rank " + std::to_string(r) + ", not its destination");
        if (in.received) problem(what + " was received twice");
        in.received = rec;
      } else {
        if (op.rank != r) problem(what + " was run by rank " + std::to_string(r) + ", not its own rank");
        if (in.sent) problem(what + " was run twice");
        in.sent = rec;
      }
    }
  }
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    if (o.open_loop && op.type == OpType::compute) continue;
    for (std::uint32_t it = 0; it < iterations; ++it) {
      const auto found = at.find(key(static_cast<OpIndex>(i), it));
      const std::string what = op.id + " of iteration " + std::to_string(it);
      if (found == at.end() || !found->second.sent) {
        problem(what + " never ran");
        continue;
      }
      if (op.type != OpType::send) continue;
      const auto& rx = found->second.received;
      if (!rx) {
        problem(what + " was sent but never received");
        continue;
      }
      const Bytes wire = frame::wire_bytes(op.bytes);
      if (found->second.sent->bytes != wire || rx->bytes != wire) {
        problem(what + ": " + std::to_string(found->second.sent->bytes) + " bytes sent, " + std::to_string(rx->bytes) +
                " received, " + std::to_string(wire) + " expected");
      }
      ++out.messages;
      out.bytes += rx->bytes;
    }
  }
  if (o.open_loop) return out;
  // Dependencies: start (send: ready; compute: start) >= completion of each dependency + gap.
  for (const auto& [k, inst] : at) {
    if (!inst.sent) continue;
    const OpTimes& rec = *inst.sent;
    const Op& op = p.ops[rec.op];
    const Nanos start = rec.start;
    for (const Dependency& d : op.after) {
      if (rec.iteration < d.iterations_back) continue;
      const auto dep = at.find(key(d.op, rec.iteration - d.iterations_back));
      if (dep == at.end()) continue;  // reported above as never ran
      const auto& done = d.recv ? dep->second.received : dep->second.sent;
      if (!done) continue;
      const Nanos completed = done->completed;  // sent_app, compute end, or delivery
      const Nanos tolerance = d.recv ? o.cross_rank_tolerance : o.own_rank_tolerance;
      ++out.dependencies_checked;
      if (start + tolerance < completed + op.gap_in(rec.iteration)) {
        problem(op.id + " of iteration " + std::to_string(rec.iteration) + " started " +
                human_duration(completed + op.gap_in(rec.iteration) - start) + " before its dependency " + (d.recv ? "recv:" : "") +
                p.ops[d.op].id + " allowed");
      }
    }
  }
  return out;
}

}  // namespace tw
