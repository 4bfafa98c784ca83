// A child process that cannot outlive its owner: it is killed (SIGKILL) when the
// owning object is destroyed while it still runs, and by the kernel if the parent
// dies (PR_SET_PDEATHSIG). Move-only.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "tensorwire/util/unique_fd.hpp"

namespace tw {

struct SpawnOptions {
  int keep_fd = -1;  // passed to the child as descriptor 3
  std::vector<std::string> env;  // "NAME=value" added to (or replacing in) the environment
  // If set, the child's stdin is a pipe that starts with this text and stays open
  // for as long as this object lives: the child sees end-of-file when its owner
  // goes, whichever way it goes.
  std::optional<std::string> stdin_text;
  std::string output_path;  // if set, stdout and stderr go to this file (appended)
  bool die_with_parent = true;  // PR_SET_PDEATHSIG: killed if this process dies
  // If set, the child starts in this network namespace (a name under /run/netns,
  // as `ip netns add` makes them): what `ip netns exec NAME` does for a program
  // that needs only the network, without a second program to start.
  std::string netns;
};

class ChildProcess {
 public:
  // Starts argv[0] (a path, or a name looked up in PATH) with argv. No descriptor
  // beyond stdio (and keep_fd) is inherited. Throws std::runtime_error (a
  // std::system_error naming the call when one failed) if the process cannot be
  // started.
  static ChildProcess spawn(const std::vector<std::string>& argv, const SpawnOptions& options);
  static ChildProcess spawn(const std::vector<std::string>& argv, int keep_fd = -1) {
    SpawnOptions o;
    o.keep_fd = keep_fd;
    return spawn(argv, o);
  }

  ChildProcess(ChildProcess&& o) noexcept : pid_(o.pid_), status_(o.status_), stdin_fd_(std::move(o.stdin_fd_)) { o.pid_ = -1; }
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // Non-blocking: the exit status once the child ended (see describe()).
  std::optional<int> poll();
  void signal(int sig);
  // Blocks until the child ends; its wait status.
  int wait();
  // Sends SIGTERM, waits up to `grace_ms`, then SIGKILL; reaps the child.
  void stop(int grace_ms);
  // "exited with status 1", "killed by signal 9".
  static std::string describe(int wait_status);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  std::optional<int> status_;
  UniqueFd stdin_fd_;  // our end of the child's stdin pipe
};

// Runs a command to its end within `timeout` (then kills it), capturing what it
// printed (stdout and stderr together). status: its wait status, or -1 if it
// was killed at the deadline.
struct CommandResult {
  int status = -1;
  std::string output;
  bool ok() const;
};
CommandResult run_command(const std::vector<std::string>& argv, long timeout_ms = 10000);

}  // namespace tw
