// The results an agent streams to disk: fixed-size binary records, one per event
// of interest (a message sent or received, a compute op, an iteration, transmit
// timestamps, a TCP_INFO snapshot). docs/results-format.md is the reference.
//
// Each kind has its own struct with named fields; all are 64 bytes with the same
// first 8 (kind, flags, rank), so a file is a sequence of `Record` slots and a
// reader asks a slot for the kind it holds (`Record::as<SendRecord>()`). Times are
// CLOCK_REALTIME nanoseconds unless named as a duration; -1: not measured.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <concepts>
#include <cstdio>
#include <cstring>
#include <optional>
#include <type_traits>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensorwire/core/profile.hpp"

namespace tw {

enum class RecordKind : std::uint8_t {
  send = 1,
  receive = 2,
  compute = 3,
  iteration = 4,
  tx_timestamps = 5,
  tcp_info = 6,
};

inline constexpr std::uint8_t kFlagHeaderOnly = 1;  // send/receive: message shorter than the frame header

// A message handed to the kernel.
struct SendRecord {
  static constexpr RecordKind kKind = RecordKind::send;
  RecordKind kind = kKind;
  std::uint8_t flags = 0;
  std::uint16_t rank = 0;
  std::uint32_t op = 0, iteration = 0, flow = 0;
  std::uint64_t bytes = 0;  // on the wire, frame header included
  std::int64_t planned = -1;   // when the executor meant it to start
  std::int64_t ready = -1;     // the first write was issued
  std::int64_t sent_app = -1;  // the kernel accepted the last byte
  std::int64_t reserved[2] = {-1, -1};
};

// A message read off a flow.
struct ReceiveRecord {
  static constexpr RecordKind kKind = RecordKind::receive;
  RecordKind kind = kKind;
  std::uint8_t flags = 0;
  std::uint16_t rank = 0;
  std::uint32_t op = 0, iteration = 0, flow = 0;
  std::uint64_t bytes = 0;
  // Each the read that returned the bytes, or, while a read waited out
  // --read-gap-us, when the socket was first seen to hold them.
  std::int64_t recv_first = -1;  // the header whole
  std::int64_t recv_last = -1;   // the last byte
  std::int64_t delivered = -1;   // handed to the executor: recv_last plus any emulated delay and read lag, never before the read
  std::int64_t reserved[2] = {-1, -1};
};

// A compute op: the rank was busy.
struct ComputeRecord {
  static constexpr RecordKind kKind = RecordKind::compute;
  RecordKind kind = kKind;
  std::uint8_t flags = 0;
  std::uint16_t rank = 0;
  std::uint32_t op = 0, iteration = 0;
  std::uint32_t reserved_flow = 0;
  std::uint64_t reserved_bytes = 0;
  std::int64_t planned = -1, start = -1, end = -1;
  std::int64_t reserved[2] = {-1, -1};
};

// One iteration of one rank.
struct IterationRecord {
  static constexpr RecordKind kKind = RecordKind::iteration;
  RecordKind kind = kKind;
  std::uint8_t flags = 0;
  std::uint16_t rank = 0;
  std::uint32_t reserved_op = 0;
  std::uint32_t iteration = 0;
  std::uint32_t reserved_flow = 0;
  std::uint64_t reserved_bytes = 0;
  std::int64_t start = -1, end = -1;
  std::int64_t reserved[3] = {-1, -1, -1};
};

// The kernel's transmit timestamps of one sent message (SO_TIMESTAMPING): first
// and last byte through the qdisc (sched) and to the device (wire), and the ACK
// of its last byte.
struct TxTimestampsRecord {
  static constexpr RecordKind kKind = RecordKind::tx_timestamps;
  RecordKind kind = kKind;
  std::uint8_t flags = 0;
  std::uint16_t rank = 0;
  std::uint32_t op = 0, iteration = 0, flow = 0;
  std::uint64_t bytes = 0;
  std::int64_t sched_first = -1, wire_first = -1, wire_last = -1, acked = -1, sched_last = -1;
};

// A TCP_INFO snapshot of one outgoing flow. Durations are nanoseconds.
struct TcpInfoRecord {
  static constexpr RecordKind kKind = RecordKind::tcp_info;
  RecordKind kind = kKind;
  std::uint8_t flags = 0;
  std::uint16_t rank = 0;
  std::uint32_t snd_cwnd = 0;       // segments
  std::uint32_t total_retrans = 0;  // segments, since the connection opened
  std::uint32_t flow = 0;
  std::int64_t sndbuf_limited_ns = 0;  // cumulative
  std::int64_t at = -1;                // when the snapshot was taken
  std::int64_t rtt_ns = 0, rttvar_ns = 0;
  std::int64_t busy_ns = 0, rwnd_limited_ns = 0;  // cumulative
};

template <typename T>
concept RecordType = sizeof(T) == 64 && std::is_trivially_copyable_v<T> && requires(T t) {
  { T::kKind } -> std::convertible_to<RecordKind>;
  { t.rank } -> std::convertible_to<std::uint16_t>;
};

// One 64-byte slot of a records file, holding a record of any kind.
class Record {
 public:
  Record() = default;
  template <RecordType T>
  Record(const T& r) : raw_(std::bit_cast<Raw>(r)) {}  // NOLINT: implicit, a typed record is a record

  RecordKind kind() const { return static_cast<RecordKind>(raw_[0]); }
  bool is(RecordKind k) const { return kind() == k; }
  std::uint16_t rank() const {
    std::uint16_t r;
    std::memcpy(&r, raw_.data() + 2, 2);
    return r;
  }

