// A child process that cannot outlive its owner: it is killed (SIGKILL) when the
// owning object is destroyed while it still runs, and by the kernel if the parent
// dies (PR_SET_PDEATHSIG). Move-only.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace tw {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with argv. `keep_fd`, if >= 0, is passed to the
  // child as file descriptor 3; no other descriptor beyond stdio is inherited.
  // Throws std::runtime_error if the process cannot be started.
  static ChildProcess spawn(const std::vector<std::string>& argv, int keep_fd = -1);

  ChildProcess(ChildProcess&& o) noexcept : pid_(o.pid_), status_(o.status_) { o.pid_ = -1; }
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Non-blocking: the exit status once the child ended (see describe()).
  std::optional<int> poll();
  void signal(int sig);
  // Sends SIGTERM, waits up to `grace_ms`, then SIGKILL; reaps the child.
  void stop(int grace_ms);
  // "exited with status 1", "killed by signal 9".
  static std::string describe(int wait_status);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  std::optional<int> status_;
};

}  // namespace tw
