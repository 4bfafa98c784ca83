#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "tensorwire/core/profile_io.hpp"

namespace tw {
namespace {

// A valid two-rank profile; tests replace one line of it at a time.
const char* const kBase =
    "version: 1\n"                                                              // 1
    "iterations: 2\n"                                                           // 2
    "ranks:\n"                                                                  // 3
    "  - {id: 0}\n"                                                             // 4
    "  - {id: 1, host: b, role: server}\n"                                      // 5
    "flows:\n"                                                                  // 6
    "  - {id: f01, src: 0, dst: 1}\n"                                           // 7
    "  - {id: f10, src: 1, dst: 0}\n"                                           // 8
    "ops:\n"                                                                    // 9
    "  - {id: c0, type: compute, rank: 0, duration: 1ms}\n"                     // 10
    "  - {id: s0, type: send, flow: f01, bytes: 1MiB, after: [c0]}\n"           // 11
    "  - {id: c1, type: compute, rank: 1, duration: 1ms, after: [recv:s0]}\n"   // 12
    "  - {id: s1, type: send, flow: f10, bytes: 4KiB, after: [c1]}\n";          // 13

std::string with_line(int line, const std::string& replacement) {
  std::string text = kBase;
  std::size_t pos = 0;
  for (int i = 1; i < line; ++i) pos = text.find('\n', pos) + 1;
  const std::size_t end = text.find('\n', pos);
  return text.replace(pos, end - pos, replacement);
}

std::string problems(const std::string& text) {
  const ProfileLoad load = load_profile_text(text, "t.yaml");
  std::string out;
  for (const auto& d : load.diagnostics) out += d.str() + "\n";
  EXPECT_EQ(load.ok(), load.diagnostics.empty());
  return out;
}

TEST(ProfileLoad, AcceptsTheBaseProfile) {
  const ProfileLoad load = load_profile_text(kBase, "t.yaml");
  ASSERT_TRUE(load.ok()) << problems(kBase);
  const Profile& p = *load.profile;
  EXPECT_EQ(p.iterations, 2U);
  ASSERT_EQ(p.ranks.size(), 2U);
  EXPECT_EQ(p.ranks[1].host, "b");
  EXPECT_EQ(p.ranks[1].role, Role::server);
  ASSERT_EQ(p.ops.size(), 4U);
  EXPECT_EQ(p.ops[1].bytes, kMiB);
  EXPECT_EQ(p.ops[1].rank, 0U);
  EXPECT_EQ(p.ops[3].rank, 1U);
  ASSERT_EQ(p.ops[2].after.size(), 1U);
  EXPECT_TRUE(p.ops[2].after[0].recv);
  EXPECT_EQ(p.ops[2].after[0].op, 1U);
}

TEST(ProfileLoad, RejectsUnknownReferences) {
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 5, duration: 1ms}")),
            "t.yaml:10:35: op 'c0': 'rank' is 5, but the profile has 2 ranks\n");
  EXPECT_EQ(problems(with_line(11, "  - {id: s0, type: send, flow: f02, bytes: 1MiB, after: [c0]}")),
            "t.yaml:11:32: op 's0' sends on unknown flow 'f02' (did you mean 'f01'?)\n");
  EXPECT_EQ(problems(with_line(11, "  - {id: s0, type: send, flow: f01, bytes: 1MiB, after: [c9]}")),
            "t.yaml:11:58: op 's0' depends on unknown op 'c9' (did you mean 'c0'?)\n");
  EXPECT_EQ(problems(with_line(7, "  - {id: f01, src: 0, dst: 7}")),
            "t.yaml:7:28: flow 'f01': 'dst' names rank 7, but the profile has 2 ranks\n");  // its op s0 is not reported again
}

