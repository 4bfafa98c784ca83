// The capture's analysis on hand-made traces: annotation spans paired, messages
// given their iteration and bucket, and Chrome-trace import on its clocks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <tuple>

#include "tensorwire/capture/chrome_trace.hpp"
#include "tensorwire/util/temp_dir.hpp"
#include "tensorwire/core/trace.hpp"
#include "../support/trace_builders.hpp"

namespace tw {
namespace {

trace::MarkEvent mark(trace::MarkType type, char phase, Nanos at, std::int64_t value = 0, std::uint32_t aux = 0,
                      std::uint32_t tid = 1, const char* name = "") {
  trace::MarkEvent m{.kind = trace::Kind::mark, .phase = phase, .type = type, .aux = aux, .tid = tid, .reserved = 0,
                     .at_ns = at, .value = value, .name = {}};
  std::strncpy(m.name, name, sizeof m.name - 1);
  return m;
}

using test::one_connection;
using test::send;

TEST(CaptureAnnotations, PairsSpansAndAttributesMessagesToIterationAndBucket) {
  ProcessTrace t = one_connection();
  using T = trace::MarkType;
  t.marks = {mark(T::iteration, 'B', 100, 7), mark(T::forward, 'B', 110), mark(T::forward, 'E', 200),
             // Bucket 0 ready at 300, bucket 1 at 400; 0 is reduced at 500 (on another thread), 1 at 700.
             mark(T::bucket, 'B', 300, 4096, 0, 1, "fc.bias+1"), mark(T::bucket, 'B', 400, 8192, 1, 1, "conv.weight"),
             mark(T::bucket, 'E', 500, 4096, 0, 9, "fc.bias+1"), mark(T::bucket, 'E', 700, 8192, 1, 9, "conv.weight"),
             mark(T::iteration, 'E', 800, 7), mark(T::span, 'I', 900, 0, 0, 1, "checkpoint")};
  // Messages (complete writes of 32 KiB each: one call, one message) at 320, 450, 600 and 850.
  t.io = {send(1, 320, 330, 0, 32768), send(1, 450, 460, 32768, 32768), send(1, 600, 610, 65536, 32768),
          send(1, 850, 860, 98304, 32768)};
  const CaptureAnalysis a = analyse_capture({t});
  ASSERT_EQ(a.spans.size(), 5U);
  EXPECT_EQ(a.spans[0].type, T::iteration);
  EXPECT_EQ(a.spans[0].end, 800);
  EXPECT_EQ(a.spans[1].type, T::forward);
  EXPECT_EQ(a.spans[2].end, 500) << "bucket 0 closed by its index, from another thread";
  EXPECT_EQ(a.spans[4].end, 900) << "an instant";
  ASSERT_EQ(a.messages.size(), 4U);
  EXPECT_EQ(a.messages[0].iteration, 7);
  EXPECT_EQ(a.messages[0].bucket_span, 2);
  EXPECT_EQ(a.messages[1].bucket_span, 2) << "bucket 1 is ready but bucket 0 is still being reduced";
  EXPECT_EQ(a.messages[2].bucket_span, 3);
  EXPECT_EQ(a.messages[3].iteration, -1) << "after the iteration";
  EXPECT_EQ(a.messages[3].bucket_span, -1);
}

// Nested and repeated spans of one key close innermost first; ends without a
// begin are dropped; a begin without an end stays open; keys do not mix. Checked
// against the pairing written plainly (a map of open spans per key) on random
// marks from a few types, threads, names and times with ties.
TEST(CaptureAnnotations, PairingMatchesAStackPerKey) {
  using T = trace::MarkType;
  const auto plain = [](const std::vector<trace::MarkEvent>& in) {
    std::vector<trace::MarkEvent> marks = in;
    std::stable_sort(marks.begin(), marks.end(), [](const auto& a, const auto& b) { return a.at_ns < b.at_ns; });
    std::vector<AnnotatedSpan> out;
    std::map<std::tuple<int, std::uint32_t, std::string>, std::vector<std::size_t>> open;
    for (const auto& m : marks) {
      const bool bucket = m.type == T::bucket;
      const auto key = std::make_tuple(static_cast<int>(m.type), bucket ? m.aux : m.tid, bucket ? std::string() : std::string(m.name));
      if (m.phase == 'E') {
        auto& o = open[key];
        if (o.empty()) continue;
        out[o.back()].end = m.at_ns;
        o.pop_back();
        continue;
      }
      if (m.phase != 'I') open[key].push_back(out.size());
      out.push_back({0, m.type, m.name, m.value, m.aux, m.at_ns, m.phase == 'I' ? m.at_ns : Nanos{-1}});
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
    return out;
  };
  std::mt19937 rng(7);
  const char* names[] = {"", "a", "b", "a-longer-name-than-fifteen"};
  const T types[] = {T::iteration, T::forward, T::bucket, T::span};
  const char phases[] = {'B', 'B', 'E', 'E', 'I'};
  for (int round = 0; round < 50; ++round) {
    ProcessTrace t;
    for (int i = 0; i < 300; ++i) {
      t.marks.push_back(mark(types[rng() % 4], phases[rng() % 5], static_cast<Nanos>(rng() % 100), static_cast<std::int64_t>(i),
                             static_cast<std::uint32_t>(rng() % 2), static_cast<std::uint32_t>(1 + rng() % 2), names[rng() % 4]));
    }
    const auto got = annotated_spans({t});
    const auto want = plain(t.marks);
    ASSERT_EQ(got.size(), want.size()) << "round " << round;
    for (std::size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("round " + std::to_string(round) + ", span " + std::to_string(i));
      EXPECT_EQ(got[i].type, want[i].type);
      EXPECT_EQ(got[i].name, want[i].name);
      EXPECT_EQ(got[i].value, want[i].value);
      EXPECT_EQ(got[i].begin, want[i].begin);
      EXPECT_EQ(got[i].end, want[i].end);
    }
  }
}

// Each connection's other end is the one with its addresses swapped, found by
// lookup: 3000 connections from a client process to a server process, the
// server's listed in reverse, one address pair used twice (the later one wins,
// on both sides) and one connection whose peer was not traced.
TEST(CaptureConnections, EachEndIsPairedWithTheOneWithItsAddressesSwapped) {
  constexpr std::uint16_t kConns = 3000;
  ProcessTrace client = one_connection(), server = one_connection();
  client.conns.clear(), server.conns.clear();
  const auto conn = [](std::uint32_t id, std::uint16_t local_port, std::uint16_t remote_port) {
    trace::ConnEvent c{};
    c.kind = trace::Kind::conn;
    c.family = 2;
    c.conn = id;
    c.how = trace::ConnOrigin::connect;
    c.local[0] = 10, c.local[3] = 1, c.remote[0] = 10, c.remote[3] = 2;
    c.local_port = local_port, c.remote_port = remote_port;
    return c;
  };
  for (std::uint16_t k = 0; k < kConns; ++k) client.conns.push_back(conn(k, static_cast<std::uint16_t>(20000 + k), 5000));
  client.conns.push_back(conn(kConns, 20000, 5000));  // port 20000 again, later
  client.conns.push_back(conn(kConns + 1, 40000, 5000));  // its server end was not traced
  for (std::uint16_t k = kConns; k-- > 0;) {
    trace::ConnEvent c = conn(k, 5000, static_cast<std::uint16_t>(20000 + k));
    std::swap(c.local, c.remote);
    c.how = trace::ConnOrigin::accept;
    server.conns.push_back(c);
  }
  const CaptureAnalysis a = analyse_capture({client, server});
  ASSERT_EQ(a.connections.size(), 2U * kConns + 2);
  const std::size_t servers = kConns + 2;  // the server's connections follow the client's
  for (std::size_t i = 0; i < a.connections.size(); ++i) {
    const Connection& c = a.connections[i];
    if (i == kConns + 1) {
      EXPECT_FALSE(c.peer) << "no traced end at 10.0.0.2:5000 for port 40000";
      continue;
    }
    ASSERT_TRUE(c.peer) << i;
    EXPECT_EQ(a.connections[*c.peer].local, c.remote) << i;
    EXPECT_EQ(a.connections[*c.peer].remote, c.local) << i;
    if (i == 0 || i == kConns) {
      EXPECT_EQ(*c.peer, servers + kConns - 1) << "the server's end of port 20000";
    }
  }
  // The server's end of port 20000 takes the client's later connection.
  EXPECT_EQ(a.connections[servers + kConns - 1].peer, std::optional<std::size_t>(kConns));
  EXPECT_EQ(a.connections[servers].local.address, "10.0.0.2:5000");
  EXPECT_EQ(a.connections[servers].remote.address, "10.0.0.1:" + std::to_string(20000 + kConns - 1));
}

TEST(CaptureMessages, SmallCallsJoinPartialWritesContinueLargeCompleteWritesEnd) {
  ProcessTrace t = one_connection();
  trace::Event partial = send(1, 300, 310, 4, 100000);
  partial.requested = 200000;  // the rest follows, however late
  t.io = {send(1, 100, 110, 0, 4), partial, send(1, 5000, 5010, 100004, 100000), send(1, 5020, 5030, 200004, 50000)};
  const CaptureAnalysis a = analyse_capture({t}, 100 * kMicro);
  ASSERT_EQ(a.messages.size(), 2U);
  EXPECT_EQ(a.messages[0].begin, 0U);
  EXPECT_EQ(a.messages[0].end, 200004U);
  EXPECT_EQ(a.messages[0].calls, 3U);
  EXPECT_EQ(a.messages[1].begin, 200004U) << "a complete 100 kB write ends its message";
}

class ChromeImport : public ::testing::Test {
 protected:
  std::string path = (std::filesystem::temp_directory_path() / ("tw-chrome-" + std::to_string(::getpid()) + ".json")).string();
  void TearDown() override { std::filesystem::remove(path); }
  void write(const std::string& text) { std::ofstream(path) << text; }
  std::string error(const ImportOptions& o, const std::vector<ProcessTrace>& traces, Nanos b = 0, Nanos e = 0) {
    try {
      import_chrome_trace(path, o, traces, b, e);
    } catch (const std::runtime_error& x) {
      return x.what();
    }
    return "";
  }
};

TEST_F(ChromeImport, RelativeTimestampsNeedAStartAndForeignPidsNeedAProcess) {
  write(R"([{"name": "aten::mm", "ph": "X", "ts": 10.5, "dur": 2, "pid": "CPU functions", "tid": 1},
           {"name": "meta", "ph": "M", "pid": 1},
           {"name": "step", "ph": "B", "ts": 20, "pid": "CPU functions", "tid": 1},
           {"ph": "E", "ts": 30, "pid": "CPU functions", "tid": 1}])");
  ProcessTrace p;
  p.pid = 77;
  EXPECT_NE(error({}, {p}).find("timestamps are relative"), std::string::npos);
  ImportOptions o;
  o.start_ns = 1'000'000'000;
  EXPECT_NE(error(o, {p}).find("process \"CPU functions\" is not one of the capture's; give --pid"), std::string::npos);
  o.pid = 77;
  const auto ops = import_chrome_trace(path, o, {p}, 0, 0);
  ASSERT_EQ(ops.size(), 2U);
  EXPECT_EQ(ops[0].name, "aten::mm");
  EXPECT_EQ(ops[0].begin, 1'000'010'500);
  EXPECT_EQ(ops[0].end, 1'000'012'500);
  EXPECT_EQ(ops[1].name, "step");
  EXPECT_EQ(ops[1].end - ops[1].begin, 10'000);
  EXPECT_EQ(ops[1].pid, 77);
  // The capture ran a day later: the clock is wrong.
  EXPECT_NE(error(o, {p}, 86400 * kSecond, 86401 * kSecond).find("fall outside the capture"), std::string::npos);
}

TEST_F(ChromeImport, EpochTimestampsAndPidsAreUsedAsTheyAre) {
  write(R"({"traceEvents": [{"name": "conv", "ph": "X", "ts": 1795961283717229.0, "dur": 5, "pid": 77, "tid": 3}]})");
  ProcessTrace p;
  p.pid = 77;
  const auto ops = import_chrome_trace(path, {}, {p}, 1795961283 * kSecond, 1795961284 * kSecond);
  ASSERT_EQ(ops.size(), 1U);
  EXPECT_EQ(ops[0].begin, 1795961283717229000);
  EXPECT_EQ(ops[0].thread, "3");
  write(R"({"events": []})");
  EXPECT_NE(error({}, {p}).find("no traceEvents array"), std::string::npos);
  write("{not json");
  EXPECT_NE(error({}, {p}).find(": not valid JSON"), std::string::npos);
  write(R"([{"name": "counter", "ph": "C", "ts": 1}])");
  EXPECT_NE(error({}, {p}).find("no complete (X) or begin/end (B/E) events"), std::string::npos);
}

// Read as it streams past (the document took 20 times the file): an event's own
// fields count, not those of the objects inside it (args), nor events nested
// anywhere but in traceEvents; nesting is bounded as in every JSON file.
TEST_F(ChromeImport, OnlyAnEventsOwnFieldsCount) {
  ProcessTrace p;
  p.pid = 77;
  write(R"({"meta": {"traceEvents": [{"name": "hidden", "ph": "X", "ts": 1795961283000000, "pid": 77}]},
           "traceEvents": [7, [1, 2], {"ph": "M", "name": "process_name", "args": {"name": "x"}},
             {"name": "conv", "ph": "X", "ts": 1795961283717229, "dur": 5, "pid": 77, "tid": {"a": 1},
              "args": {"name": "not the name", "ts": 1, "ph": "B", "deep": [[{"dur": 9}]]}}],
           "baseTimeNanoseconds": 0})");
  const auto ops = import_chrome_trace(path, {}, {p}, 1795961283 * kSecond, 1795961284 * kSecond);
  ASSERT_EQ(ops.size(), 1U);
  EXPECT_EQ(ops[0].name, "conv");
  EXPECT_EQ(ops[0].thread, "{}");
  EXPECT_EQ(ops[0].begin, 1795961283717229000);
  EXPECT_EQ(ops[0].end - ops[0].begin, 5000);
  // An event's index counts every element of the array, as the file has them.
  write(R"([7, {"ph": "X", "ts": "soon"}])");
  EXPECT_NE(error({}, {p}).find(": event 2: no numeric ts"), std::string::npos) << error({}, {p});
  write(R"([{"ph": "X", "ts": 1, "args": )" + std::string(100, '[') + std::string(100, ']') + "}]");
  EXPECT_NE(error({}, {p}).find(": nesting deeper than 64 levels"), std::string::npos) << error({}, {p});
  write("42");
  EXPECT_NE(error({}, {p}).find(": no traceEvents array (a Chrome trace is an object with one, or an array of events)"), std::string::npos)
      << error({}, {p});
  write(R"({"traceEvents": {"a": 1}})");
  EXPECT_NE(error({}, {p}).find(": no traceEvents array"), std::string::npos) << error({}, {p});
}

// Imported ops are written an op at a time and read back as they stream past,
// each field checked by name.
TEST(ImportedOps, WrittenAndReadBackFieldByField) {
  const TempDir d("tw-ops-test");
  const std::vector<ImportedOp> ops = {{.pid = 7, .thread = "1", .name = "aten::mm \"q\"", .category = "cpu_op", .begin = 5, .end = 9},
                                       {.pid = 8, .thread = "", .name = "\xc3\xa9t\x1b", .category = "", .begin = -3, .end = 0}};
  write_imported_ops(d.path(), "p", "/x/p.json", ops);
  const std::vector<ImportedOp> back = read_imported_ops(d.path());
  ASSERT_EQ(back.size(), 2U);
  EXPECT_EQ(back[0].name, "aten::mm \"q\"");
  EXPECT_EQ(back[0].begin, 5);
  EXPECT_EQ(back[0].end, 9);
  EXPECT_EQ(back[1].pid, 8);
  EXPECT_EQ(back[1].name, "\xc3\xa9t\\x1b") << "a control character comes back escaped";
  const std::string file = d.path() + "/ops-p.json";
  const auto refused = [&](const std::string& text) -> std::string {
    std::ofstream(file) << text;
    try {
      read_imported_ops(d.path());
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "read";
  };
  EXPECT_EQ(refused(R"({"ops": [{"pid": 1}, {"pid": "7"}]})"), file + ": op 2: 'pid' must be a whole number");
  EXPECT_EQ(refused(R"({"ops": [{"name": 3}]})"), file + ": op 1: 'name' must be a string");
  EXPECT_EQ(refused(R"({"ops": [{"thread": {"a": 1}}]})"), file + ": op 1: 'thread' must be a string");
  EXPECT_EQ(refused(R"({"format": "tensorwire-ops"})"), file + ": not an imported-ops file (no ops array)");
  EXPECT_EQ(refused(R"([{"pid": 1}])"), file + ": not an imported-ops file (no ops array)");
}

// Found by capture_fuzz: a timestamp in microseconds times 1000 overflowed.
TEST_F(ChromeImport, TimesBeyondWhatNanosecondsHoldAreRefused) {
  ProcessTrace p;
  p.pid = 1;
  ImportOptions o;
  o.pid = 1;
  write(R"([{"name": "x", "ph": "X", "ts": 21500000000000000, "dur": 1, "pid": 1, "tid": 1}])");
  EXPECT_NE(error(o, {p}).find("event 1: ts 21500000000000000 us is out of range"), std::string::npos) << error(o, {p});
  write(R"([{"name": "x", "ph": "X", "ts": 1795961283717229, "dur": 1e300, "pid": 1, "tid": 1}])");
  EXPECT_NE(error(o, {p}).find("event 1: dur"), std::string::npos) << error(o, {p});
  write(R"([{"name": "x", "ph": "X", "ts": 18446744073709551615, "pid": 1, "tid": 1}])");
  EXPECT_NE(error(o, {p}).find("out of range"), std::string::npos) << error(o, {p});
  write(R"({"traceEvents": [{"name": "x", "ph": "X", "ts": 1, "pid": 1, "tid": 1}], "baseTimeNanoseconds": 9e18})");
  EXPECT_NE(error(o, {p}).find("baseTimeNanoseconds 9e+18 is out of range"), std::string::npos) << error(o, {p});
  // A base and a timestamp each within range, but their sum beyond it.
  write(R"({"traceEvents": [{"name": "x", "ph": "X", "ts": 4000000000000000, "pid": 1, "tid": 1}], "baseTimeNanoseconds": 4000000000000000000})");
  EXPECT_NE(error(o, {p}).find("op \"x\" at"), std::string::npos) << error(o, {p});
  o.start_ns = -5;
  write(R"([{"name": "x", "ph": "X", "ts": 1, "pid": 1, "tid": 1}])");
  EXPECT_NE(error(o, {p}).find("--start-ns -5 ns is out of range"), std::string::npos) << error(o, {p});
}

}  // namespace
}  // namespace tw