  // The record as its kind's struct; throws std::logic_error if it is another kind.
  template <RecordType T>
  T as() const {
    if (kind() != T::kKind) throw std::logic_error("record of kind " + std::to_string(static_cast<int>(kind())) +
                                                   " read as kind " + std::to_string(static_cast<int>(T::kKind)));
    return std::bit_cast<T>(raw_);
  }

  // Changes the record through its kind's struct; throws std::logic_error if it
  // is another kind.
  template <RecordType T, typename G>
  void update(G g) {
    T r = as<T>();
    g(r);
    raw_ = std::bit_cast<Raw>(r);
  }

  // Moves every clock time the record holds (not durations, nor the -1 of a time
  // that was not measured) through f: to put records onto another clock.
  template <typename F>
  void map_times(F f) {
    auto shift = [&f](std::int64_t& t) {
      if (t >= 0) t = f(t);
    };
    switch (kind()) {
      case RecordKind::send: update<SendRecord>([&](SendRecord& r) { shift(r.planned), shift(r.ready), shift(r.sent_app); }); break;
      case RecordKind::receive:
        update<ReceiveRecord>([&](ReceiveRecord& r) { shift(r.recv_first), shift(r.recv_last), shift(r.delivered); });
        break;
      case RecordKind::compute: update<ComputeRecord>([&](ComputeRecord& r) { shift(r.planned), shift(r.start), shift(r.end); }); break;
      case RecordKind::iteration: update<IterationRecord>([&](IterationRecord& r) { shift(r.start), shift(r.end); }); break;
      case RecordKind::tx_timestamps:
        update<TxTimestampsRecord>([&](TxTimestampsRecord& r) {
          shift(r.sched_first), shift(r.wire_first), shift(r.wire_last), shift(r.acked), shift(r.sched_last);
        });
        break;
      case RecordKind::tcp_info: update<TcpInfoRecord>([&](TcpInfoRecord& r) { shift(r.at); }); break;
    }
  }

  // Moves the op index of a record that has one (send, receive, compute,
  // transmit timestamps) through op_f, and the flow index of one that has one
  // (all but compute and iteration) through flow_f: from a profile slice's to
  // the whole's.
  template <typename OpF, typename FlowF>
  void map_indices(OpF op_f, FlowF flow_f) {
    const auto both = [&](auto& r) { r.op = op_f(r.op), r.flow = flow_f(r.flow); };
    switch (kind()) {
      case RecordKind::send: update<SendRecord>(both); break;
      case RecordKind::receive: update<ReceiveRecord>(both); break;
      case RecordKind::compute: update<ComputeRecord>([&](ComputeRecord& r) { r.op = op_f(r.op); }); break;
      case RecordKind::tx_timestamps: update<TxTimestampsRecord>(both); break;
      case RecordKind::tcp_info: update<TcpInfoRecord>([&](TcpInfoRecord& r) { r.flow = flow_f(r.flow); }); break;
      case RecordKind::iteration: break;
    }
  }

 private:
  using Raw = std::array<unsigned char, 64>;
  alignas(8) Raw raw_{};
};
static_assert(sizeof(Record) == 64, "records are 64 bytes on disk");
static_assert(RecordType<SendRecord> && RecordType<ReceiveRecord> && RecordType<ComputeRecord> &&
              RecordType<IterationRecord> && RecordType<TxTimestampsRecord> && RecordType<TcpInfoRecord>);

// What send, receive and compute records share: the op instance they belong to,
// and when it was planned, started and completed (send: ready and sent_app;
// receive: recv_first and delivered, planned -1; compute: start and end).
struct OpTimes {
  RecordKind kind = RecordKind::send;
  std::uint32_t op = 0, iteration = 0, flow = 0;
  std::uint64_t bytes = 0;
  std::int64_t planned = -1, start = -1, completed = -1;
};
// std::nullopt for records of other kinds.
std::optional<OpTimes> op_times(const Record& r);

inline constexpr char kRecordsMagic[8] = {'T', 'W', 'R', 'E', 'C', 'S', '0', '1'};
inline constexpr std::uint32_t kRecordsVersion = 1;

// Reads a records file; throws std::runtime_error naming the file on a bad header,
// a truncated record, or a record of unknown kind.
// Whether the records of rank `rank`'s file fit the profile and the file
// itself: each names that rank, ops and flows that exist (a message's op a send
// on that flow, of at most its size on the wire; a compute record's op a
// compute), each op instance at most once per kind, and iterations the file can
// hold (an iteration has its iteration record, so none beyond the number of
// those, which the file's size bounds; records of an unfinished last one are
// allowed). "" if they do, else "record N: reason". Readers that size arrays by
// iteration, index by op or add up bytes rely on it.
std::string check_records(const std::vector<Record>& records, std::uint32_t rank, const Profile& profile);

std::vector<Record> read_records(const std::string& path);

// Appends records to a file, header first. Remembers the first write error
// (errno) instead of throwing, so a full disk ends the run cleanly.
class RecordFile {
 public:
  explicit RecordFile(const std::string& path);  // throws std::runtime_error if it cannot be created
  ~RecordFile();
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  void write(const Record* records, std::size_t n);
  // Flushes and closes; returns the first error (0 if none).
  int close();
  int error() const { return error_; }
  std::uint64_t written() const { return written_; }

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
  int error_ = 0;
  std::uint64_t written_ = 0;
};

}  // namespace tw
