#include "tensorwire/core/records.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tensorwire/core/binary_file.hpp"

namespace tw {
namespace {

std::string temp_file(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("tw-") + name + "-" + std::to_string(::getpid()))).string();
}

TEST(Records, ASlotGivesBackTheKindItHolds) {
  SendRecord s;
  s.rank = 3;
  s.op = 7;
  s.planned = 10;
  s.ready = 11;
  s.sent_app = 12;
  const Record r = s;
  EXPECT_TRUE(r.is(RecordKind::send));
  EXPECT_EQ(r.rank(), 3);
  const SendRecord back = r.as<SendRecord>();
  EXPECT_EQ(back.op, 7U);
  EXPECT_EQ(back.sent_app, 12);
  EXPECT_THROW(r.as<ReceiveRecord>(), std::logic_error);
}

TEST(Records, MapTimesMovesClockTimesOnly) {
  TcpInfoRecord t;
  t.at = 1000;
  t.rtt_ns = 50;  // a duration: unchanged
  t.sndbuf_limited_ns = 70;
  Record r = t;
  r.map_times([](std::int64_t x) { return x + 5; });
  EXPECT_EQ(r.as<TcpInfoRecord>().at, 1005);
  EXPECT_EQ(r.as<TcpInfoRecord>().rtt_ns, 50);
  EXPECT_EQ(r.as<TcpInfoRecord>().sndbuf_limited_ns, 70);

  TxTimestampsRecord x;
  x.sched_first = 1;
  x.acked = 4;  // wire_first, wire_last, sched_last stay -1: not measured
  r = x;
  r.map_times([](std::int64_t v) { return v + 100; });
  const auto y = r.as<TxTimestampsRecord>();
  EXPECT_EQ(y.sched_first, 101);
  EXPECT_EQ(y.acked, 104);
  EXPECT_EQ(y.wire_first, -1);
  EXPECT_EQ(y.sched_last, -1);
}

// A slice's op and flow indices become the whole profile's, in every record that
// has them, and nothing else moves.
TEST(Records, MapIndicesMovesOpsAndFlowsOfTheKindsThatHaveThem) {
  const auto mapped = [](Record r) {
    r.map_indices([](std::uint32_t i) { return i + 1000; }, [](std::uint32_t i) { return i + 50; });
    return r;
  };
  const auto op_and_flow = [&](auto rec) {
    rec.op = 1, rec.flow = 2, rec.iteration = 3;
    const auto back = mapped(rec).template as<decltype(rec)>();
    EXPECT_EQ(back.op, 1001u);
    EXPECT_EQ(back.flow, 52u);
    EXPECT_EQ(back.iteration, 3u);
  };
  op_and_flow(SendRecord{});
  op_and_flow(ReceiveRecord{});
  op_and_flow(TxTimestampsRecord{});
  TcpInfoRecord t;
  t.flow = 9, t.snd_cwnd = 10;
  EXPECT_EQ(mapped(t).as<TcpInfoRecord>().flow, 59u);
  EXPECT_EQ(mapped(t).as<TcpInfoRecord>().snd_cwnd, 10u);
  ComputeRecord c;
  c.op = 11;
  EXPECT_EQ(mapped(c).as<ComputeRecord>().op, 1011u);
  EXPECT_EQ(mapped(c).as<ComputeRecord>().reserved_flow, 0u);
  IterationRecord i;
  i.iteration = 12;
  EXPECT_EQ(mapped(i).as<IterationRecord>().reserved_op, 0u);
  EXPECT_EQ(mapped(i).as<IterationRecord>().reserved_flow, 0u);
  EXPECT_EQ(mapped(i).as<IterationRecord>().iteration, 12u);
}

TEST(Records, OpTimesOfMessagesAndCompute) {
  ReceiveRecord rx;
  rx.op = 2;
  rx.recv_first = 5;
  rx.recv_last = 6;
  rx.delivered = 9;
  const auto t = op_times(rx);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->start, 5);
  EXPECT_EQ(t->completed, 9);
  EXPECT_FALSE(op_times(IterationRecord{}));
}

TEST(Records, FileRoundTripAndBadFiles) {
  const std::string path = temp_file("records");
  {
    RecordFile f(path);
    const std::vector<Record> rs = {SendRecord{}, IterationRecord{}, ComputeRecord{}};
    f.write(rs.data(), rs.size());
    EXPECT_EQ(f.close(), 0);
  }
  const auto back = read_records(path);
  ASSERT_EQ(back.size(), 3U);
  EXPECT_TRUE(back[1].is(RecordKind::iteration));

  // A record of a kind no version wrote.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(binary_file::kHeaderSize + 64);
    f.put(char{42});
  }
  try {
    read_records(path);
    FAIL() << "accepted a record of kind 42";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": record 1 is of unknown kind 42");
  }
  // Cut in the middle of a record.
  std::filesystem::resize_file(path, binary_file::kHeaderSize + 64 + 10);
  EXPECT_THROW(read_records(path), std::runtime_error);
  std::filesystem::remove(path);
}

TEST(BinaryFile, HeaderChecks) {
  const auto h = binary_file::encode_header(kRecordsMagic, 1, 64);
  EXPECT_EQ(binary_file::check_header(h.data(), h.size(), kRecordsMagic, "records file", 1, 64), "");
  EXPECT_EQ(binary_file::check_header(h.data(), 8, kRecordsMagic, "records file", 1, 64), "not a tensorwire records file");
  EXPECT_EQ(binary_file::check_header(h.data(), h.size(), kRecordsMagic, "records file", 1, 32),
            "records file records of 64 bytes; this tensorwire reads 32");
  const auto v2 = binary_file::encode_header(kRecordsMagic, 2, 64);
  EXPECT_EQ(binary_file::check_header(v2.data(), v2.size(), kRecordsMagic, "records file", 1, 64),
            "records file version 2; this tensorwire reads up to 1");
  const char other[8] = {'T', 'W', 'T', 'R', 'A', 'C', 'E', '1'};
  EXPECT_EQ(binary_file::check_header(h.data(), h.size(), other, "trace", 1, 64), "not a tensorwire trace");
}

}  // namespace
}  // namespace tw
