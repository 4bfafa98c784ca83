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
      per_producer_(per_producer(producers, most)),
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

// The writer sleeps between passes instead of waiting on a semaphore: on small
// machines every core is needed by the agents, and a push must not make a system
// call. How long: next_sleep(), from what the last pass took. Hundreds of agents
// waiting for their set-up or a long compute, or a writer woken every few
// milliseconds for a handful of records, would take the cores the agents spin and
// send on.
void Recorder::run() {
  std::vector<Record> batch(4096);
  auto sleep = kSleep;
  for (;;) {
    const bool last = stopping_;  // read before draining: nothing is pushed after stop()
    std::size_t n;
    std::size_t taken = 0;
    while ((n = queue_.try_dequeue_bulk(batch.data(), batch.size())) > 0) {
      taken += n;
      if (ops_ != nullptr || flows_ != nullptr) {
        const auto op = [this](std::uint32_t i) { return ops_ != nullptr ? ops_->to_global(i) : i; };
        const auto flow = [this](std::uint32_t i) { return flows_ != nullptr ? flows_->to_global(i) : i; };
        for (std::size_t i = 0; i < n; ++i) batch[i].map_indices(op, flow);
      }
      file_.write(batch.data(), n);
    }
    if (last) break;
    sleep = next_sleep(sleep, taken, per_producer_, idle_sleep_);
    std::unique_lock lock(wake_mutex_);
    wake_.wait_for(lock, sleep, [this] { return stopping_.load(); });
  }
}

}  // namespace tw
