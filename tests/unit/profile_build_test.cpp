// profile build on schedules and captures made by hand: a known DAG with jittered
// timings gives back its edges; warm-up iterations are dropped; the rendezvous
// store and an irregular connection are left out; bad input is refused.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>

#include "build_job.hpp"
#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/profile/build.hpp"
#include "tensorwire/util/temp_dir.hpp"

namespace tw {
namespace {

// ---- dependency inference on plain times ----

TEST(InferDependencies, KnownDagWithJitterGivesItsEdges) {
  // Rank 0: A (root, after compute), E (root, later), F (root, early: a
  // distractor that always completes before C but is not what C waits for),
  // C after recv:B and E. Rank 1: B after recv:A, D after recv:C.
  std::mt19937 rng(7);
  std::normal_distribution<double> jitter(0, 1);
  const auto j = [&](double us, double sd) { return static_cast<Nanos>(std::max(1.0, us + sd * jitter(rng)) * 1e3); };
  enum { A, B, C, D, E, F };
  std::vector<build::SendTimes> s(6);
  for (int i : {A, C, E, F}) s[i].rank = 0, s[i].dst = 1;
  for (int i : {B, D}) s[i].rank = 1, s[i].dst = 0;
  const std::size_t K = 40;
  std::vector<std::vector<Nanos>> start(2, std::vector<Nanos>(K));
  for (std::size_t k = 0; k < K; ++k) {
    const Nanos t0 = static_cast<Nanos>(k) * 20 * kMilli;
    start[0][k] = t0;
    start[1][k] = t0 + j(30, 10);
    const auto send = [&](int i, Nanos ready, double wire_us) {
      s[i].ready.push_back(ready);
      s[i].sent.push_back(ready + j(20, 5));
      s[i].received.push_back(s[i].sent.back() + j(wire_us, wire_us / 5));
    };
    send(F, t0 + j(100, 20), 50);
    send(A, t0 + j(1000, 100), 100);
    send(B, s[A].received[k] + j(200, 20), 100);
    send(E, t0 + j(1500, 200), 80);
    send(C, std::max(s[B].received[k], s[E].sent[k]) + j(150, 15), 100);
    send(D, s[C].received[k] + j(300, 30), 100);
  }
  const build::Inferred inf = build::infer_dependencies(s, start);
  const auto edges = [&](int i) {
    std::vector<std::pair<OpIndex, bool>> e;
    for (const Dependency& d : inf.after[i]) e.emplace_back(d.op, d.recv);
    std::sort(e.begin(), e.end());
    return e;
  };
  using E2 = std::vector<std::pair<OpIndex, bool>>;
  EXPECT_EQ(edges(A), E2{});
  EXPECT_EQ(edges(F), E2{});
  EXPECT_EQ(edges(E), E2{});
  EXPECT_EQ(edges(B), (E2{{A, true}}));
  EXPECT_EQ(edges(C), (E2{{B, true}, {E, false}}));
  EXPECT_EQ(edges(D), (E2{{C, true}}));
  // The wait after the last dependency is the compute that followed it.
  std::vector<Nanos> w = inf.wait[B];
  std::sort(w.begin(), w.end());
  EXPECT_NEAR(static_cast<double>(w[K / 2]), 200e3, 20e3);
}

TEST(InferDependencies, ASendThatHeldItsThreadPassesTheTimeOn) {
  // Rank 0 sends A, computes 300 us, sends B. A's call takes 20 us, but 2 ms
  // in iteration 5 (the thread descheduled inside it): B's wait in iteration 5
  // counts from A's usual return, so it holds the 2 ms the replay's A will not.
  std::vector<build::SendTimes> s(2);
  s[0].rank = s[1].rank = 0;
  s[0].dst = s[1].dst = 1;
  const std::size_t K = 12;
  std::vector<std::vector<Nanos>> start(2, std::vector<Nanos>(K));
  for (std::size_t k = 0; k < K; ++k) {
    const Nanos t0 = static_cast<Nanos>(k) * 10 * kMilli + static_cast<Nanos>(k % 3) * 200 * kMicro;
    start[0][k] = start[1][k] = static_cast<Nanos>(k) * 10 * kMilli;
    const Nanos call = k == 5 ? 2 * kMilli : 20 * kMicro;
    s[0].ready.push_back(t0 + 1 * kMilli);
    s[0].sent.push_back(s[0].ready.back() + call);
    s[0].received.push_back(s[0].sent.back() + 10 * kMicro);
    s[1].ready.push_back(s[0].sent.back() + 300 * kMicro);
    s[1].sent.push_back(s[1].ready.back() + 20 * kMicro);
    s[1].received.push_back(s[1].sent.back() + 10 * kMicro);
  }
  const build::Inferred inf = build::infer_dependencies(s, start);
  ASSERT_EQ(inf.after[1].size(), 1u);
  EXPECT_EQ(inf.after[1][0].op, 0u);
  EXPECT_FALSE(inf.after[1][0].recv);
  EXPECT_EQ(inf.wait[1][4], 300 * kMicro);
  EXPECT_EQ(inf.wait[1][5], 2 * kMilli - 20 * kMicro + 300 * kMicro) << "the held time, not only the compute";
}

TEST(InferDependencies, AnEventThatIsSometimesLaterIsNoDependency) {
  // Y becomes ready after X's receipt in most iterations but not in all: no edge.
  std::vector<build::SendTimes> s(2);
  s[0].rank = 0, s[0].dst = 1;
  s[1].rank = 1, s[1].dst = 0;
  std::vector<std::vector<Nanos>> start(2);
  for (int k = 0; k < 20; ++k) {
    const Nanos t0 = k * 10 * kMilli;
    start[0].push_back(t0);
    start[1].push_back(t0);
    s[0].ready.push_back(t0 + 100 * kMicro);
    s[0].sent.push_back(t0 + 110 * kMicro);
    s[0].received.push_back(t0 + 200 * kMicro);
    s[1].ready.push_back(t0 + (k % 5 == 0 ? 150 : 300) * kMicro);
    s[1].sent.push_back(s[1].ready.back() + 10 * kMicro);
    s[1].received.push_back(s[1].ready.back() + 100 * kMicro);
  }
  const build::Inferred inf = build::infer_dependencies(s, start);
  EXPECT_TRUE(inf.after[1].empty());
}

// ---- whole captures made by hand ----

// Two processes (ranks from RANK), TCP connections between them, and sends with
// their receipts on the other side.
struct HandCapture {
  std::vector<ProcessTrace> p;
  std::uint32_t next_conn = 1;
  std::vector<std::uint64_t> offset;  // per (process * 64 + conn): bytes sent so far

