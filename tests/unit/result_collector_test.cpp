// Uploaded result files are untrusted input: only an agent's own two files, in
// the sizes announced, with a records header, whole records of known kinds.
#include "tensorwire/controller/result_collector.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensorwire/core/binary_file.hpp"
#include "tensorwire/core/records.hpp"
#include "tensorwire/core/run_dir.hpp"
#include "tensorwire/util/temp_dir.hpp"

namespace tw {
namespace {

std::string records_bytes(const std::vector<Record>& records) {
  const auto h = binary_file::encode_header(kRecordsMagic, kRecordsVersion, sizeof(Record));
  std::string s(reinterpret_cast<const char*>(h.data()), h.size());
  s.append(reinterpret_cast<const char*>(records.data()), records.size() * sizeof(Record));
  return s;
}

void upload(ResultCollector& c, const std::string& name, const std::string& bytes) {
  c.begin({name, bytes.size()});
  // In two frames, as a real upload may split it.
  c.data(std::string_view(bytes).substr(0, bytes.size() / 2));
  c.data(std::string_view(bytes).substr(bytes.size() / 2));
}

ClockTrack ahead_by(Nanos offset) {
  ClockTrack t;
  t.add(0, ClockEstimate{offset, 1, 2, 1});
  return t;
}

TEST(ResultCollector, MergesRecordsAndSummaryOntoTheControllerClock) {
  TempDir dir;
  ResultCollector c(dir.path(), 1);
  IterationRecord it;
  it.rank = 1;
  it.start = 1000;
  it.end = 2000;
  upload(c, run_dir::records_name(1), records_bytes({it}));
  upload(c, run_dir::summary_name(1), R"({"start_ns": 1000, "end_ns": 3000, "iteration_times_ns": [[1000, 2000]]})");
  EXPECT_EQ(c.files().size(), 2u);
  c.merge(ahead_by(100), "node1", "rank 1 (node1)");
  const auto records = read_records(run_dir::records_file(dir.path(), 1));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].as<IterationRecord>().start, 900);
  EXPECT_EQ(records[0].as<IterationRecord>().end, 1900);
  std::ifstream in(run_dir::summary_file(dir.path(), 1));
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["end_ns"], 2900);
  EXPECT_EQ(j["iteration_times_ns"][0][0], 900);
  EXPECT_EQ(j["host"], "node1");
  EXPECT_EQ(j["clock"]["offset_ns"], 100);
  EXPECT_FALSE(std::filesystem::exists(run_dir::records_file(dir.path(), 1) + ".agent"));
}

TEST(ResultCollector, RefusesWhatIsNotItsResults) {
  TempDir dir;
  ResultCollector c(dir.path(), 1);
  EXPECT_THROW(c.begin({"../../etc/passwd", 10}), std::runtime_error);
  EXPECT_THROW(c.begin({run_dir::records_name(0), 16}), std::runtime_error);  // another rank's
  EXPECT_THROW(c.begin({run_dir::records_name(1), 17}), std::runtime_error);  // not whole records
  EXPECT_THROW(c.data("x"), std::runtime_error);                              // outside a file
  c.begin({run_dir::summary_name(1), 2});
  EXPECT_THROW(c.begin({run_dir::summary_name(1), 2}), std::runtime_error);  // in the middle of one
  EXPECT_THROW(c.data("xyz"), std::runtime_error);                           // more than announced
}

TEST(ResultCollector, ABadRecordsFileIsNamedAndNotMerged) {
  TempDir dir;
  ResultCollector c(dir.path(), 0);
  std::string bytes = records_bytes({IterationRecord{}});
  bytes[0] = 'X';  // not our magic
  upload(c, run_dir::records_name(0), bytes);
  try {
    c.merge(ahead_by(0), "h", "rank 0 (h)");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 (h): uploaded results that do not read"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a tensorwire records file"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(run_dir::records_file(dir.path(), 0)));

  ResultCollector k(dir.path(), 0);
  bytes = records_bytes({IterationRecord{}});
  bytes[binary_file::kHeaderSize] = 99;  // a record of no kind
  upload(k, run_dir::records_name(0), bytes);
  EXPECT_THROW(k.merge(ahead_by(0), "h", "rank 0 (h)"), std::runtime_error);

  // A summary that is not JSON, or nests deeper than any of tensorwire's files
  // (bounded before it is parsed), is named.
  for (const std::string& summary : {std::string("{not json"), std::string(100000, '[')}) {
    ResultCollector j(dir.path(), 0);
    upload(j, run_dir::summary_name(0), summary);
    try {
      j.merge(ahead_by(0), "h", "rank 0 (h)");
      FAIL();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 0 (h): uploaded a summary that does not read"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(summary.size() > 9 ? "nesting deeper than 64 levels" : "not valid JSON"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(run_dir::summary_file(dir.path(), 0)));
  }
}

}  // namespace
}  // namespace tw
