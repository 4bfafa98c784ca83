#include "recorder.hpp"

#include <chrono>
#include <vector>

namespace tw {

Recorder::Recorder(const std::string& path) : queue_(kCapacity, 1, 0), token_(queue_), file_(path), thread_([this] { run(); }) {}

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
    while ((n = queue_.try_dequeue_bulk(batch.data(), batch.size())) > 0) file_.write(batch.data(), n);
    if (last) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace tw
