#include "tensorwire/core/profile.hpp"

#include <cmath>

namespace tw {

const char* role_name(Role r) { return r == Role::server ? "server" : "worker"; }
const char* op_type_name(OpType t) { return t == OpType::send ? "send" : "compute"; }

void Profile::index() {
  op_by_id.clear();
  flow_by_id.clear();
  op_by_id.reserve(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) op_by_id.emplace(ops[i].id, static_cast<OpIndex>(i));
  for (std::size_t i = 0; i < flows.size(); ++i) flow_by_id.emplace(flows[i].id, static_cast<FlowIndex>(i));
}

namespace {
Nanos mean_or(const std::vector<Nanos>& v, Nanos fallback) {
  if (v.empty()) return fallback;
  long double sum = 0;
  for (Nanos d : v) sum += static_cast<long double>(d);
  return static_cast<Nanos>(std::llround(sum / static_cast<long double>(v.size())));
}
}  // namespace

Nanos Op::mean_duration() const { return mean_or(durations, duration); }
Nanos Op::mean_gap() const { return mean_or(gaps, gap); }

Profile time_scaled(const Profile& profile, double k) {
  Profile p = profile;
  const auto scale = [k](Nanos t) { return static_cast<Nanos>(std::llround(static_cast<double>(t) * k)); };
  for (Op& op : p.ops) {
    op.duration = scale(op.duration);
    for (Nanos& d : op.durations) d = scale(d);
    op.gap = scale(op.gap);
    for (Nanos& g : op.gaps) g = scale(g);
  }
  for (Flow& f : p.flows) f.read_lag = scale(f.read_lag);
  if (p.observed) {
    for (ObservedIteration& it : p.observed->iterations) {
      it.duration = scale(it.duration);
      for (Nanos& d : it.rank_durations) d = scale(d);
    }
    for (ObservedOp& o : p.observed->ops) {
      o.start = scale(o.start);
      o.end = scale(o.end);
    }
  }
  return p;
}

}  // namespace tw
