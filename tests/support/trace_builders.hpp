// Pieces of hand-made captures for the tests: a send call and a process with one
// traced TCP connection (conn 1, local port 1000 to remote port 2000).
#pragma once

#include "tensorwire/core/trace.hpp"

namespace tw::test {

inline trace::Event send(std::uint32_t conn, Nanos enter, Nanos exit, std::uint64_t offset, std::int64_t bytes) {
  return {.kind = trace::Kind::send, .flags = 0, .call = trace::Call::send, .fd = 3, .conn = conn, .tid = 1, .enter_ns = enter,
          .exit_ns = exit, .result = bytes, .err = 0, .reserved = 0, .offset = offset, .requested = static_cast<std::uint64_t>(bytes)};
}

inline ProcessTrace one_connection() {
  ProcessTrace t;
  t.pid = 42;
  trace::ConnEvent c{};
  c.kind = trace::Kind::conn;
  c.family = 2;
  c.conn = 1;
  c.how = trace::ConnOrigin::connect;
  c.local_port = 1000;
  c.remote_port = 2000;
  t.conns.push_back(c);
  return t;
}

}  // namespace tw::test