TEST(ProfileLoad, RejectsDuplicateIds) {
  EXPECT_EQ(problems(with_line(12, "  - {id: c0, type: compute, rank: 1, duration: 1ms, after: [recv:s0]}")),
            "t.yaml:12:10: op id 'c0' is used twice (first at line 10)\n"
            "t.yaml:13:58: op 's1' depends on unknown op 'c1' (did you mean 'c0'?)\n");
  EXPECT_EQ(problems(with_line(8, "  - {id: f01, src: 1, dst: 0}")),
            "t.yaml:8:10: flow id 'f01' is used twice\n"
            "t.yaml:13:32: op 's1' sends on unknown flow 'f10' (did you mean 'f01'?)\n");
  EXPECT_EQ(problems(with_line(5, "  - {id: 0}")),
            "t.yaml:5:10: rank id 0 is listed twice\n");
}

TEST(ProfileLoad, RejectsBadSizesAndDurations) {
  const auto send_bytes = [](const std::string& b) {
    return problems(with_line(11, "  - {id: s0, type: send, flow: f01, bytes: " + b + ", after: [c0]}"));
  };
  EXPECT_EQ(send_bytes("0"), "t.yaml:11:44: op 's0': 'bytes' must be positive, got 0\n");
  EXPECT_EQ(send_bytes("-5"), "t.yaml:11:44: op 's0': 'bytes' must be positive, got -5\n");
  EXPECT_EQ(send_bytes("100TiB"), "t.yaml:11:44: op 's0': 'bytes' is 100TiB, more than the limit of 64.00 GiB\n");
  EXPECT_EQ(send_bytes("lots"),
            "t.yaml:11:44: op 's0': 'bytes' must be a whole number of bytes like 1048576 or 4MiB, got 'lots'\n");
  const auto duration = [](const std::string& d) {
    return problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: " + d + "}"));
  };
  EXPECT_EQ(duration("0"), "t.yaml:10:48: op 'c0': 'duration' must be positive, got 0\n");
  EXPECT_EQ(duration("-1ms"), "t.yaml:10:48: op 'c0': 'duration' must be positive, got -1ms\n");
  EXPECT_EQ(duration("5000s"), "t.yaml:10:48: op 'c0': 'duration' is 5000s, more than the limit of 3600.000 s\n");
  EXPECT_EQ(duration("2h"), "t.yaml:10:48: op 'c0': 'duration' must be a duration like 1.5ms or 250us, got '2h'\n");
  EXPECT_EQ(problems(with_line(2, "iterations: 0")), "t.yaml:2:13: the profile: 'iterations' must be at least 1, got 0\n");
}

TEST(ProfileLoad, ReadsAFlowsReadLagAndChecksIt) {
  const ProfileLoad l = load_profile_text(with_line(7, "  - {id: f01, src: 0, dst: 1, read_lag: 480us}"), "t.yaml");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l.profile->flows[0].read_lag, 480 * kMicro);
  EXPECT_EQ(l.profile->flows[1].read_lag, 0) << "none given: read at once";
  EXPECT_EQ(problems(with_line(7, "  - {id: f01, src: 0, dst: 1, read_lag: -1us}")),
            "t.yaml:7:41: flow 'f01': 'read_lag' must be zero or more, got -1us\n");
  EXPECT_EQ(problems(with_line(7, "  - {id: f01, src: 0, dst: 1, read_lag: soon}")),
            "t.yaml:7:41: flow 'f01': 'read_lag' must be a duration like 1.5ms or 250us, got 'soon'\n");
  EXPECT_EQ(problems(with_line(7, "  - {id: f01, src: 0, dst: 1, read_lag: 2h}")),
            "t.yaml:7:41: flow 'f01': 'read_lag' must be a duration like 1.5ms or 250us, got '2h'\n");
}

