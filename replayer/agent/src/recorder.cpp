#include "recorder.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace tw {

namespace {
std::size_t per_producer(std::size_t producers) {
  return std::max<std::size_t>(Recorder::kMinPerProducer, Recorder::kCapacity / std::max<std::size_t>(producers, 1));
}
}  // namespace

Recorder::Recorder(const std::string& path, std::size_t producers, const OpIndexMap* ops)
    : queue_(per_producer(producers), std::max<std::size_t>(producers, 1), 0), ops_(ops != nullptr && !ops->identity() ? ops : nullptr), file_(path) {
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
    stopping_ = true;
    thread_.join();
    file_.close();
  }
  return file_.error();
}

// The writer sleeps when the queue is empty instead of waiting on a semaphore:
// on small machines every core is needed by the agents.
void Recorder::run() {
  std::vector<Record> batch(4096);
  for (;;) {
    const bool last = stopping_;  // read before draining: nothing is pushed after stop()
    std::size_t n;
    while ((n = queue_.try_dequeue_bulk(batch.data(), batch.size())) > 0) {
      if (ops_ != nullptr) {
        for (std::size_t i = 0; i < n; ++i) batch[i].map_op([this](std::uint32_t op) { return ops_->to_global(op); });
      }
      file_.write(batch.data(), n);
    }
    if (last) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace tw
