#include "tensorwire/util/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tw {

void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& work) {
  if (n == 0) return;
  if (threads == 0) threads = std::max(1U, std::thread::hardware_concurrency());
  const std::size_t helpers = std::min<std::size_t>(threads, n) - 1;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  std::mutex first_mutex;
  const auto run = [&] {
    for (std::size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) {
      try {
        work(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(first_mutex);
        if (!first) first = std::current_exception();
        failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  try {
    for (std::size_t k = 0; k < helpers; ++k) pool.emplace_back(run);
  } catch (const std::system_error&) {
    // No more threads to be had: those started and this one do the work.
  }
  run();
  for (std::thread& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

unsigned threads_for(std::size_t n, std::size_t bytes_each, std::size_t budget) {
  const std::size_t cores = std::max(1U, std::thread::hardware_concurrency());
  std::size_t t = std::min(cores, std::max<std::size_t>(n, 1));
  if (bytes_each > 0) t = std::min(t, 1 + budget / bytes_each);
  return static_cast<unsigned>(std::max<std::size_t>(t, 1));
}

}  // namespace tw
