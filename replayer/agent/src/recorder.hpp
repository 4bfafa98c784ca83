// Streams records to a file from its own thread, so that the I/O threads never
// wait for the disk. push() never blocks and never allocates: the queue is sized
// up front (no larger than the run needs, when the run says how many records it
// can push), and a full queue drops the record (and counts it).
// Each I/O thread pushes through its own Producer (producer(i), one per thread
// given to the constructor; push() is producer(0)'s); dropped() and stop() once
// the producers are done.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <concurrentqueue/concurrentqueue.h>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tensorwire/core/profile_slice.hpp"
#include "tensorwire/core/records.hpp"

namespace tw {

class Recorder {
 public:
  // One thread's way into the queue.
  class Producer {
   public:
    explicit Producer(moodycamel::ConcurrentQueue<Record>& q) : queue_(q), token_(q) {}
    void push(const Record& r) {
      if (!queue_.try_enqueue(token_, r)) ++dropped_;
    }
    std::uint64_t dropped() const { return dropped_; }

   private:
    moodycamel::ConcurrentQueue<Record>& queue_;
    moodycamel::ProducerToken token_;
    std::uint64_t dropped_ = 0;
  };

  // Creates `path` (throws std::runtime_error if it cannot) and starts the writer
  // thread; write errors are reported by stop(). `producers`: the threads that
  // push. `ops` and `flows` (outliving the recorder), when given: records hold
  // the ops and flows of a profile slice, written as the whole profile's.
  // `most`: the records the run can push at most (most_records()), which caps
  // the queue.
  explicit Recorder(const std::string& path, std::size_t producers = 1, const IndexMap* ops = nullptr,
                    const IndexMap* flows = nullptr, std::uint64_t most = kCapacity);
  ~Recorder() { stop(); }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  Producer& producer(std::size_t i) { return *producers_.at(i); }
  void push(const Record& r) { producers_.front()->push(r); }

  // Drains the queue, closes the file; returns its first error (errno) or 0.
  int stop();
  std::uint64_t written() const { return file_.written(); }
  // Keeps the writer thread on this core (that of the I/O thread it serves, so
  // that it never runs beside another agent); false if the kernel refused.
  bool pin(int cpu);
  std::uint64_t dropped() const;

  // Records in flight, shared by the producers (16 MiB), each able to hold at
  // least kMinPerProducer, or the whole run when that is less (and at least
  // kSmallest).
  static constexpr std::size_t kCapacity = 1 << 18;
  static constexpr std::size_t kMinPerProducer = 1 << 15;
  static constexpr std::size_t kSmallest = 256;
  // What each producer can hold: any one of them may push all of the run's records.
  static std::size_t per_producer(std::size_t producers, std::uint64_t most) {
    const std::size_t share = std::max<std::size_t>(kMinPerProducer, kCapacity / std::max<std::size_t>(producers, 1));
    return static_cast<std::size_t>(std::min<std::uint64_t>(share, std::max<std::uint64_t>(most, kSmallest)));
  }
  // The writer's sleep between passes over the queue (next_sleep()): kSleep
  // after a pass that took more than an eighth of what a producer can hold; else
  // twice the last, up to kTrickleSleep while records come and to idle_sleep()
  // when none came. kTrickleSleep's records at a million a second fill under half
  // of kMinPerProducer, and a rate that jumps past an eighth of it brings the
  // writer back at kSleep; kIdleSleep's (after an idle spell, as before) fill
  // nearly all of it. A queue that holds every record the run can push may idle
  // for kIdleSleepWhole, as nothing can be dropped for want of a pass. With the
  // writer back at kSleep after any pass that found records (as it was), a sending
  // agent pacing 3 000 messages 1 ms apart was switched out 4 809-5 260 times, and
  // 3 388-3 404 with this back-off (perf stat): each switch a chance to take the
  // core from an I/O thread spinning to a deadline. 256 agents waking 30 times a
  // second were still 5% of a 256-agent set-up's CPU time.
  static constexpr std::chrono::milliseconds kSleep{2};
  static constexpr std::chrono::milliseconds kTrickleSleep{16};
  static constexpr std::chrono::milliseconds kIdleSleep{32};
  static constexpr std::chrono::milliseconds kIdleSleepWhole{1000};
  static std::chrono::milliseconds idle_sleep(std::size_t producers, std::uint64_t most) {
    return most <= per_producer(producers, most) ? kIdleSleepWhole : kIdleSleep;
  }
  static std::chrono::milliseconds next_sleep(std::chrono::milliseconds sleep, std::size_t taken, std::size_t room,
                                              std::chrono::milliseconds longest) {
    if (taken > room / 8) return kSleep;
    return std::min(sleep * 2, taken > 0 ? std::min(longest, kTrickleSleep) : longest);
  }

 private:
  void run();

  moodycamel::ConcurrentQueue<Record> queue_;
  std::vector<std::unique_ptr<Producer>> producers_;
  const IndexMap* ops_;
  const IndexMap* flows_;
  std::size_t per_producer_;
  std::chrono::milliseconds idle_sleep_;
  RecordFile file_;
  std::atomic<bool> stopping_{false};
  std::mutex wake_mutex_;  // stop() wakes the writer at once
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace tw
