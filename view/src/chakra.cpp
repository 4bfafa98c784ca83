#include "tensorwire/view/chakra.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "proto_encoder.hpp"
#include "tensorwire/core/profile_io.hpp"

namespace tw::view {
namespace {

// ChakraProtoMsg (schema/protobuf/et_def.proto).
namespace attr {  // AttributeProto
constexpr int kName = 1, kInt32 = 7, kInt64 = 9, kBool = 27, kString = 29;
}
namespace meta {  // GlobalMetadata
constexpr int kVersion = 1, kAttr = 2;
}
namespace node {  // Node
constexpr int kId = 1, kName = 2, kType = 3, kCtrlDeps = 4, kDataDeps = 5, kStartMicros = 6, kDurationMicros = 7, kAttr = 10;
}
constexpr std::uint64_t kCompNode = 4, kCommSendNode = 5, kCommRecvNode = 6;  // NodeType

Proto attribute(std::string_view name) {
  Proto a;
  a.str(attr::kName, name);
  return a;
}
void int32_attr(Proto& n, std::string_view name, std::int64_t v) {
  Proto a = attribute(name);
  a.i(attr::kInt32, v);
  n.msg(node::kAttr, a);
}
void int64_attr(Proto& n, std::string_view name, std::int64_t v) {
  Proto a = attribute(name);
  a.i(attr::kInt64, v);
  n.msg(node::kAttr, a);
}
void bool_attr(Proto& n, std::string_view name, bool v) {
  Proto a = attribute(name);
  a.u(attr::kBool, v ? 1 : 0);
  n.msg(node::kAttr, a);
}

void delimited(std::string& out, const Proto& p) {
  Proto len;
  len.varint(p.size());
  out += len.bytes();
  out += p.bytes();
}

}  // namespace

ChakraCounts write_chakra(const Profile& p, const Timeline& t, const std::string& prefix) {
  const std::size_t n = p.ranks.size();
  ChakraCounts c;
  // Node ids per rank file: every own op, then a receive per incoming message.
  std::vector<std::uint64_t> own_id(p.ops.size(), 0), recv_id(p.ops.size(), 0);
  std::vector<std::uint64_t> next(n, 0);
  for (OpIndex o = 0; o < p.ops.size(); ++o) own_id[o] = next[p.ops[o].rank]++;
  for (OpIndex o = 0; o < p.ops.size(); ++o) {
    if (p.ops[o].type == OpType::send) recv_id[o] = next[p.flows[p.ops[o].flow].dst]++;
  }
  std::vector<std::string> files(n);
  for (std::size_t r = 0; r < n; ++r) {
    Proto m;
    m.str(meta::kVersion, "0.0.4");
    Proto a = attribute("schema");
    a.str(attr::kString, "1.0.2-chakra.0.0.4");
    m.msg(meta::kAttr, a);
    Proto g = attribute("generator");
    g.str(attr::kString, "tensorwire trace chakra");
    m.msg(meta::kAttr, g);
    delimited(files[r], m);
  }
  const auto duration_us = [&](OpIndex o) {
    std::vector<Nanos> v;
    if (o < t.ops.size()) {
      for (const Instance& x : t.ops[o]) {
        if (x.start >= 0 && x.end >= x.start) v.push_back(x.end - x.start);
      }
    }
    const Nanos ns = v.empty() ? p.ops[o].mean_duration() : percentile(std::move(v), 0.5);
    return static_cast<std::uint64_t>((ns + 500) / 1000);
  };
  for (OpIndex o = 0; o < p.ops.size(); ++o) {
    const Op& op = p.ops[o];
    Proto x;
    x.u(node::kId, own_id[o]);
    x.str(node::kName, op.id);
    x.u(node::kType, op.type == OpType::compute ? kCompNode : kCommSendNode);
    for (const Dependency& d : op.after) {
      if (d.iterations_back != 0) continue;  // one iteration
      x.u(node::kDataDeps, d.recv ? recv_id[d.op] : own_id[d.op]);
      ++c.dependencies;
    }
    if (op.type == OpType::compute) {
      x.u(node::kDurationMicros, duration_us(o));
      bool_attr(x, "is_cpu_op", false);
      ++c.compute;
    } else {
      const Flow& f = p.flows[op.flow];
      int64_attr(x, "comm_size", static_cast<std::int64_t>(op.bytes));
      int32_attr(x, "comm_src", f.src);
      int32_attr(x, "comm_dst", f.dst);
      int32_attr(x, "comm_tag", static_cast<std::int64_t>(o & 0x7fffffff));
      bool_attr(x, "is_cpu_op", false);
      ++c.sends;
    }
    delimited(files[op.rank], x);
    if (op.type != OpType::send) continue;
    // The receive, posted at once on the receiver; what waits for the message depends on it.
    const Flow& f = p.flows[op.flow];
    Proto y;
    y.u(node::kId, recv_id[o]);
    y.str(node::kName, op.id + ".recv");
    y.u(node::kType, kCommRecvNode);
    int64_attr(y, "comm_size", static_cast<std::int64_t>(op.bytes));
    int32_attr(y, "comm_src", f.src);
    int32_attr(y, "comm_dst", f.dst);
    int32_attr(y, "comm_tag", static_cast<std::int64_t>(o & 0x7fffffff));
    bool_attr(y, "is_cpu_op", false);
    delimited(files[f.dst], y);
    ++c.recvs;
  }
  (void)node::kCtrlDeps, (void)node::kStartMicros;
  for (std::size_t r = 0; r < n; ++r) {
    // Each written beside its path and renamed: a full disk leaves no half file.
    write_file_atomic(prefix + "." + std::to_string(r) + ".et", files[r]);
    ++c.files;
  }
  return c;
}

}  // namespace tw::view