TEST(ProfileLoad, ReadsASendsPriorityAndChecksIt) {
  const ProfileLoad l = load_profile_text(with_line(11, "  - {id: s0, type: send, flow: f01, bytes: 1MiB, priority: 7, after: [c0]}"), "t.yaml");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l.profile->ops[1].priority, 7U);
  EXPECT_EQ(l.profile->ops[3].priority, 0U) << "none given: 0";
  const std::string written = write_profile_yaml(*l.profile);
  EXPECT_NE(written.find("priority: 7"), std::string::npos);
  const ProfileLoad again = load_profile_text(written, "again.yaml");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.profile->ops[1].priority, 7U);
  EXPECT_EQ(problems(with_line(11, "  - {id: s0, type: send, flow: f01, bytes: 1MiB, priority: -1, after: [c0]}")),
            "t.yaml:11:60: op 's0': 'priority' must be at least 0, got -1\n");
  EXPECT_EQ(problems(with_line(11, "  - {id: s0, type: send, flow: f01, bytes: 1MiB, priority: 5000000000, after: [c0]}")),
            "t.yaml:11:60: op 's0': 'priority' is 5000000000, more than the limit of 1000000000\n");
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, priority: 1}")),
            "t.yaml:10:63: op 'c0': field 'priority' does not apply to a compute op\n");
}

TEST(ProfileLoad, ReadsPerIterationDurationsAndGapsAndChecksThem) {
  std::string text = with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, durations: [1ms, 3ms, 2ms]}");
  text = text.replace(text.find("iterations: 2"), 13, "iterations: 4");  // a list is at most one per iteration
  text = text.replace(text.find("bytes: 1MiB, after"), 18, "bytes: 1MiB, gap: 5us, gaps: [0, 10us], after");
  const ProfileLoad both = load_profile_text(text, "t.yaml");
  ASSERT_TRUE(both.ok()) << problems(text);
  const Op& c = both.profile->ops[0];
  EXPECT_EQ(c.durations, (std::vector<Nanos>{kMilli, 3 * kMilli, 2 * kMilli}));
  EXPECT_EQ(c.duration_in(1), 3 * kMilli);
  EXPECT_EQ(c.duration_in(4), 3 * kMilli) << "iterations beyond the list wrap around";
  EXPECT_EQ(c.mean_duration(), 2 * kMilli);
  const Op& s = both.profile->ops[1];
  EXPECT_EQ(s.gap_in(0), 0);
  EXPECT_EQ(s.gap_in(1), 10 * kMicro);
  EXPECT_EQ(s.mean_gap(), 5 * kMicro);
  EXPECT_EQ(both.profile->ops[2].duration_in(7), kMilli) << "without a list, the duration";

  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, durations: [1ms, 0]}")),
            "t.yaml:10:70: op 'c0': 'durations' must be positive, got 0\n");
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, durations: 2ms}")),
            "t.yaml:10:64: op 'c0': 'durations' must be a list of durations, one per iteration; got '2ms'\n");
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, durations: [1ms, lots]}")),
            "t.yaml:10:70: op 'c0': 'durations' must be a duration like 1.5ms or 250us, got 'lots'\n");
  EXPECT_EQ(problems(with_line(11, "  - {id: s0, type: send, flow: f01, bytes: 1MiB, durations: [1ms], after: [c0]}")),
            "t.yaml:11:61: op 's0': field 'durations' does not apply to a send op\n");
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, durations: [1ms, 2ms, 3ms]}")),
            "t.yaml:10:64: op 'c0': 'durations' has 3 entries, more than the profile's 2 iterations\n");
  EXPECT_EQ(problems(with_line(11, "  - {id: s0, type: send, flow: f01, bytes: 1MiB, gaps: [-1us], after: [c0]}")),
            "t.yaml:11:57: op 's0': 'gaps' must be zero or more, got -1us\n");
}

TEST(ProfileLoad, RejectsCyclesAndPrintsThem) {
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, after: [recv:s1]}")),
            "t.yaml:10:5: dependency cycle: c0 -> s0 -> c1 -> s1 -> c0\n");
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, after: [c0]}")),
            "t.yaml:10:5: dependency cycle: c0 -> c0\n");
  // The same edge into the previous iteration is no cycle.
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, after: [recv:s1@-1]}")), "");
}

