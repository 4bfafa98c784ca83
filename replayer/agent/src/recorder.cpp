#include "recorder.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace tw {

Recorder::Recorder(const std::string& path, std::size_t producers, const IndexMap* ops, const IndexMap* flows, std::uint64_t most)
    : queue_(per_producer(producers, most), std::max<std::size_t>(producers, 1), 0), ops_(ops != nullptr && !ops->identity() ? ops : nullptr),
      flows_(flows != nullptr && !flows->identity() ? flows : nullptr),
      idle_sleep_(idle_sleep(producers, most)),
      file_(path) {
  for (std::size_t i = 0; i < std::max<std::size_t>(producers, 1); ++i) producers_.push_back(std::make_unique<Producer>(queue_));
  thread_ = std::thread([this] { run(); });
}

std::uint64_t Recorder::dropped() const {
  std::uint64_t n = 0;
  for (const auto& p : producers_) n += p->dropped();
  return n;
}

bool Recorder::pin(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return thread_.joinable() && ::pthread_setaffinity_np(thread_.native_handle(), sizeof one, &one) == 0;
}

int Recorder::stop() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(wake_mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
    file_.close();
  }
  return file_.error();
}

// The writer sleeps when the queue is empty instead of waiting on a semaphore:
// on small machines every core is needed by the agents, and a push must not make
// a system call. It sleeps kSleep after a pass that found records, and twice as
// long after each empty one, up to kIdleSleep: hundreds of agents waiting for
// their set-up or a long compute would otherwise wake 500 times a second each
// (a quarter of all CPU time with 256 agents on 2 cores). The longest sleep's
// records fit the queue: kMinPerProducer at a million records a second, or the
// whole run when the queue holds it (idle_sleep()).
void Recorder::run() {
  std::vector<Record> batch(4096);
  auto sleep = kSleep;
  for (;;) {
    const bool last = stopping_;  // read before draining: nothing is pushed after stop()
    std::size_t n;
    bool found = false;
    while ((n = queue_.try_dequeue_bulk(batch.data(), batch.size())) > 0) {
      found = true;
      if (ops_ != nullptr || flows_ != nullptr) {
        const auto op = [this](std::uint32_t i) { return ops_ != nullptr ? ops_->to_global(i) : i; };
        const auto flow = [this](std::uint32_t i) { return flows_ != nullptr ? flows_->to_global(i) : i; };
        for (std::size_t i = 0; i < n; ++i) batch[i].map_indices(op, flow);
      }
      file_.write(batch.data(), n);
    }
    if (last) break;
    sleep = found ? kSleep : std::min(sleep * 2, idle_sleep_);
    std::unique_lock lock(wake_mutex_);
    wake_.wait_for(lock, sleep, [this] { return stopping_.load(); });
  }
}

}  // namespace tw
