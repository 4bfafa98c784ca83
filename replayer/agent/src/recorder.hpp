// Streams records to a file from its own thread, so that the I/O thread never
// waits for the disk. push() never blocks and never allocates: the queue is sized
// up front, and a full queue drops the record (and counts it).
// push(), dropped() and stop() are for one producer thread (the agent's I/O thread).
#pragma once

#include <atomic>
#include <concurrentqueue/concurrentqueue.h>
#include <cstdint>
#include <string>
#include <thread>

#include "tensorwire/core/records.hpp"

namespace tw {

class Recorder {
 public:
  // Creates `path` (throws std::runtime_error if it cannot) and starts the writer
  // thread; write errors are reported by stop().
  explicit Recorder(const std::string& path);
  ~Recorder() { stop(); }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void push(const Record& r) {
    if (!queue_.try_enqueue(token_, r)) ++dropped_;
  }

  // Drains the queue, closes the file; returns its first error (errno) or 0.
  int stop();
  std::uint64_t written() const { return file_.written(); }
  std::uint64_t dropped() const { return dropped_; }

 private:
  static constexpr std::size_t kCapacity = 1 << 18;  // 16 MiB of records in flight at most

  void run();

  moodycamel::ConcurrentQueue<Record> queue_;
  moodycamel::ProducerToken token_;
  RecordFile file_;
  std::atomic<bool> stopping_{false};
  std::uint64_t dropped_ = 0;
  std::thread thread_;
};

}  // namespace tw