  explicit HandCapture(int n, bool with_master_port = true) {
    for (int i = 0; i < n; ++i) {
      ProcessTrace t;
      t.pid = 100 + i;
      t.host = "h";
      t.final = true;
      t.env["RANK"] = std::to_string(i);
      if (with_master_port) t.env["MASTER_PORT"] = "29500";
      p.push_back(t);
    }
    offset.assign(static_cast<std::size_t>(n) * 64, 0);
  }
  static trace::ConnEvent conn(std::uint32_t id, std::uint16_t lport, std::uint16_t rport, trace::ConnOrigin how) {
    trace::ConnEvent c{};
    c.kind = trace::Kind::conn;
    c.family = AF_INET;
    c.conn = id;
    c.how = how;
    const std::uint8_t lo[4] = {127, 0, 0, 1};
    std::copy(lo, lo + 4, c.local);
    std::copy(lo, lo + 4, c.remote);
    c.local_port = lport;
    c.remote_port = rport;
    return c;
  }
  // A connection from process a (port pa) to process b (port pb); the same id on both.
  std::uint32_t connect(int a, std::uint16_t pa, int b, std::uint16_t pb) {
    const std::uint32_t id = next_conn++;
    p[a].conns.push_back(conn(id, pa, pb, trace::ConnOrigin::connect));
    p[b].conns.push_back(conn(id, pb, pa, trace::ConnOrigin::accept));
    return id;
  }
  // One complete write of `bytes` from a to b on `id` at `t`, read `latency` later.
  void send(int a, int b, std::uint32_t id, Nanos t, std::int64_t bytes, Nanos latency = 50 * kMicro) {
    std::uint64_t& off = offset[static_cast<std::size_t>(a) * 64 + id];
    trace::Event e{};
    e.kind = trace::Kind::send;
    e.call = trace::Call::send;
    e.conn = id;
    e.tid = 1;
    e.enter_ns = t;
    e.exit_ns = t + 10 * kMicro;
    e.result = bytes;
    e.offset = off;
    e.requested = static_cast<std::uint64_t>(bytes);
    p[a].io.push_back(e);
    trace::Event r = e;
    r.kind = trace::Kind::recv;
    r.call = trace::Call::recv;
    r.enter_ns = t + latency - 5 * kMicro;
    r.exit_ns = t + latency;
    p[b].io.push_back(r);
    off += static_cast<std::uint64_t>(bytes);
  }
  std::vector<CaptureInput> input() const { return {{"hand", p}}; }
};

// A two-rank exchange: rank 0 sends two gradients, rank 1 answers each; a long
// compute before each iteration. Iteration 0 is a warm-up with other sizes.
HandCapture ping_pong(int iterations, bool heartbeat) {
  HandCapture c(2);
  const std::uint32_t data = c.connect(0, 40000, 1, 40001);
  const std::uint32_t store = c.connect(1, 40002, 0, 29500);
  const std::uint32_t beat = heartbeat ? c.connect(1, 40003, 0, 40004) : 0;
  c.send(1, 0, store, 0, 64);  // the rendezvous
  c.send(0, 1, store, 20 * kMicro, 32);
  Nanos t = 1 * kMilli;
  for (int k = 0; k < iterations; ++k) {
    const bool warm = k == 0;
    t += 5 * kMilli + (k % 3) * 100 * kMicro;  // forward and backward compute
    c.send(0, 1, data, t, warm ? 300000 : 200000);
    c.send(1, 0, data, t + 300 * kMicro, warm ? 300000 : 200000);
    c.send(0, 1, data, t + 700 * kMicro, 50000);
    c.send(1, 0, data, t + 1000 * kMicro, 50000);
    if (heartbeat && k % 4 == 1) c.send(1, 0, beat, t + 2 * kMilli, 16);
    t += 1200 * kMicro;
  }
  return c;
}

// Two directions: rank 1 -> rank 0 (d0) and rank 0 -> rank 1 (d1), 10 ms
// iterations. Rank 1's first transfer of each iteration (at +1 ms) was cut into
// the iteration before; rank 0 reads it at +1.1 ms, after its own first send of
// the iteration (at +0.5 ms).
struct LateCut {
  CaptureAnalysis a;
  std::vector<build::Direction> dirs{2};
  std::vector<std::vector<std::int64_t>> piece{2};
  std::vector<std::optional<std::int64_t>> shift{0, 0};
  explicit LateCut(Nanos read_after) {
    dirs[0].src = 1, dirs[0].dst = 0;
    dirs[1].src = 0, dirs[1].dst = 1;
    const auto add = [&](std::size_t d, Nanos t, Nanos read, std::int64_t it) {
      Message m;
      m.ready = t, m.sent_app = t + 10 * kMicro, m.recv_last = read;
      dirs[d].messages.push_back(a.messages.size());
      a.messages.push_back(m);
      piece[d].push_back(it);
    };
    for (int k = 0; k < 8; ++k) {
      const Nanos t = k * 10 * kMilli;
      add(1, t + 500 * kMicro, t + 600 * kMicro, k);                    // rank 0's first send of k
      add(0, t + 1 * kMilli, t + 1 * kMilli + read_after, k == 0 ? 0 : k - 1);  // cut one late
      add(0, t + 6 * kMilli, t + 6 * kMilli + 100 * kMicro, k);
    }
  }
};

TEST(IterationCuts, ATransferReadAfterItsReceiverWentOnMovesToTheNextIteration) {
  LateCut c(100 * kMicro);
  build::move_late_ends(c.a, c.dirs, {0, 1}, c.shift, c.piece);
  for (std::size_t i = 0; i < c.piece[0].size(); i += 2) {
    EXPECT_EQ(c.piece[0][i], static_cast<std::int64_t>(i / 2)) << "the first transfer of iteration " << i / 2;
  }
  EXPECT_EQ(c.piece[1][3], 3) << "the receiver's own connection is untouched";
}

TEST(IterationCuts, AReceiverThatWaitedForTheTransferKeepsTheCut) {
  // Rank 0 sends first in each iteration 2 ms later, after it read the transfer:
  // it may have waited for it, and the cut stands.
  LateCut c(100 * kMicro);
  for (std::size_t i = 0; i < c.dirs[1].messages.size(); ++i) c.a.messages[c.dirs[1].messages[i]].ready += 2 * kMilli;
  const auto before = c.piece;
  build::move_late_ends(c.a, c.dirs, {0, 1}, c.shift, c.piece);
  EXPECT_EQ(c.piece, before);
}

// One direction, 8 iterations of three messages (32 B, 64 B, 512 KiB) cut by
// position. `late` iterations: their 512 KiB went out after the next
// iteration's 32 B (an MPI rank that sends a large message's data once the
// receiver asked for it), so by position each holds the next one's 32 B and
// the next one holds its 512 KiB: iterations of equal counts with sizes
// swapped, as the cut of the MPI capture in docs/profile-build.md came out.
struct Interleaved {
  CaptureAnalysis a;
  std::vector<build::Direction> dirs{1};
  std::vector<std::vector<std::int64_t>> piece{1};
  std::vector<std::int64_t> truth;  // the iteration each message belongs to
  explicit Interleaved(const std::set<int>& late, Bytes big = 524312) {
    std::uint64_t offset = 0;
    std::vector<std::pair<Bytes, std::int64_t>> stream;  // (bytes, iteration) in stream order
    for (int k = 0; k < 8; ++k) {
      const bool was_late = late.count(k - 1) > 0;
      if (!was_late) stream.push_back({32, k});
      stream.push_back({64, k});
      if (late.count(k)) {
        stream.push_back({32, k + 1});
        stream.push_back({big, k});
      } else {
        stream.push_back({big, k});
      }
    }
    for (std::size_t i = 0; i < stream.size(); ++i) {
      Message m;
      m.begin = offset;
      m.end = offset + static_cast<std::uint64_t>(stream[i].first);
      offset = m.end;
      dirs[0].messages.push_back(a.messages.size());
      a.messages.push_back(m);
      piece[0].push_back(static_cast<std::int64_t>(i / 3));  // by position
      truth.push_back(stream[i].second);
    }
  }
};

TEST(IterationCuts, MessagesInterleavedAcrossACutChangePlaces) {
  Interleaved c({2, 5});
  ASSERT_NE(c.piece[0], c.truth) << "cut by position, iterations 2, 3, 5 and 6 hold the wrong messages";
  build::unswap_boundaries(c.a, c.dirs, {0}, c.piece);
  EXPECT_EQ(c.piece[0], c.truth);
}

TEST(IterationCuts, ACutThatFellOneMessageOffForSeveralIterationsIsMended) {
  // Iterations 2 to 4 each sent their 512 KiB after the next one's 32 B: by
  // position 3 and 4 look usual, but each holds its predecessor's 512 KiB.
  Interleaved c({2, 3, 4});
  ASSERT_NE(c.piece[0], c.truth);
  build::unswap_boundaries(c.a, c.dirs, {0}, c.piece);
  EXPECT_EQ(c.piece[0], c.truth);
}

TEST(IterationCuts, AnIterationThatDiffersOtherwiseKeepsItsCut) {
  // Iteration 4's 64 B message is 72 B: one surplus and one missing size, as in
  // an interleave, but taking the next iteration's 64 B would spoil that one.
  Interleaved c({});
  c.a.messages[c.dirs[0].messages[13]].end += 8;
  const auto before = c.piece;
  build::unswap_boundaries(c.a, c.dirs, {0}, c.piece);
  EXPECT_EQ(c.piece, before);
}

TEST(ProfileBuild, PeriodicTrafficWarmUpDroppedControlLeftOut) {
  const HandCapture c = ping_pong(12, true);
  const BuiltProfile b = build_profile(c.input(), {});
  const BuildReport& r = b.report;
  EXPECT_EQ(r.iteration_source, "periodic traffic");
  ASSERT_EQ(b.profile.ranks.size(), 2u);
  ASSERT_EQ(b.profile.flows.size(), 2u);  // the data connection's two directions
  EXPECT_EQ(b.profile.flows[0].id, "r0-r1");
  EXPECT_EQ(b.profile.flows[1].id, "r1-r0");
  std::map<std::string, int> uses;
  for (const auto& x : r.connections) ++uses[x.use];
  EXPECT_EQ(uses["store"], 2);
  EXPECT_EQ(uses["irregular"], 1);  // the heartbeat
  EXPECT_EQ(uses["data"], 2);
  // The warm-up iteration is found and dropped.
  EXPECT_GE(r.detected, 11);
  EXPECT_GE(r.used, 9);
  ASSERT_FALSE(r.dropped.empty());
  EXPECT_NE(r.dropped.front().find("warm-up"), std::string::npos) << r.dropped.front();
  EXPECT_EQ(b.profile.iterations, static_cast<std::uint64_t>(r.used));
  // Four messages per iteration, each answering the one before.
  EXPECT_EQ(r.messages_per_iteration, 4u);
  std::size_t sends = 0;
  for (const Op& op : b.profile.ops) {
    if (op.type != OpType::send) continue;
    ++sends;
    EXPECT_TRUE(op.bytes == 200000 || op.bytes == 50000) << op.id << " " << op.bytes;
  }
  EXPECT_EQ(sends, 4u);
  // r1's first answer waits for r0's first gradient to arrive.
  const Op& answer = b.profile.ops[b.profile.op_by_id.at("r1-r0.1")];
  const Op& waits = answer.after.size() == 1 && b.profile.ops[answer.after[0].op].type == OpType::compute
                        ? b.profile.ops[answer.after[0].op] : answer;
  ASSERT_EQ(waits.after.size(), 1u) << answer.id;
  EXPECT_TRUE(waits.after[0].recv);
  EXPECT_EQ(b.profile.ops[waits.after[0].op].id, "r0-r1.1");
  // The profile validates, and its observed timings come along.
  const ProfileLoad l = load_profile_text(write_profile_yaml(b.profile), "built.yaml");
  for (const auto& d : l.diagnostics) ADD_FAILURE() << d.str();
  ASSERT_TRUE(b.profile.observed.has_value());
  EXPECT_EQ(b.profile.observed->iterations.size(), b.profile.iterations);
  for (const auto& it : b.profile.observed->iterations) EXPECT_GT(it.duration, 1 * kMilli);
}

TEST(ProfileBuild, ARankWithNothingOfItsOwnInAnIterationHasNoTimeThere) {
  // Rank 2 only talks to the rendezvous store: a rank of the job, with no
  // message in any iteration. Its per-rank time would be 0, which a profile
  // cannot say: the iterations keep their job-wide time alone, and the profile
  // reads back.
  HandCapture c = ping_pong(12, false);
  ProcessTrace t;
  t.pid = 102;
  t.host = "h";
  t.final = true;
  t.env["RANK"] = "2";
  t.env["MASTER_PORT"] = "29500";
  c.p.push_back(t);
  c.offset.resize(3 * 64, 0);
  const std::uint32_t store = c.connect(2, 40010, 0, 29500);
  c.send(2, 0, store, 30 * kMicro, 64);
  c.send(0, 2, store, 40 * kMicro, 32);
  const BuiltProfile b = build_profile(c.input(), {});
  ASSERT_EQ(b.profile.ranks.size(), 3u) << build_report_text(b.report);
  ASSERT_TRUE(b.profile.observed.has_value());
  for (const ObservedIteration& it : b.profile.observed->iterations) {
    EXPECT_TRUE(it.rank_durations.empty());
    EXPECT_GT(it.duration, 0);
  }
  const ProfileLoad l = load_profile_text(write_profile_yaml(b.profile), "built.yaml");
  for (const auto& d : l.diagnostics) ADD_FAILURE() << d.str();
}

TEST(ProfileBuild, ComputeKeepsEachIterationsDurationUnlessTypicalIsAsked) {
  // Each iteration's forward and backward pass takes 5.0, 5.1 or 5.2 ms in turn.
  const HandCapture c = ping_pong(12, false);
  const BuiltProfile b = build_profile(c.input(), {});
  const auto longest = std::max_element(b.profile.ops.begin(), b.profile.ops.end(), [](const Op& x, const Op& y) {
    return x.duration < y.duration;
  });
  ASSERT_TRUE(longest != b.profile.ops.end());
  const Op& pre = *longest;  // the forward and backward pass
  ASSERT_EQ(pre.type, OpType::compute);
  EXPECT_EQ(b.report.dropped.size(), 2u) << "the warm-up, and the first steady iteration whose start is unknown";
  ASSERT_EQ(pre.durations.size(), b.profile.iterations) << write_profile_yaml(b.profile);
  for (std::size_t k = 0; k + 3 < pre.durations.size(); ++k) EXPECT_EQ(pre.durations[k + 3], pre.durations[k]) << k;
  const auto [lo, hi] = std::minmax_element(pre.durations.begin(), pre.durations.end());
  EXPECT_EQ(*hi - *lo, 200 * kMicro);
  for (Nanos d : pre.durations) EXPECT_EQ((d - *lo) % (100 * kMicro), 0) << d;
  EXPECT_EQ(pre.mean_duration(), pre.duration) << "the typical value is their mean";
  // Simulated, each iteration takes its own time: the 200 us spread is kept.
  const SimResult sim = simulate(b.profile, {});
  const auto times = sim.iteration_times();
  const auto [tlo, thi] = std::minmax_element(times.begin() + 1, times.end());
  EXPECT_GE(*thi - *tlo, 190 * kMicro);

  BuildOptions typical;
  typical.per_iteration = false;
  const BuiltProfile t = build_profile(c.input(), typical);
  for (const Op& op : t.profile.ops) {
    EXPECT_TRUE(op.durations.empty()) << op.id;
    EXPECT_TRUE(op.gaps.empty()) << op.id;
  }
  EXPECT_EQ(t.profile.ops[t.profile.op_by_id.at(pre.id)].duration, pre.duration);
  EXPECT_EQ(parse_build_command("tensorwire profile build cap -o x.yaml --typical").options.per_iteration, false);
}

TEST(ProfileBuild, AReadThatCameLateLeavesTheBusyTimeInTheWait) {
  // Rank 1 answers each gradient 300 us after reading it. It reads at once
  // (50 us after the send) except in every fourth iteration, where it was busy
  // and read 1.5 ms late. The receipt is the arrival (plus the connection's
  // wake-up lag, here none), so the answer's wait holds the busy time: the
  // replay's agent, which reads at once, answers as late as the job did.
  HandCapture c(2);
  const std::uint32_t data = c.connect(0, 40000, 1, 40001);
  Nanos t = 1 * kMilli;
  for (int k = 0; k < 14; ++k) {
    t += 5 * kMilli;
    const Nanos read = k % 4 == 2 ? 1550 * kMicro : 50 * kMicro;
    c.send(0, 1, data, t, 200000, read);
    c.send(1, 0, data, t + read + 300 * kMicro, 100000);
    c.send(0, 1, data, t + read + 700 * kMicro, 50000);
    c.send(1, 0, data, t + read + 1000 * kMicro, 50000);
    t += read + 1200 * kMicro;
  }
  const BuiltProfile b = build_profile(c.input(), {});
  const auto it = std::find_if(b.profile.ops.begin(), b.profile.ops.end(), [](const Op& op) {
    return op.type == OpType::send && op.bytes == 100000;
  });
  ASSERT_TRUE(it != b.profile.ops.end());
  const Op& answer = *it;
  ASSERT_EQ(answer.after.size(), 1u) << write_profile_yaml(b.profile);
  const Op& pre = b.profile.ops[answer.after[0].op];
  ASSERT_EQ(pre.type, OpType::compute) << write_profile_yaml(b.profile);
  ASSERT_FALSE(pre.durations.empty());
  const auto [lo, hi] = std::minmax_element(pre.durations.begin(), pre.durations.end());
  EXPECT_NEAR(static_cast<double>(*lo), 300e3, 20e3);
  EXPECT_NEAR(static_cast<double>(*hi), 1800e3, 20e3) << "the 1.5 ms the job was busy before it read";
}

TEST(ProfileBuild, AReaderThatIsAlwaysLateKeepsItsLagInTheFlow) {
  // An MPI-like exchange: rank 1 waits in a blocking receive and reads at once;
  // rank 0 reads only inside its next call, about 500 us after each arrival
  // (one read in 14 iterations came at once). Its next send follows its read
  // by 200 us. The 1->0 flow gets that lag, and a simulation of the profile
  // takes as long as the job; without the lag each of the two late hops comes
  // about 460 us early.
  HandCapture c(2);
  const std::uint32_t data = c.connect(0, 40000, 1, 40001);
  Nanos t = 1 * kMilli;
  std::vector<Nanos> observed;
  for (int k = 0; k < 14; ++k) {
    const Nanos start = t;
    t += 5 * kMilli;  // rank 0's forward and backward pass
    const Nanos late = k == 5 ? 40 * kMicro : (500 + 20 * (k % 3)) * kMicro;
    c.send(0, 1, data, t, 20000, 40 * kMicro);
    c.send(1, 0, data, t + 140 * kMicro, 20000, late);
    t += 140 * kMicro + late + 200 * kMicro;
    c.send(0, 1, data, t, 20000, 40 * kMicro);
    c.send(1, 0, data, t + 140 * kMicro, 20000, late);
    t += 140 * kMicro + late + 100 * kMicro;
    observed.push_back(t - start);
  }
  const BuiltProfile b = build_profile(c.input(), {});
  const Profile& p = b.profile;
  ASSERT_EQ(p.flows.size(), 2u) << write_profile_yaml(p);
  const Flow& to0 = p.flows[p.flows[0].dst == 0 ? 0 : 1];
  const Flow& to1 = p.flows[p.flows[0].dst == 0 ? 1 : 0];
  EXPECT_NEAR(static_cast<double>(to0.read_lag), 460e3, 25e3) << write_profile_yaml(p);
  EXPECT_EQ(to1.read_lag, 0) << "rank 1 read at once";
  ASSERT_EQ(b.report.read_lags.size(), 1u);
  EXPECT_EQ(b.report.read_lags[0].first, to0.id);
  EXPECT_NE(build_report_text(b.report).find("read late: the receiver read no sooner than this after arrival"), std::string::npos);
  const auto median = [](std::vector<Nanos> v) {
    std::sort(v.begin(), v.end());
    return static_cast<double>(v[v.size() / 2]);
  };
  SimOptions fast;
  fast.link_bps = 100e9;  // the hand-made capture's transfers take no time
  const double with_lag = median(simulate(p, fast).iteration_times());
  EXPECT_NEAR(with_lag, median(observed), 0.03 * median(observed));
  Profile without = p;
  for (Flow& f : without.flows) f.read_lag = 0;
  const double no_lag = median(simulate(without, fast).iteration_times());
  EXPECT_NEAR(with_lag - no_lag, 2 * 460e3, 60e3) << "two late reads per iteration";
}

TEST(ProfileBuild, NotificationsThatRecurTwiceAnIterationArePlacedByTime) {
  // Each iteration two phases, each 2 ms of compute then an exchange: rank 0
  // sends four 100 kB then four 60 kB transfers, rank 1 answers with four 90 kB
  // then four 70 kB; in each phase rank 1 also sends four 48-byte
  // notifications on a connection of their own, 200 us apart. The
  // notifications alone recur every half iteration, as long as half the
  // iteration found on the data; cut there, they would count each iteration
  // twice.
  HandCapture c(2);
  const std::uint32_t data = c.connect(0, 40000, 1, 40001);
  const std::uint32_t notes = c.connect(1, 40002, 0, 40003);
  Nanos t = 1 * kMilli;
  for (int k = 0; k < 14; ++k) {
    for (int phase = 0; phase < 2; ++phase) {
      t += 2 * kMilli;  // computing
      for (int i = 0; i < 4; ++i) c.send(1, 0, notes, t + i * 200 * kMicro, 48);
      for (int i = 0; i < 4; ++i) c.send(0, 1, data, t + 100 * kMicro + i * 200 * kMicro, phase == 0 ? 100000 : 60000);
      for (int i = 0; i < 4; ++i) c.send(1, 0, data, t + 1000 * kMicro + i * 200 * kMicro, phase == 0 ? 90000 : 70000);
      t += 2500 * kMicro;
    }
  }
  const BuiltProfile b = build_profile(c.input(), {});
  const Profile& p = b.profile;
  EXPECT_GE(b.report.used, 10) << build_report_text(b.report);
  std::map<FlowIndex, std::size_t> sends;
  for (const Op& op : p.ops) {
    if (op.type == OpType::send) ++sends[op.flow];
  }
  ASSERT_EQ(p.flows.size(), 3u) << build_report_text(b.report);
  for (FlowIndex f = 0; f < 3; ++f) EXPECT_EQ(sends[f], 8u) << p.flows[f].id << "\n" << build_report_text(b.report);
}

// answer: rank 1's transfer size. At 80 kB rank 0's direction carries the
// most bytes; at 81 kB rank 1's, the halved one.
void halves_are_joined(std::int64_t answer_bytes) {
  // Each iteration two phases after compute (4 ms, then 3 ms between them, as
  // DDP's two buckets): four rounds in which rank 0 sends (100 kB in the first
  // phase, 60 kB in the second) and rank 1 answers 80 kB. Rank 1's stream is
  // alike in both phases, so it recurs every half iteration, with the compute
  // before each half; cut there, it was left out as irregular (one rank's whole
  // traffic). Joined two at a time, at the iteration's start, it stays.
  HandCapture c(2);
  const std::uint32_t data = c.connect(0, 40000, 1, 40001);
  Nanos t = 1 * kMilli;
  for (int k = 0; k < 14; ++k) {
    for (int phase = 0; phase < 2; ++phase) {
      t += (phase == 0 ? 4000 : 3000) * kMicro + (k % 3) * 100 * kMicro;
      for (int r = 0; r < 4; ++r) {
        c.send(0, 1, data, t + r * 300 * kMicro, phase == 0 ? 100000 : 60000);
        c.send(1, 0, data, t + r * 300 * kMicro + 150 * kMicro, answer_bytes);
      }
      t += 1200 * kMicro;
    }
  }
  const BuiltProfile b = build_profile(c.input(), {});
  const Profile& p = b.profile;
  EXPECT_GE(b.report.used, 10) << build_report_text(b.report);
  ASSERT_EQ(p.flows.size(), 2u) << build_report_text(b.report);
  std::map<FlowIndex, std::vector<const Op*>> sends;
  for (const Op& op : p.ops) {
    if (op.type == OpType::send) sends[op.flow].push_back(&op);
  }
  for (FlowIndex f = 0; f < 2; ++f) ASSERT_EQ(sends[f].size(), 8u) << p.flows[f].id << "\n" << write_profile_yaml(p);
  // Joined at the iteration's start: rank 1's transfers are four answers to
  // 100 kB, then four to 60 kB. Joined at the second phase, its iteration would
  // begin with the answers to 60 kB.
  const FlowIndex back = p.flows[0].src == 1 ? 0 : 1, forth = 1 - back;
  for (std::size_t i = 0; i < 8; ++i) {
    const Op& answer = *sends[back][i];
    const Op& asked = *sends[forth][i];
    EXPECT_EQ(asked.bytes, i < 4 ? 100000 : 60000) << write_profile_yaml(p);
    // The answer waits for the receipt, itself or through the compute before it.
    const Dependency receipt{static_cast<OpIndex>(&asked - p.ops.data()), true, 0};
    std::vector<Dependency> waits = answer.after;
    for (const Dependency& d : answer.after) {
      if (p.ops[d.op].type == OpType::compute) waits.insert(waits.end(), p.ops[d.op].after.begin(), p.ops[d.op].after.end());
    }
    EXPECT_NE(std::find(waits.begin(), waits.end(), receipt), waits.end())
        << answer.id << " answers " << asked.id << "\n" << write_profile_yaml(p);
  }
}

TEST(ProfileBuild, AConnectionCutIntoHalvesOfTheIterationIsJoinedBackAtItsStart) { halves_are_joined(80000); }
TEST(ProfileBuild, AHalvedConnectionThatCarriesTheMostBytesIsJoinedBackToo) { halves_are_joined(81000); }

TEST(ProfileBuild, ARankThatBeginsItsIterationsBeforeThePreviousOnesArrivedIsSaid) {
  const auto early_warnings = [](const BuiltProfile& b) {
    return std::count_if(b.report.warnings.begin(), b.report.warnings.end(), [](const std::string& w) {
      return w.find("while messages of the one before were still arriving") != std::string::npos;
    });
  };
  // Rank 1 answers after rank 0's transfers arrived: nothing to say.
  EXPECT_EQ(early_warnings(build_profile(ping_pong(12, false).input(), {})), 0) << build_report_text(build_profile(ping_pong(12, false).input(), {}).report);
  // Rank 0's transfers take 3.1 ms to arrive, in 2 ms iterations: whichever
  // way the two ranks' iterations are numbered alike, one of them begins each
  // iteration before the other's transfers of the one before have arrived.
  HandCapture c(2);
  const std::uint32_t data = c.connect(0, 40000, 1, 40001);
  Nanos t = 1 * kMilli;
  for (int k = 0; k < 14; ++k) {
    c.send(0, 1, data, t, 100000, 3000 * kMicro);
    c.send(0, 1, data, t + 100 * kMicro, 50000, 3000 * kMicro);
    c.send(1, 0, data, t + 1000 * kMicro, 80000);
    c.send(1, 0, data, t + 1100 * kMicro, 40000);
    t += 2000 * kMicro + (k % 3) * 50 * kMicro;
  }
  const BuiltProfile b = build_profile(c.input(), {});
  EXPECT_EQ(early_warnings(b), 1) << build_report_text(b.report);
}

TEST(ProfileBuild, AnIterationStartsAfterTheWaitThatIsLongEveryTimeNotOnce) {
  // Each iteration: 4 ms of compute, then rank 0 sends A and B, waits 1 ms for
  // rank 1 (which answers B), then sends C and D (answered too). Once, in the
  // second half, the wait before C took 6 ms: the idlest single gap. The
  // iteration still starts at A, after the compute that is long every time.
  HandCapture c(2);
  const std::uint32_t data = c.connect(0, 40000, 1, 40001);
  Nanos t = 1 * kMilli;
  for (int k = 0; k < 14; ++k) {
    t += 4 * kMilli;
    c.send(0, 1, data, t, 30000);
    c.send(0, 1, data, t + 100 * kMicro, 20000);
    c.send(1, 0, data, t + 200 * kMicro, 5000);
    t += (k == 11 ? 6000 : 1000) * kMicro;
    c.send(0, 1, data, t, 12000);
    c.send(0, 1, data, t + 100 * kMicro, 40000);
    c.send(1, 0, data, t + 200 * kMicro, 6000);
    t += 300 * kMicro;
  }
  const BuiltProfile b = build_profile(c.input(), {});
  const Profile& p = b.profile;
  const auto longest = std::max_element(p.ops.begin(), p.ops.end(), [](const Op& x, const Op& y) {
    return x.mean_duration() < y.mean_duration();
  });
  ASSERT_TRUE(longest != p.ops.end());
  ASSERT_EQ(longest->type, OpType::compute) << write_profile_yaml(p);
  EXPECT_NEAR(static_cast<double>(longest->duration), 4e6, 0.2e6) << write_profile_yaml(p);
  EXPECT_TRUE(longest->after.empty()) << "the compute begins the iteration\n" << write_profile_yaml(p);
}

TEST(ProfileBuild, KeepControlKeepsTheConnectionsLeftOut) {
  const HandCapture c = ping_pong(12, true);
  BuildOptions o;
  o.keep_control = true;
  const BuiltProfile b = build_profile(c.input(), o);
  EXPECT_GT(b.profile.flows.size(), 2u);
}

TEST(ProfileBuild, IterationRangeIsHonouredAndCheckedAgainstWhatWasFound) {
  const HandCapture c = ping_pong(12, false);
  BuildOptions o;
  o.iterations = std::make_pair(std::int64_t{3}, std::int64_t{6});
  const BuiltProfile b = build_profile(c.input(), o);
  EXPECT_EQ(b.profile.iterations, 3u);
  EXPECT_EQ(b.report.first_used, 3);
  o.iterations = std::make_pair(std::int64_t{500}, std::int64_t{600});
  EXPECT_THROW(build_profile(c.input(), o), std::runtime_error);
}

TEST(ProfileBuild, AnnotatedIterationsAreUsed) {
  HandCapture c = ping_pong(10, false);
  Nanos t = 1 * kMilli;
  for (int k = 0; k < 10; ++k) {
    t += 5 * kMilli + (k % 3) * 100 * kMicro;
    for (auto& p : c.p) {
      trace::MarkEvent m{};
      m.kind = trace::Kind::mark;
      m.type = trace::MarkType::iteration;
      m.tid = 1;
      m.value = 100 + k;  // the job's own numbers
      m.phase = 'B';
      m.at_ns = t - 4 * kMilli;
      p.marks.push_back(m);
      m.phase = 'E';
      m.at_ns = t + 1100 * kMicro;
      p.marks.push_back(m);
    }
    t += 1200 * kMicro;
  }
  const BuiltProfile b = build_profile(c.input(), {});
  EXPECT_EQ(b.report.iteration_source, "annotations");
  EXPECT_EQ(b.report.detected, 10);
  EXPECT_EQ(b.report.first_used, 101);  // 100 was the warm-up
  EXPECT_EQ(b.report.used, 9);
}

TEST(ProfileBuild, RefusesWhatIsNotAJob) {
  HandCapture one(1);
  EXPECT_THROW(build_profile(one.input(), {}), std::runtime_error);
  EXPECT_THROW(build_profile({{"empty", {}}}, {}), std::runtime_error);
  // Two ranks that exchange a few unrelated messages: no iteration.
  HandCapture c(2);
  const std::uint32_t id = c.connect(0, 40000, 1, 40001);
  c.send(0, 1, id, 1000, 100);
  c.send(1, 0, id, 900000, 7000);
  c.send(0, 1, id, 3000000, 12345);
  try {
    build_profile(c.input(), {});
    ADD_FAILURE() << "built a profile from no iterations";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("annotate"), std::string::npos) << e.what();
  }
}

TEST(ProfileBuild, RanksWithoutTheEnvironmentComeFromTheTraffic) {
  HandCapture c = ping_pong(12, false);
  for (auto& p : c.p) p.env.clear();
  const BuiltProfile b = build_profile(c.input(), {});
  ASSERT_EQ(b.report.ranks.size(), 2u);
  EXPECT_EQ(b.report.ranks[0].how, "traffic");
  EXPECT_EQ(b.report.ranks[0].pid, 100);
}

// A rank variable that holds no rank is said, not dropped unsaid (the report
// said only how many ranks it found).
TEST(ProfileBuild, ARankVariableThatHoldsNoRankIsSaid) {
  HandCapture c = ping_pong(12, false);
  c.p[1].env["RANK"] = "70000";
  const BuiltProfile b = build_profile(c.input(), {});
  ASSERT_EQ(b.report.ranks.size(), 2u);
  const auto& w = b.report.warnings;
  EXPECT_NE(std::find(w.begin(), w.end(), "pid 101: RANK=70000 is no rank number (0 to 65535): ranked by host and pid after the numbered ones"), w.end())
      << ::testing::PrintToString(w);
}

TEST(ProfileBuild, ParametersServerRoleFromTheTraffic) {
  // Rank 0 exchanges with 1, 2 and 3; they never with each other.
  HandCapture c(4);
  std::uint32_t id[4] = {0, 0, 0, 0};
  for (int w = 1; w < 4; ++w) id[w] = c.connect(w, static_cast<std::uint16_t>(41000 + w), 0, 40000);
  Nanos t = 0;
  for (int k = 0; k < 10; ++k) {
    t += 4 * kMilli;
    for (int w = 1; w < 4; ++w) c.send(w, 0, id[w], t + w * 10 * kMicro, 100000);
    for (int w = 1; w < 4; ++w) c.send(0, w, id[w], t + 500 * kMicro + w * 10 * kMicro, 100000);
    t += 1 * kMilli;
  }
  const BuiltProfile b = build_profile(c.input(), {});
  ASSERT_EQ(b.profile.ranks.size(), 4u);
  EXPECT_EQ(b.profile.ranks[0].role, Role::server);
  for (int w = 1; w < 4; ++w) EXPECT_EQ(b.profile.ranks[static_cast<std::size_t>(w)].role, Role::worker);
}

TEST(ProfileBuild, BuildCommandIsReadBackFromTheGenerator) {
  const BuildCommand c = parse_build_command("tensorwire profile build a b -o x.yaml --iterations 2:9 --keep-control");
  EXPECT_EQ(c.dirs, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(c.options.iterations.has_value());
  EXPECT_EQ(c.options.iterations->first, 2);
  EXPECT_EQ(c.options.iterations->second, 9);
  EXPECT_TRUE(c.options.keep_control);
  EXPECT_TRUE(parse_build_command("tensorwire profile synth --model m").dirs.empty());
  EXPECT_TRUE(parse_build_command("tensorwire profile build a --iterations x:y").dirs.empty());
}

}  // namespace
}  // namespace tw