// A dependency listed twice is reported where it is listed again, in a short
// list as in a long one: past a few dozen entries a hash set finds it (a scan of
// the list for each entry took an op waiting for 400 000 others 20 s and more).
// The same op in another iteration is another dependency.
TEST(ProfileLoad, RejectsADependencyListedTwice) {
  const std::string short_list = "  - {id: s0, type: send, flow: f01, bytes: 1MiB, after: [c0, c0]}";
  EXPECT_EQ(problems(with_line(11, short_list)),
            "t.yaml:11:" + std::to_string(short_list.rfind("c0") + 1) + ": op 's0' lists dependency 'c0' twice\n");
  std::string text = "version: 1\niterations: 2\nranks: [{id: 0}]\nflows: []\nops:\n";
  std::string after;
  for (int i = 0; i < 100; ++i) {
    text += "  - {id: c" + std::to_string(i) + ", type: compute, rank: 0, duration: 1ms}\n";
    after += "c" + std::to_string(i) + ", c" + std::to_string(i) + "@-1, ";
  }
  const std::string long_list = "  - {id: z, type: compute, rank: 0, duration: 1ms, after: [" + after + "c7@-1, c99]}";
  EXPECT_EQ(problems(text + long_list + "\n"),
            "t.yaml:106:" + std::to_string(long_list.rfind("c7@-1") + 1) + ": op 'z' lists dependency 'c7@-1' twice\n" +
            "t.yaml:106:" + std::to_string(long_list.rfind("c99") + 1) + ": op 'z' lists dependency 'c99' twice\n");
  EXPECT_EQ(problems(text + "  - {id: z, type: compute, rank: 0, duration: 1ms, after: [" + after + "c0@-2]}\n"), "");
}

TEST(ProfileLoad, RejectsCrossRankDependenciesThatAreNotReceipts) {
  EXPECT_EQ(problems(with_line(12, "  - {id: c1, type: compute, rank: 1, duration: 1ms, after: [s0]}")),
            "t.yaml:12:61: op 'c1' (rank 1) depends on 's0' of rank 0: across ranks only the receipt of a message can "
            "be awaited (write recv:s0)\n");
  EXPECT_EQ(problems(with_line(12, "  - {id: c1, type: compute, rank: 1, duration: 1ms, after: [c0]}")),
            "t.yaml:12:61: op 'c1' (rank 1) depends on 'c0' of rank 0: across ranks only the receipt of a message can "
            "be awaited\n");
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, after: [recv:s0]}")),
            "t.yaml:10:61: op 'c0' (rank 0) waits for the receipt of 's0', which flow 'f01' delivers to rank 1, not to "
            "rank 0\n");
  EXPECT_EQ(problems(with_line(12, "  - {id: c1, type: compute, rank: 1, duration: 1ms, after: [recv:c0]}")),
            "t.yaml:12:61: op 'c1' waits for recv:c0, but 'c0' is a compute op; only a send can be received\n");
  EXPECT_EQ(problems(with_line(12, "  - {id: c1, type: compute, rank: 1, duration: 1ms, after: [recv:s0@-0]}")),
            "t.yaml:12:61: op 'c1': dependency 'recv:s0@-0' must end in @-K with K from 1 to 1000 (K iterations back)\n");
}

