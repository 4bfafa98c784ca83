#include "tensorwire/core/profile.hpp"

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

}  // namespace tw