namespace tw {
namespace {

TEST(ProfileBuild, HostClocksAlignedFromTheTrafficWithTheirUncertainty) {
  // Rank 1 on host "b", whose clock runs 5 ms ahead; 40 us one way. Its times are
  // written as b's clock reads them.
  HandCapture c = ping_pong(12, false);
  const BuiltProfile one_clock = build_profile(c.input(), {});
  c.p[1].host = "b";
  constexpr Nanos kAhead = 5 * kMilli;
  for (auto& e : c.p[1].io) e.enter_ns += kAhead, e.exit_ns += kAhead;
  const BuiltProfile b = build_profile(c.input(), {});
  ASSERT_EQ(b.report.clocks.size(), 2u);
  EXPECT_EQ(b.report.clocks[0].host, "h");
  EXPECT_EQ(b.report.clocks[0].offset, 0);
  const auto& other = b.report.clocks[1];
  EXPECT_EQ(other.host, "b");
  ASSERT_GE(other.uncertainty, 0);
  // The truth lies within the bound printed, and the bound is one latency wide.
  EXPECT_LE(std::llabs(other.offset - kAhead), other.uncertainty);
  EXPECT_LE(other.uncertainty, 60 * kMicro);
  // The profile does not see the skew: iteration times as on one clock, to within the bound.
  ASSERT_EQ(b.profile.observed->iterations.size(), one_clock.profile.observed->iterations.size());
  for (std::size_t k = 0; k < b.profile.observed->iterations.size(); ++k) {
    EXPECT_LE(std::llabs(b.profile.observed->iterations[k].duration - one_clock.profile.observed->iterations[k].duration),
              2 * other.uncertainty);
  }
}

}  // namespace
}  // namespace tw