TEST(ProfileLoad, RejectsWrongTypesMissingAndUnknownFields) {
  EXPECT_EQ(problems(with_line(2, "iterations: many")), "t.yaml:2:13: the profile: 'iterations' must be a whole number, got 'many'\n");
  std::string scalar_ranks = kBase;
  scalar_ranks.replace(scalar_ranks.find("ranks:\n"), scalar_ranks.find("flows:") - scalar_ranks.find("ranks:\n"), "ranks: 5\n");
  EXPECT_EQ(problems(scalar_ranks),
            "t.yaml:3:8: 'ranks' must be a list of rank entries, got '5' (for example: ranks: [{id: 0}, {id: 1}])\n");
  // One error for a 'ranks' that is not a list, not one more per rank number
  // that a count of nothing cannot hold; the other checks go on.
  std::string map_ranks = scalar_ranks;
  map_ranks.replace(map_ranks.find("ranks: 5"), 8, "ranks: {id: 0}");
  map_ranks.replace(map_ranks.find("dst: 1}"), 7, "dst: 1, colour: red}");
  EXPECT_EQ(problems(map_ranks),
            "t.yaml:3:8: 'ranks' must be a list, got a map\n"
            "t.yaml:5:31: unknown field 'colour' in flow entry 0\n");
  // Nor for a missing 'ranks', or per-rank observed times that a count of
  // nothing cannot match.
  std::string no_ranks = scalar_ranks;
  no_ranks.replace(no_ranks.find("ranks: 5\n"), 9, "");
  no_ranks += "observed:\n  iterations: [{duration: 1ms, ranks: [1ms, 1ms]}]\n";
  EXPECT_EQ(problems(no_ranks), "t.yaml:1:1: the profile is missing the required field 'ranks'\n");
  for (const char* empty : {"ranks:", "ranks: []"}) {
    std::string empty_ranks = scalar_ranks;
    empty_ranks.replace(empty_ranks.find("ranks: 5"), 8, empty);
    EXPECT_EQ(problems(empty_ranks), "t.yaml:3:8: 'ranks' is empty: a profile needs at least one rank\n") << empty;
  }
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, rank: 0, duration: 1ms}")),
            "t.yaml:10:5: op entry 0 is missing the required field 'type'\n");
  EXPECT_EQ(problems(with_line(11, "  - {id: s0, type: send, flow: f01, after: [c0]}")),
            "t.yaml:11:5: op 's0' is missing the required field 'bytes'\n");
  EXPECT_EQ(problems(with_line(11, "  - {id: s0, type: send, flow: f01, byte: 1MiB, after: [c0]}")),
            "t.yaml:11:5: op 's0' is missing the required field 'bytes'\n"
            "t.yaml:11:37: unknown field 'byte' in op entry 1 (did you mean 'bytes'?)\n");
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: compute, rank: 0, duration: 1ms, bytes: 5}")),
            "t.yaml:10:60: op 'c0': field 'bytes' does not apply to a compute op\n");
  EXPECT_EQ(problems(with_line(10, "  - {id: c0, type: kompute, rank: 0, duration: 1ms}")),
            "t.yaml:10:20: op 'c0': 'type' must be compute or send, got 'kompute'\n");
  std::string map_ops = kBase;
  map_ops.replace(map_ops.find("ops:\n"), std::string::npos, "ops: {a: 1}\n");
  EXPECT_EQ(problems(map_ops), "t.yaml:9:6: 'ops' must be a list, got a map\n");
  EXPECT_EQ(problems(with_line(1, "version: 1\nverison: true")),
            "t.yaml:2:1: unknown field 'verison' in the profile (did you mean 'version'?)\n");
}

TEST(ProfileLoad, RejectsUnsupportedVersionsAndEmptyOrNonMapFiles) {
  EXPECT_EQ(problems(with_line(1, "version: 2")),
            "t.yaml:1:10: unsupported profile version '2': this tensorwire reads version 1\n");
  EXPECT_EQ(problems(""), "t.yaml:1:1: empty file: expected a tensorwire profile (a map with version, ranks, flows, ops)\n");
  EXPECT_EQ(problems("- 1\n- 2\n"), "t.yaml:1:1: a profile must be a map with version, ranks, flows, ops; got a list\n");
}

