#include "tensorwire/util/parallel.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tw {

unsigned usable_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0) {
    return static_cast<unsigned>(CPU_COUNT(&allowed));
  }
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<unsigned>(online) : 1;
}

void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& work) {
  if (n == 0) return;
  if (threads == 0) threads = usable_cores();
  const std::size_t helpers = std::min<std::size_t>(threads, n) - 1;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  // The failure of the lowest piece, as one thread would have met it first:
  // pieces are taken in order, so every piece below a failed one was taken and
  // runs to its end, and none is taken after a failure.
  std::exception_ptr first;
  std::size_t first_at = n;
  std::mutex first_mutex;
  const auto run = [&] {
    for (std::size_t i; !failed.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) {
      try {
        work(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(first_mutex);
        if (i < first_at) first = std::current_exception(), first_at = i;
        failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  std::vector<std::thread> pool;
  try {
    pool.reserve(helpers);
    for (std::size_t k = 0; k < helpers; ++k) pool.emplace_back(run);
  } catch (...) {
    // No more threads (or memory for them) to be had: those started and this
    // one do the work.
  }
  run();
  for (std::thread& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

unsigned threads_for(std::size_t n, std::size_t bytes_each, std::size_t budget) {
  const std::size_t cores = usable_cores();
  std::size_t t = std::min(cores, std::max<std::size_t>(n, 1));
  if (bytes_each > 0) t = std::min(t, 1 + budget / bytes_each);
  return static_cast<unsigned>(std::max<std::size_t>(t, 1));
}

}  // namespace tw