#include "inline_profile.hpp"
#include "tensorwire/analysis/timeline.hpp"

namespace tw {
namespace {

TEST(ObservedTimeline, FlowRatesFromTheObservedMessages) {
  // Two 1 MB messages on one flow per iteration, each in flight 1 ms, one after
  // the other: 2 MB per 2 ms of busy time, 8 Gb/s; the overlap of the second
  // iteration's two messages counts once.
  const Profile p = test::inline_profile(R"(
version: 1
iterations: 2
ranks: [{id: 0}, {id: 1}]
flows: [{id: f, src: 0, dst: 1}]
ops:
  - {id: a, type: send, flow: f, bytes: 1000000}
  - {id: b, type: send, flow: f, bytes: 1000000}
observed:
  iterations: [5ms, 5ms]
  ops:
    - {op: a, iteration: 0, start: 0, end: 1ms}
    - {op: b, iteration: 0, start: 1ms, end: 2ms}
    - {op: a, iteration: 1, start: 0, end: 1ms}
    - {op: b, iteration: 1, start: 500us, end: 1ms}
)");
  const Timeline t = timeline_from_observed(p);
  ASSERT_EQ(t.flow_bytes.size(), 1u);
  EXPECT_EQ(t.flow_bytes[0], 4000000u);
  EXPECT_EQ(t.flow_busy[0], 3 * kMilli);
  EXPECT_NEAR(flow_rate_bps(t, 0), 4e6 * 8 / 3e-3, 1e3);
}

// A real capture (tests/unit/captures/README.md): PyTorch DDP on four hosts,
// whose Gloo notifications were once cut into 21 pieces and numbered as the
// job's iterations, so that only 1 of its 20 iterations was kept as steady.
TEST(ProfileBuild, ARealDdpCaptureKeepsItsSteadyIterations) {
  TempDir d("tw-ddp-capture");
  const std::string archive = std::string(TW_SOURCE_DIR) + "/tests/unit/captures/ddp-mlp-4hosts-slow.tar.gz";
  ASSERT_EQ(std::system(("tar -xzf '" + archive + "' -C '" + d.path() + "'").c_str()), 0);
  std::vector<std::string> dirs;
  for (int h = 0; h < 4; ++h) dirs.push_back(d.path() + "/ddp-mlp-4hosts-slow/h" + std::to_string(h));
  const BuiltProfile b = build_profile(read_captures(dirs), {});
  EXPECT_EQ(b.report.detected, 20) << build_report_text(b.report);
  // Every iteration but the first and the last (18) is steady; 16 leaves room
  // for a change in how the ends are told from the rest.
  EXPECT_GE(b.report.used, 16) << build_report_text(b.report);
  EXPECT_EQ(b.profile.ranks.size(), 4u);
}

}  // namespace
}  // namespace tw