TEST(ProfileLoad, ReportsEveryProblemNotJustTheFirst) {
  std::string text = with_line(10, "  - {id: c0, type: compute, rank: 0, duration: -1ms}");
  text = text.replace(text.find("bytes: 4KiB"), 11, "bytes: 0");
  text = text.replace(text.find("iterations: 2"), 13, "iterations: x");
  const ProfileLoad load = load_profile_text(text, "t.yaml");
  EXPECT_FALSE(load.ok());
  EXPECT_EQ(load.diagnostics.size(), 3U) << problems(text);
}

// A wrong flow is reported once: its ops are not reported again as sending on
// an unknown flow.
TEST(ProfileLoad, AWrongFlowIsReportedOnceNotByEachOfItsOps) {
  std::string text = kBase;
  text.replace(text.find("{id: f01, src: 0, dst: 1}"), 25, "{id: f01, src: 0, dst: 0}");
  EXPECT_EQ(problems(text), "t.yaml:7:5: flow 'f01': 'src' and 'dst' are both rank 0; a flow joins two ranks\n");
  // An op on a flow that is not there at all is still reported.
  text = kBase;
  text.replace(text.find("flow: f01,"), 10, "flow: f02,");
  EXPECT_NE(problems(text).find("sends on unknown flow 'f02'"), std::string::npos) << problems(text);
}

TEST(ProfileLoad, CapsTheNumberOfProblems) {
  std::string text = "version: 1\niterations: 1\nranks: [{id: 0}]\nflows: []\nops:\n";
  for (int i = 0; i < 500; ++i) text += "  - {id: c" + std::to_string(i) + ", type: compute, rank: 0, duration: 0}\n";
  const ProfileLoad load = load_profile_text(text, "t.yaml");
  ASSERT_EQ(load.diagnostics.size(), kMaxDiagnostics + 1);
  EXPECT_NE(load.diagnostics.back().message.find("too many problems"), std::string::npos);
}

