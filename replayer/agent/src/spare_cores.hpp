// Whether the machine has a core to spare: a receiving flow whose socket ran dry
// looks again before it sleeps (IncomingFlow::keep_looking()) only while it has.
//
// The look saves the wake-up that the next bytes would otherwise cost, paid on
// one host by the sender's core; it pays where the looking thread would leave its
// core idle. Where more threads are runnable than the machine has cores, a
// looking thread holds a core that another is waiting for: on one host, often the
// sender whose bytes it looks for. 16 flows between two agents of two I/O threads
// each on 2 cores moved 84% of four iperf3 processes' rate with the look and 94%
// without (docs/dataplane-analyses.md, 16 flows). Where the agent's I/O threads
// have cores of their own (--pin, --realtime) the agent does not ask (agent.cpp).
// An agent does not know what else runs on its machine (other agents started by
// hand, the job itself), so it asks the kernel: the running count of
// /proc/loadavg ("R/T", the threads runnable on all CPUs now, the reader
// included) against the CPUs online. It is read at most once per kEvery by each
// I/O thread (a pread, about 2 us here), and the answer held until then.
//
// System-wide: threads confined to some of the cores (taskset, a cpuset) can
// crowd them while the machine has cores to spare, a container held to a CPU
// quota (docker --cpus) sees the host's cores and count, and one whose
// /proc/loadavg is its own (lxcfs) counts only its threads. The read gap holds
// only while a flow looks (IncomingFlow::too_soon()): without a spare core,
// small messages are read as they come. Run summaries count the looks and the
// looks skipped. Where the count cannot be read, the flow looks as it did before
// (spare() is true).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "tensorwire/core/units.hpp"

namespace tw {

// The running count of a /proc/loadavg line ("0.13 0.66 0.99 2/345 12345"): the
// number before the slash of the fourth field. Nullopt for anything else.
inline std::optional<int> loadavg_running(std::string_view line) {
  std::size_t at = 0;
  for (int field = 0; field < 3; ++field) {
    at = line.find(' ', at);
    if (at == std::string_view::npos) return std::nullopt;
    ++at;
  }
  const std::string_view rest = line.substr(at);
  const std::size_t slash = rest.find('/');
  if (slash == 0 || slash == std::string_view::npos) return std::nullopt;
  int running = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + slash, running);
  if (ec != std::errc{} || end != rest.data() + slash || running < 0) return std::nullopt;
  return running;
}

// Reads the running count from /proc/loadavg, kept open. Single-threaded.
class LoadavgReader {
 public:
  LoadavgReader() : fd_(::open("/proc/loadavg", O_RDONLY | O_CLOEXEC)) {}
  ~LoadavgReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  LoadavgReader(LoadavgReader&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  LoadavgReader(const LoadavgReader&) = delete;
  LoadavgReader& operator=(const LoadavgReader&) = delete;
  LoadavgReader& operator=(LoadavgReader&&) = delete;

  std::optional<int> operator()() {
    if (fd_ < 0) return std::nullopt;
    char buf[128];
    const ssize_t n = ::pread(fd_, buf, sizeof buf, 0);  // generated afresh at offset 0
    if (n <= 0) return std::nullopt;
    return loadavg_running(std::string_view(buf, static_cast<std::size_t>(n)));
  }

 private:
  int fd_;
};

// The answer of `Read` (a callable returning optional<int>, the threads runnable
// now) against `cores`, asked at most once per `every`. Single-threaded: one per
// I/O thread.
template <class Read>
class SpareCores {
 public:
  static constexpr Nanos kEvery = 1000 * kMicro;

  explicit SpareCores(long cores, Read read = Read{}, Nanos every = kEvery) : cores_(cores), read_(std::move(read)), every_(every) {}

  // Whether no runnable thread waits for a core, as last read at most `every`
  // before `now` (monotonic). True when the count cannot be read.
  bool spare(Nanos now) {
    if (asked_ && now - asked_at_ < every_) return spare_;
    asked_ = true;
    asked_at_ = now;
    const std::optional<int> running = cores_ > 0 ? read_() : std::nullopt;
    spare_ = !running || *running <= cores_;
    return spare_;
  }

 private:
  long cores_;
  Read read_;
  Nanos every_;
  bool asked_ = false;
  Nanos asked_at_ = 0;
  bool spare_ = true;
};

using MachineSpareCores = SpareCores<LoadavgReader>;

}  // namespace tw
