#include "tensorwire/analysis/run_check.hpp"

#include <gtest/gtest.h>

#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/frame.hpp"

namespace tw {
namespace {

// Records as agents would write them, made from a simulated run.
std::vector<std::vector<Record>> records_of(const Profile& p, const SimResult& sim) {
  std::vector<std::vector<Record>> out(p.ranks.size());
  for (const SimOpTiming& t : sim.ops) {
    const Op& op = p.ops[t.op];
    if (op.type == OpType::compute) {
      ComputeRecord c;
      c.rank = static_cast<std::uint16_t>(op.rank);
      c.op = t.op;
      c.iteration = t.iteration;
      c.planned = t.planned;
      c.start = t.start;
      c.end = t.end;
      out[op.rank].push_back(c);
      continue;
    }
    SendRecord r;
    r.rank = static_cast<std::uint16_t>(op.rank);
    r.op = t.op;
    r.iteration = t.iteration;
    r.flow = op.flow;
    r.bytes = frame::wire_bytes(op.bytes);
    r.planned = t.planned;
    r.ready = t.start;
    r.sent_app = t.end;
    out[op.rank].push_back(r);
    ReceiveRecord rx;
    rx.rank = static_cast<std::uint16_t>(p.flows[op.flow].dst);
    rx.op = t.op;
    rx.iteration = t.iteration;
    rx.flow = op.flow;
    rx.bytes = r.bytes;
    rx.recv_first = t.start;
    rx.recv_last = t.received;
    rx.delivered = t.received;
    out[rx.rank].push_back(rx);
  }
  return out;
}

class RunCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ProfileLoad l = load_profile_file(std::string(TW_SOURCE_DIR) + "/traffic_profiles/mlp-ring-2.yaml");
    ASSERT_TRUE(l.ok());
    p_ = std::move(*l.profile);
    p_.iterations = 2;
    records_ = records_of(p_, simulate(p_, {}));
  }
  Profile p_;
  std::vector<std::vector<Record>> records_;
};

TEST_F(RunCheckTest, ASoundRunPasses) {
  const RunCheck c = check_run(p_, records_, {});
  EXPECT_TRUE(c.problems.empty()) << (c.problems.empty() ? "" : c.problems.front());
  EXPECT_EQ(c.messages, 2 * 52U);
  EXPECT_GT(c.dependencies_checked, 0U);
}

TEST_F(RunCheckTest, FindsALostMessage) {
  auto& rank1 = records_[1];
  const auto it = std::find_if(rank1.begin(), rank1.end(), [](const Record& r) { return r.is(RecordKind::receive); });
  const ReceiveRecord lost = it->as<ReceiveRecord>();
  const std::string id = p_.ops[lost.op].id + " of iteration " + std::to_string(lost.iteration);
  rank1.erase(it);
  const RunCheck c = check_run(p_, records_, {});
  ASSERT_EQ(c.problems.size(), 1U);
  EXPECT_EQ(c.problems[0], id + " was sent but never received");
}

TEST_F(RunCheckTest, FindsAShortMessage) {
  for (Record& r : records_[0]) {
    if (r.is(RecordKind::send)) {
      r.update<SendRecord>([](SendRecord& s) { s.bytes -= 1; });
      break;
    }
  }
  const RunCheck c = check_run(p_, records_, {});
  ASSERT_EQ(c.problems.size(), 1U);
  EXPECT_NE(c.problems[0].find("bytes sent"), std::string::npos);
}

TEST_F(RunCheckTest, FindsAnOpThatStartedTooEarly) {
  // Make one send that waits for a receipt go before anything happened.
  std::string op_id, dep_id;
  for (Record& r : records_[0]) {
    if (!r.is(RecordKind::send)) continue;
    const SendRecord s = r.as<SendRecord>();
    const Op& op = p_.ops[s.op];
    if (s.iteration == 1 && op.after.size() == 1 && op.after[0].recv) {
      r.update<SendRecord>([](SendRecord& x) { x.ready = 0; });
      op_id = op.id;
      dep_id = p_.ops[op.after[0].op].id;
      break;
    }
  }
  ASSERT_FALSE(op_id.empty());
  const RunCheck c = check_run(p_, records_, {});
  ASSERT_EQ(c.problems.size(), 1U);
  EXPECT_NE(c.problems[0].find(op_id + " of iteration 1 started"), std::string::npos) << c.problems[0];
  EXPECT_NE(c.problems[0].find("recv:" + dep_id), std::string::npos) << c.problems[0];
}

TEST_F(RunCheckTest, AnOwnRankDependencyMayLeadByTheTimerLeadOfAgentsThatDoNotSpin) {
  // A compute that follows its own rank's op, moved 100 us earlier than it
  // allows: an error, unless the agents set their timers early (no spinning).
  std::string op_id;
  for (Record& r : records_[0]) {
    if (!r.is(RecordKind::compute)) continue;
    const ComputeRecord x = r.as<ComputeRecord>();
    const Op& op = p_.ops[x.op];
    if (x.iteration == 1 && !op.after.empty() && !op.after[0].recv) {
      r.update<ComputeRecord>([](ComputeRecord& c) { c.start -= 100 * kMicro; });
      op_id = op.id;
      break;
    }
  }
  ASSERT_FALSE(op_id.empty());
  const RunCheck strict = check_run(p_, records_, {});
  ASSERT_EQ(strict.problems.size(), 1U);
  EXPECT_NE(strict.problems[0].find(op_id + " of iteration 1 started 100.00 us before"), std::string::npos) << strict.problems[0];
  RunCheckOptions o;
  o.own_rank_tolerance = kMaxTimerLead;
  EXPECT_TRUE(check_run(p_, records_, o).problems.empty());
}

}  // namespace
}  // namespace tw