TEST(ProfileLoad, ReadsTheDocumentedSampleWithItsSidecar) {
  const ProfileLoad load = load_profile_file(std::string(TW_SOURCE_DIR) + "/docs/sample-profile.yaml");
  ASSERT_TRUE(load.ok()) << (load.diagnostics.empty() ? "" : load.diagnostics[0].str());
  const Profile& p = *load.profile;
  EXPECT_EQ(p.metadata.source, "manual");
  ASSERT_TRUE(p.observed.has_value());
  EXPECT_EQ(p.observed->iterations.size(), 2U);
  EXPECT_EQ(p.observed->iterations[1].rank_durations.size(), 3U);
  EXPECT_EQ(p.observed->ops.size(), 2U + 3U);  // inline + sidecar
  EXPECT_EQ(p.ops[p.op_by_id.at("w0.push.fc1")].gap, 20'000);
  EXPECT_EQ(p.ops[p.op_by_id.at("ps.pull.fc1.w1")].after[1].iterations_back, 1U);
}

TEST(ProfileLoad, ReportsSidecarProblemsWithTheSidecarsLine) {
  const auto dir = std::filesystem::temp_directory_path() / ("tw-sidecar-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    // An unknown op's name quoted with its control characters escaped.
    std::ofstream(dir / "obs.csv") << "iteration,op,start_ns,end_ns\n0,c0,0,100\n0,no\x1b[2Jpe,0,5\n9,c0,0,1\n0,c0,50,10\n";
  }
  const std::string text = std::string(kBase) + "observed:\n  ops_file: obs.csv\n";
  const ProfileLoad load = load_profile_text(text, "t.yaml", dir.string());
  std::string got;
  for (const auto& d : load.diagnostics) got += d.str() + "\n";
  const std::string csv = (dir / "obs.csv").string();
  EXPECT_EQ(got, csv + ":3: unknown op 'no\\x1b[2Jpe'\n" + csv + ":4:1: iteration '9' is not a number from 0 to 1\n" + csv +
                     ":5: start_ns and end_ns must be nanoseconds with 0 <= start_ns <= end_ns <= 1 hour\n");
  std::filesystem::remove_all(dir);
}

TEST(ProfileLoad, ReportsUnreadableFiles) {
  const ProfileLoad missing = load_profile_file("/nonexistent/p.yaml");
  ASSERT_EQ(missing.diagnostics.size(), 1U);
  EXPECT_EQ(missing.diagnostics[0].str(), "/nonexistent/p.yaml: cannot open: No such file or directory");
  const ProfileLoad dir = load_profile_file("/tmp");
  ASSERT_EQ(dir.diagnostics.size(), 1U);
  EXPECT_EQ(dir.diagnostics[0].str(), "/tmp: is a directory, not a profile");
}

TEST(ProfileWrite, RoundTripsExactly) {
  ProfileLoad first = load_profile_file(std::string(TW_SOURCE_DIR) + "/docs/sample-profile.yaml");
  ASSERT_TRUE(first.ok());
  first.profile->observed->ops_file.clear();  // sidecar rows are written inline
  const std::string text = write_profile_yaml(*first.profile);
  const ProfileLoad second = load_profile_text(text, "again.yaml");
  ASSERT_TRUE(second.ok()) << (second.diagnostics.empty() ? "" : second.diagnostics[0].str());
  EXPECT_EQ(write_profile_yaml(*second.profile), text);
  const Profile& a = *first.profile;
  const Profile& b = *second.profile;
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].id, b.ops[i].id);
    EXPECT_EQ(a.ops[i].duration, b.ops[i].duration);
    EXPECT_EQ(a.ops[i].bytes, b.ops[i].bytes);
    EXPECT_EQ(a.ops[i].gap, b.ops[i].gap);
    EXPECT_EQ(a.ops[i].durations, b.ops[i].durations);
    EXPECT_EQ(a.ops[i].gaps, b.ops[i].gaps);
    EXPECT_EQ(a.ops[i].after, b.ops[i].after);
  }
  ASSERT_EQ(a.flows.size(), b.flows.size());
  for (std::size_t i = 0; i < a.flows.size(); ++i) EXPECT_EQ(a.flows[i].read_lag, b.flows[i].read_lag);
  EXPECT_EQ(a.flows[a.flow_by_id.at("ps-w0")].read_lag, 20 * kMicro) << "the sample shows a read lag";
  EXPECT_EQ(a.observed->ops.size(), b.observed->ops.size());
  EXPECT_EQ(a.ops[a.op_by_id.at("w0.bwd.fc1")].durations.size(), 3U) << "the sample shows per-iteration durations";
  EXPECT_EQ(a.ops[a.op_by_id.at("w0.push.fc1")].gaps.size(), 2U);
}

TEST(ProfileWrite, QuotesWhatPlainYamlCannotHold) {
  Profile p;
  p.metadata.description = "a, b: [c] # d \"e\" \\ null";
  p.metadata.model = "null";
  p.ranks = {{0, "host with spaces", Role::worker}, {1, "#hash", Role::worker}};
  p.flows = {{"f", 0, 1}};
  Op op;
  op.id = "s";
  op.type = OpType::send;
  op.flow = 0;
  op.bytes = 10;
  op.tensor = "x: y";
  p.ops = {op};
  const ProfileLoad load = load_profile_text(write_profile_yaml(p), "q.yaml");
  ASSERT_TRUE(load.ok()) << (load.diagnostics.empty() ? "" : load.diagnostics[0].str());
  EXPECT_EQ(load.profile->metadata.description, p.metadata.description);
  EXPECT_EQ(load.profile->metadata.model, "null");
  EXPECT_EQ(load.profile->ranks[0].host, "host with spaces");
  EXPECT_EQ(load.profile->ranks[1].host, "#hash");
  EXPECT_EQ(load.profile->ops[0].tensor, "x: y");
}

TEST(ProfileWrite, ReportsUnwritablePaths) {
  Profile p;
  try {
    save_profile(p, "/nonexistent-dir/p.yaml");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent-dir/p.yaml: cannot write: No such file or directory");
  }
}

}  // namespace
}  // namespace tw
