#include "tensorwire/launch/child_process.hpp"

#include <dirent.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <fstream>
#include <iterator>
#include <thread>

#include "tensorwire/util/system_call.hpp"
#include "tensorwire/util/temp_dir.hpp"

namespace tw {

namespace {

std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t at = 0;
  while (at <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', at), dirs.size());
    const std::string candidate = (end > at ? dirs.substr(at, end - at) : std::string(".")) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  throw std::runtime_error("cannot start " + name + ": not found in PATH");
}

}  // namespace

ChildProcess ChildProcess::spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty()) throw std::runtime_error("cannot start a process without a command");
  // Everything the child needs is prepared here: after vfork only system calls.
  const std::string exe = find_in_path(argv[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& x : options.env) replaced = replaced || x.substr(0, x.find('=')) == name;
    if (!replaced) env_storage.push_back(entry);
  }
  for (const auto& x : options.env) env_storage.push_back(x);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  UniqueFd stdin_read, stdin_write;
  if (options.stdin_text) {
    int fds[2] = {-1, -1};
    system_call("cannot start " + argv[0] + ": pipe", ::pipe2(fds, O_CLOEXEC));
    stdin_read.reset(fds[0]);
    stdin_write.reset(fds[1]);
  }
  UniqueFd out;
  if (!options.output_path.empty()) {
    out.reset(system_call(options.output_path + ": cannot create",
                          ::open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)));
  }
  UniqueFd ns;
  if (!options.netns.empty()) {
    if (options.netns.find('/') != std::string::npos || options.netns == "." || options.netns == "..") {
      throw std::runtime_error("cannot start " + argv[0] + ": \"" + options.netns + "\" is not a network namespace's name");
    }
    const std::string path = "/run/netns/" + options.netns;
    ns.reset(system_call("cannot start " + argv[0] + " in network namespace " + options.netns + ": " + path,
                         ::open(path.c_str(), O_RDONLY | O_CLOEXEC)));
  }
  const int ns_fd = ns.get();
  const int in_fd = stdin_read.get();
  const int out_fd = out.get();
  const int keep_fd = options.keep_fd;
  const bool die_with_parent = options.die_with_parent;
  const pid_t parent = ::getpid();
  // vfork: the child borrows this process's memory until it execs, instead of a
  // copy of its page tables that exec throws away at once. A controller holding a
  // large profile spent a third of its launch time copying and unmapping them
  // (256 agents). This thread waits meanwhile. No signal handler of ours may run
  // in the child, on our memory: signals stay blocked until the child has put
  // every handler back to its default.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  const pid_t pid = ::vfork();
  if (pid == 0) {
    // Only system calls from here to exec, on values computed above (no
    // allocation, no destructor, no return: exec or _exit).
    for (int sig = 1; sig < NSIG; ++sig) {
      struct sigaction sa {};
      if (::sigaction(sig, nullptr, &sa) != 0 || sa.sa_handler == SIG_IGN || sa.sa_handler == SIG_DFL) continue;
      ::sigemptyset(&sa.sa_mask);
      sa.sa_flags = 0;
      sa.sa_handler = SIG_DFL;
      ::sigaction(sig, &sa, nullptr);
    }
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    if (die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    }
    if (ns_fd >= 0 && ::setns(ns_fd, CLONE_NEWNET) != 0) ::_exit(127);
    if (in_fd >= 0 && ::dup2(in_fd, 0) < 0) ::_exit(127);
    if (out_fd >= 0 && (::dup2(out_fd, 1) < 0 || ::dup2(out_fd, 2) < 0)) ::_exit(127);
    if (keep_fd >= 0 && keep_fd != 3) {
      if (::dup2(keep_fd, 3) < 0) ::_exit(127);
    }
    const int first = keep_fd >= 0 ? 4 : 3;
    ::close_range(static_cast<unsigned>(first), ~0U, 0);
    if (keep_fd >= 0) ::fcntl(3, F_SETFD, 0);
    ::execve(exe.c_str(), args.data(), envp.data());
    ::_exit(127);
  }
  const int vfork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    errno = vfork_errno;
    system_call("cannot start " + argv[0] + ": vfork", -1);
  }
  stdin_read.reset();  // the child's end
  out.reset();
  ns.reset();
  ChildProcess child(pid);
  if (options.stdin_text) {
    child.stdin_fd_ = std::move(stdin_write);
    // A short text fits the pipe's buffer: this never blocks.
    const std::string& t = *options.stdin_text;
    std::size_t off = 0;
    while (off < t.size()) {
      const ssize_t n = ::write(child.stdin_fd_.get(), t.data() + off, t.size() - off);
      if (n <= 0) break;  // the child is gone already: poll() will tell
      off += static_cast<std::size_t>(n);
    }
  }
  return child;
}

ChildProcess::~ChildProcess() {
  stdin_fd_.reset();
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
}

std::optional<int> ChildProcess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) status_ = st;
  return status_;
}

int ChildProcess::wait() {
  while (!status_ && pid_ > 0) {
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, 0);
    if (r == pid_) status_ = st;
    else if (r < 0 && errno != EINTR) status_ = 0;
  }
  return status_.value_or(0);
}

void ChildProcess::signal(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

void ChildProcess::stop(int grace_ms) {
  if (pid_ <= 0 || poll()) return;
  ::kill(pid_, SIGTERM);
  ::kill(pid_, SIGCONT);  // a stopped process handles the SIGTERM only once continued
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (poll()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  int st = 0;
  ::waitpid(pid_, &st, 0);
  status_ = st;
}

std::string ChildProcess::describe(int st) {
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by signal ") + std::to_string(WTERMSIG(st)) + " (" + ::strsignal(WTERMSIG(st)) + ")";
  return "ended";
}

bool CommandResult::ok() const { return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

CommandResult run_command(const std::vector<std::string>& argv, long timeout_ms) {
  const TempDir dir("tensorwire-cmd");
  const std::string path = dir.path() + "/output";
  CommandResult r;
  {
    SpawnOptions so;
    so.output_path = path;
    ChildProcess child = ChildProcess::spawn(argv, so);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    std::optional<int> st;
    while (!(st = child.poll()) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (st) r.status = *st;  // else the destructor kills it
  }
  if (std::ifstream in(path, std::ios::binary); in) r.output.assign(std::istreambuf_iterator<char>(in), {});
  while (!r.output.empty() && (r.output.back() == '\n' || r.output.back() == ' ')) r.output.pop_back();
  return r;
}

}  // namespace tw
