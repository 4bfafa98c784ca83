// Independent pieces of work on several threads: the what-if simulations of a
// diagnosis, each on its own copy of the graph.
#pragma once

#include <cstddef>
#include <functional>

namespace tw {

// The cores this process may run on: its affinity mask, as taskset or a
// container's cpuset leave it (std::thread::hardware_concurrency() counts every
// core online), else the cores online; at least 1. Processes it starts inherit
// the mask, so a controller and its local agents count alike.
unsigned usable_cores();

// Calls work(i) for every i in [0, n), on up to `threads` threads (the
// caller's among them; 0: one per core), each taking the next i as it
// finishes the one before. Returns once every call has returned. When calls
// throw, no further piece is begun, and the exception of the lowest piece that
// threw is rethrown here: the one a single thread would have met first.
// work(i) must only write what is its own (slot i of a result, say).
void parallel_for(std::size_t n, unsigned threads, const std::function<void(std::size_t)>& work);

// The threads to use for `n` pieces of `bytes_each` of memory each: one per
// core, no more than n, and no more than fit in `budget` bytes beside the
// first (at least one).
unsigned threads_for(std::size_t n, std::size_t bytes_each, std::size_t budget);

}  // namespace tw
