// The results an agent streams to disk: fixed-size binary records, one per event
// of interest (a message sent or received, a compute op, an iteration, transmit
// timestamps, a TCP_INFO snapshot). docs/results-format.md is the reference.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tw {

enum class RecordKind : std::uint8_t {
  send = 1,  // t: planned, ready, sent_app
  receive = 2,  // t: recv_first, recv_last, delivered
  compute = 3,  // t: planned, start, end
  iteration = 4,  // t: start, end
  tx_timestamps = 5,  // t: sched_first, wire_first, wire_last, acked, sched_last
  tcp_info = 6,  // t: when, rtt_ns, rttvar_ns, busy_ns, rwnd_limited_ns; bytes: sndbuf_limited_ns;
                 // op: snd_cwnd; iteration: total_retrans
};

inline constexpr std::uint8_t kFlagHeaderOnly = 1;  // send/receive: message shorter than the frame header

struct Record {
  RecordKind kind = RecordKind::send;
  std::uint8_t flags = 0;
  std::uint16_t rank = 0;
  std::uint32_t op = 0;
  std::uint32_t iteration = 0;
  std::uint32_t flow = 0;
  std::uint64_t bytes = 0;
  std::array<std::int64_t, 5> t{};  // CLOCK_REALTIME nanoseconds (or as noted); -1: not measured
};
static_assert(sizeof(Record) == 64, "records are 64 bytes on disk");

// Applies `f` to every clock time a record holds (not to durations, nor to the
// -1 of a time that was not measured): to move records onto another clock.
template <typename F>
void map_record_times(Record& r, F f) {
  const std::size_t n = r.kind == RecordKind::tcp_info ? 1 : r.t.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (r.t[i] >= 0) r.t[i] = f(r.t[i]);
  }
}

inline constexpr char kRecordsMagic[8] = {'T', 'W', 'R', 'E', 'C', 'S', '0', '1'};

// Reads a records file; throws std::runtime_error naming the file on a bad header
// or a truncated record.
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
