// libtensorwire_capture.so: preloaded into a job (LD_PRELOAD), it records every
// socket call on TCP connections: thread, fd, connection, the byte range of the
// stream it moved, enter and exit times, result and errno, and TCP_INFO at send
// calls. docs/trace-format.md describes what it writes.
//
// Rules it keeps, so that the job behaves exactly as without it:
// - every call goes to the real function with the same arguments, and returns its
//   result with its errno;
// - nothing blocks: events go through a bounded lock-free queue to a writer
//   thread, and are dropped (and counted) when it is full;
// - for an fd that is not a TCP socket the cost is one relaxed atomic load (after a
//   single getsockopt the first time the fd is seen);
// - fork gets a fresh writer in the child; exec keeps the preload through the
//   environment; exit and _exit flush;
// - it never writes into the job's descriptors: the writer thread keeps its files
//   in an fd table of its own (close_range's CLOSE_RANGE_UNSHARE), so the job's
//   close, closerange, dup2 or fd numbers cannot reach them; where the kernel
//   refuses that, the files sit at a high number, the interposed close family
//   keeps the job off them (a dup2 onto one waits for the write in progress, then
//   moves the file), and each write is preceded by an identity check (st_dev,
//   st_ino), dropping and counting what cannot be written.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/close_range.h>
#include <linux/tcp.h>  // the kernel's tcp_info (glibc's lacks the newer fields)
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <concurrentqueue/concurrentqueue.h>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/binary_file.hpp"
#include "tensorwire/core/trace_format.hpp"

#define TW_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using tw::trace::Call;
using tw::trace::Event;
using tw::trace::Kind;

// ---- the real functions -------------------------------------------------------

struct Real {
  int (*socket)(int, int, int);
  int (*connect)(int, const sockaddr*, socklen_t);
  int (*accept)(int, sockaddr*, socklen_t*);
  int (*accept4)(int, sockaddr*, socklen_t*, int);
  int (*close)(int);
  int (*shutdown)(int, int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  ssize_t (*send)(int, const void*, size_t, int);
  ssize_t (*sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
  ssize_t (*sendmsg)(int, const msghdr*, int);
  int (*sendmmsg)(int, mmsghdr*, unsigned, int);
  ssize_t (*write)(int, const void*, size_t);
  ssize_t (*writev)(int, const iovec*, int);
  ssize_t (*read)(int, void*, size_t);
  ssize_t (*readv)(int, const iovec*, int);
  ssize_t (*recv)(int, void*, size_t, int);
  ssize_t (*recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
  ssize_t (*recvmsg)(int, msghdr*, int);
  int (*getsockopt)(int, int, int, void*, socklen_t*);
  void (*exit_)(int);
  int (*kill)(pid_t, int);
  int (*raise)(int);
};
Real real;
std::atomic<bool> resolved{false};

template <typename F>
void resolve_one(F& f, const char* name) {
  f = reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

void resolve() {
  if (resolved.load(std::memory_order_acquire)) return;
  resolve_one(real.connect, "connect");
  resolve_one(real.socket, "socket");
  resolve_one(real.accept, "accept");
  resolve_one(real.accept4, "accept4");
  resolve_one(real.close, "close");
  resolve_one(real.shutdown, "shutdown");
  resolve_one(real.dup2, "dup2");
  resolve_one(real.dup3, "dup3");
  resolve_one(real.send, "send");
  resolve_one(real.sendto, "sendto");
  resolve_one(real.sendmsg, "sendmsg");
  resolve_one(real.sendmmsg, "sendmmsg");
  resolve_one(real.write, "write");
  resolve_one(real.writev, "writev");
  resolve_one(real.read, "read");
  resolve_one(real.readv, "readv");
  resolve_one(real.recv, "recv");
  resolve_one(real.recvfrom, "recvfrom");
  resolve_one(real.recvmsg, "recvmsg");
  resolve_one(real.getsockopt, "getsockopt");
  resolve_one(real.exit_, "_exit");
  resolve_one(real.kill, "kill");
  resolve_one(real.raise, "raise");
  resolved.store(true, std::memory_order_release);
}

std::int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

__thread std::uint32_t tls_tid __attribute__((tls_model("initial-exec"))) = 0;
std::uint32_t tid() {
  if (tls_tid == 0) tls_tid = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  return tls_tid;
}

// ---- fds and connections ----------------------------------------------------------

constexpr int kMaxFd = 1 << 16;
constexpr std::uint32_t kMaxConn = 1 << 16;
enum : std::uint8_t { kUnknown = 0, kOther = 1, kTcp = 2 };
std::atomic<std::uint8_t> fd_kind[kMaxFd];
std::atomic<std::uint32_t> fd_conn[kMaxFd];

struct Conn {
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::int64_t> last_info{0};
  std::atomic<bool> announced{false};
  std::atomic<tw::trace::ConnOrigin> how{tw::trace::ConnOrigin::in_use};
  // The process whose connect() left it in progress (0: none): it is announced at
  // the latest when it is closed or the process exits, data or not.
  std::atomic<int> pending_in{0};
};
Conn conns[kMaxConn];
std::atomic<std::uint32_t> next_conn{1};

std::atomic<std::uint64_t> dropped{0};
std::atomic<std::uint64_t> untracked{0};  // fds or connections beyond the tables

// ---- the queue and its writer -----------------------------------------------------

struct Slot {
  unsigned char b[64];
};
constexpr std::size_t kQueueCapacity = 1 << 16;
using Queue = moodycamel::ConcurrentQueue<Slot>;
std::atomic<Queue*> queue{nullptr};
enum : int { kIdle = 0, kStarting = 1, kRunning = 2, kFailed = 3 };
std::atomic<int> writer_state{kIdle};
std::atomic<std::uint64_t> pushed{0};
std::atomic<std::uint64_t> done{0};     // taken off the queue: written or dropped
std::atomic<std::uint64_t> written{0};  // in the file
pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
char out_dir[4096];
std::atomic<bool> enabled{false};
bool samples_on = true;       // TW_CAPTURE_SAMPLES=0: no sample events
bool own_fd_table = true;     // TW_CAPTURE_SHARED_FDS=1: the fallback, as where the kernel refuses a table of its own
std::int64_t started_ns = 0;
constexpr std::int64_t kTcpInfoEveryNs = 1'000'000;  // TCP_INFO at most once a millisecond per connection
// Descriptions asked for by the job's threads (at exit, before a signal), written
// by the writer once everything pushed before the request is out.
std::atomic<std::uint64_t> desc_requested{0}, desc_done{0}, desc_target{0};
std::atomic<bool> desc_final{false};

// ---- the writer's own files ---------------------------------------------------------
// Only the writer thread opens, writes and closes them. With a table of its own
// (close_range(CLOSE_RANGE_UNSHARE) at its start) their numbers do not exist in
// the job's table; without one (an old kernel, a seccomp filter) they are moved
// to a high number, and every write first checks that the number still holds the
// file opened (a job may close it with a raw syscall and reuse the number).

// Slot 0: the event file; slot 1: a description being written, or
// /proc/self/cmdline being read. With a shared table their numbers are published
// for the interposed close, close_range, closefrom, dup2 and dup3, which keep the
// job's calls off them: to the job they are not open (EBADF), and a dup2 onto
// one moves the shim's file to another number first.
constexpr int kSlots = 2;
std::atomic<int> published[kSlots] = {-1, -1};
dev_t published_dev[kSlots];
ino_t published_ino[kSlots];
// Shared table only: held by the writer from its identity check to the end of its
// write, and by a job's dup2 onto a published number while it moves the file.
pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;

struct OwnFile {
  int slot = 0;
  int fd = -1;
  dev_t dev = 0;
  ino_t ino = 0;
};
bool private_table = false;
OwnFile trace_file;
char stem[4200];  // DIR/trace-PID[-HOST[-N]]: the process's two files without their extensions

class OwnLock {
 public:
  OwnLock() {
    if (!private_table) pthread_mutex_lock(&own_lock);
  }
  ~OwnLock() {
    if (!private_table) pthread_mutex_unlock(&own_lock);
  }
  OwnLock(const OwnLock&) = delete;
  OwnLock& operator=(const OwnLock&) = delete;
};

int high_floor() {
  rlimit rl{};
  const rlim_t lim = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
  return static_cast<int>(std::min<rlim_t>(lim, 1024)) - 32;  // above what jobs open, below the usual limit
}

bool own_open(OwnFile& f, const char* path, int flags, int slot) {
  int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, 0600));
  if (fd < 0) return false;
  if (!private_table) {
    const int floor = high_floor();
    if (floor > fd) {
      const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, floor);
      if (high >= 0) {
        ::syscall(SYS_close, fd);
        fd = high;
      }
    }
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    ::syscall(SYS_close, fd);
    return false;
  }
  f = {slot, fd, st.st_dev, st.st_ino};
  if (!private_table) {
    OwnLock lock;
    published_dev[slot] = st.st_dev;
    published_ino[slot] = st.st_ino;
    published[slot].store(fd, std::memory_order_release);
  }
  return true;
}

// Whether f's number (where a job's dup2 may have moved it) still holds the file
// it opened. Under OwnLock with a shared table.
bool still_ours(OwnFile& f) {
  if (!private_table && f.fd >= 0) f.fd = published[f.slot].load(std::memory_order_acquire);
  struct stat st{};
  return f.fd >= 0 && ::fstat(f.fd, &st) == 0 && st.st_dev == f.dev && st.st_ino == f.ino;
}

void own_close(OwnFile& f) {
  OwnLock lock;
  if (still_ours(f)) ::syscall(SYS_close, f.fd);  // never a number that is the job's now
  if (!private_table) published[f.slot].store(-1, std::memory_order_release);
  f.fd = -1;
}

ssize_t raw_write(int fd, const void* p, std::size_t n) { return ::syscall(SYS_write, fd, p, n); }

// False when nothing more can go to f: it is not ours any more, or the disk is
// full (the trace ends there; the job goes on).
bool write_all(OwnFile& f, const void* p, std::size_t n) {
  OwnLock lock;
  if (!still_ours(f)) return false;
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = raw_write(f.fd, c, n);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return false;
    }
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// The job's side: whether a number is one of the shim's (shared table only).
bool is_shim_fd(int fd) {
  if (fd < 0) return false;
  for (const auto& p : published) {
    if (p.load(std::memory_order_relaxed) == fd) return true;
  }
  return false;
}

// Before a job's dup2/dup3 onto a shim number: the shim's file goes to another.
void move_shim_fd_from(int fd) {
  pthread_mutex_lock(&own_lock);
  for (auto& p : published) {
    if (p.load(std::memory_order_relaxed) != fd) continue;
    int to = ::fcntl(fd, F_DUPFD_CLOEXEC, high_floor());
    if (to < 0) to = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    p.store(to, std::memory_order_release);  // -1: lost; the writer opens its file again
  }
  pthread_mutex_unlock(&own_lock);
}

// After a failed dup2/dup3: the old number still holds the shim's moved file; the
// job never opened it.
void drop_moved_copy(int fd) {
  pthread_mutex_lock(&own_lock);
  struct stat st{};
  if (::fstat(fd, &st) == 0) {
    for (int k = 0; k < kSlots; ++k) {
      if (published[k].load(std::memory_order_relaxed) >= 0 && published[k].load(std::memory_order_relaxed) != fd &&
          st.st_dev == published_dev[k] && st.st_ino == published_ino[k]) {
        ::syscall(SYS_close, fd);
        break;
      }
    }
  }
  pthread_mutex_unlock(&own_lock);
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += static_cast<char>(c);
    else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += static_cast<char>(c);
  }
  return o;
}

std::string read_small_file(const char* path) {
  OwnFile f;
  if (!own_open(f, path, O_RDONLY, 1)) return {};
  std::string s;
  char b[4096];
  while (s.size() < 65536) {
    OwnLock lock;
    const ssize_t n = still_ours(f) ? ::syscall(SYS_read, f.fd, b, sizeof b) : -1;
    if (n <= 0) break;
    s.append(b, static_cast<std::size_t>(n));
  }
  own_close(f);
  return s;
}

void host_name(char* out, std::size_t size) {
  std::memset(out, 0, size);
  ::gethostname(out, size - 1);
}

// The process description, written when the writer starts and when the job asks
// (at exit), by the writer.
void write_description(bool final) {
  char path[4300], tmp[4400];
  std::snprintf(path, sizeof path, "%s%s", stem, tw::capture_dir::kDescriptionExtension);
  std::snprintf(tmp, sizeof tmp, "%s.tmp", path);
  std::string cmd = read_small_file("/proc/self/cmdline");
  std::string args = "[";
  std::size_t at = 0;
  while (at < cmd.size()) {
    const std::size_t end = cmd.find('\0', at);
    const std::string a = cmd.substr(at, end == std::string::npos ? std::string::npos : end - at);
    args += (args.size() > 1 ? ", \"" : "\"") + json_escape(a) + "\"";
    if (end == std::string::npos) break;
    at = end + 1;
  }
  args += "]";
  char host[256];
  host_name(host, sizeof host);
  std::string env = "{";
  for (const char* k : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TW_ROLE", "OMPI_COMM_WORLD_RANK"}) {
    if (const char* v = std::getenv(k)) env += std::string(env.size() > 1 ? ", " : "") + "\"" + k + "\": \"" + json_escape(v) + "\"";
  }
  env += "}";
  char body[1024];
  std::snprintf(body, sizeof body,
                "\"pid\": %d,\n  \"ppid\": %d,\n  \"host\": \"%s\",\n  \"clock\": \"CLOCK_REALTIME\",\n"
                "  \"started_ns\": %lld,\n  \"final\": %s,\n  \"events_written\": %llu,\n  \"events_dropped\": %llu,\n"
                "  \"untracked\": %llu,\n  \"samples\": %s,\n  \"fd_table\": \"%s\",\n  \"wire\": \"none\",\n",
                static_cast<int>(::getpid()), static_cast<int>(::getppid()), json_escape(host).c_str(),
                static_cast<long long>(started_ns), final ? "true" : "false",
                static_cast<unsigned long long>(written.load()), static_cast<unsigned long long>(dropped.load()),
                static_cast<unsigned long long>(untracked.load()), samples_on ? "true" : "false",
                private_table ? "own" : "shared");
  const std::string text = "{\n  \"format\": \"tensorwire-trace\",\n  \"version\": 1,\n  " + std::string(body) +
                           "  \"env\": " + env + ",\n  \"cmdline\": " + args + "\n}\n";
  OwnFile f;
  if (!own_open(f, tmp, O_WRONLY | O_CREAT | O_TRUNC, 1)) return;
  const bool ok = write_all(f, text.data(), text.size());
  own_close(f);
  if (ok) ::rename(tmp, path);
}

// The process's event file, created exclusively: a pid already used in DIR (an
// exec'd process keeps its pid; another host's process in a shared DIR) gets the
// host's name and then a number after it.
bool open_trace_file() {
  char host[64];
  host_name(host, sizeof host);
  for (char* c = host; *c; ++c) {
    if (!std::isalnum(static_cast<unsigned char>(*c)) && *c != '-' && *c != '_' && *c != '.') *c = '_';
  }
  const int pid = static_cast<int>(::getpid());
  const char* prefix = tw::capture_dir::kTracePrefix;
  for (int k = 0; k < 100; ++k) {
    if (k == 0) std::snprintf(stem, sizeof stem, "%s/%s%d", out_dir, prefix, pid);
    else if (k == 1) std::snprintf(stem, sizeof stem, "%s/%s%d-%s", out_dir, prefix, pid, host);
    else std::snprintf(stem, sizeof stem, "%s/%s%d-%s-%d", out_dir, prefix, pid, host, k);
    char path[4300];
    std::snprintf(path, sizeof path, "%s%s", stem, tw::capture_dir::kEventsExtension);
    if (own_open(trace_file, path, O_WRONLY | O_CREAT | O_EXCL, 0)) return true;
    if (errno != EEXIST) return false;
  }
  return false;
}

// A closed or reused number (the fallback's risk): the file is opened again by
// its name, and used only if it is the same file.
bool reopen_trace_file() {
  {
    OwnLock lock;
    if (still_ours(trace_file)) return true;
  }
  OwnFile f;
  char path[4300];
  std::snprintf(path, sizeof path, "%s%s", stem, tw::capture_dir::kEventsExtension);
  if (!own_open(f, path, O_WRONLY | O_APPEND, 0)) return false;
  if (f.dev != trace_file.dev || f.ino != trace_file.ino) {
    own_close(f);
    return false;
  }
  trace_file = f;
  return true;
}

void write_events(const Slot* batch, std::size_t n) {
  if (reopen_trace_file() && write_all(trace_file, batch, n * sizeof(Slot))) written.fetch_add(n, std::memory_order_relaxed);
  else dropped.fetch_add(n, std::memory_order_relaxed);
  done.fetch_add(n, std::memory_order_release);
}

void answer_description_requests() {
  const std::uint64_t req = desc_requested.load(std::memory_order_acquire);
  if (desc_done.load(std::memory_order_relaxed) >= req || done.load(std::memory_order_acquire) < desc_target.load(std::memory_order_acquire)) return;
  write_description(desc_final.load(std::memory_order_acquire));
  desc_done.store(req, std::memory_order_release);
}

void writer_loop() {
  // Before anything is opened: the job's descriptors are not in this thread's table.
  private_table = own_fd_table && ::syscall(SYS_close_range, 0U, ~0U, CLOSE_RANGE_UNSHARE) == 0;
  if (!open_trace_file()) {
    enabled.store(false);  // nowhere to write: stay out of the way
    writer_state.store(kFailed, std::memory_order_release);
    return;
  }
  const auto header = tw::binary_file::encode_header(tw::trace::kMagic, tw::trace::kVersion, sizeof(tw::trace::Event));
  write_all(trace_file, header.data(), header.size());
  started_ns = now_ns();
  write_description(false);
  writer_state.store(kRunning, std::memory_order_release);
  Slot batch[256];
  for (;;) {
    Queue* q = queue.load(std::memory_order_acquire);
    const std::size_t n = q ? q->try_dequeue_bulk(batch, 256) : 0;
    if (n > 0) {
      write_events(batch, n);
      answer_description_requests();
      continue;
    }
    answer_description_requests();
    timespec ts{0, 1'000'000};  // 1 ms: what a crash can lose
    ::nanosleep(&ts, nullptr);
  }
}

// Starts the writer at the first event: processes that never touch TCP get no
// thread and no file. Events pushed while it starts wait in the queue.
bool ensure_writer() {
  const int st = writer_state.load(std::memory_order_acquire);
  if (st == kRunning || st == kStarting) return true;
  if (st == kFailed || !enabled.load(std::memory_order_relaxed)) return false;
  pthread_mutex_lock(&start_lock);
  if (writer_state.load(std::memory_order_relaxed) == kIdle) {
    if (!queue.load()) queue.store(new Queue(kQueueCapacity));
    writer_state.store(kStarting, std::memory_order_release);
    try {
      std::thread(writer_loop).detach();
    } catch (...) {
      writer_state.store(kFailed, std::memory_order_release);
    }
  }
  pthread_mutex_unlock(&start_lock);
  return writer_state.load(std::memory_order_acquire) != kFailed;
}

void push(const void* event) {
  if (!ensure_writer()) return;
  Slot s;
  std::memcpy(s.b, event, 64);
  // The bound is ours: events not yet written. (moodycamel's try_enqueue also
  // fails for a thread's first events, which need a little bookkeeping memory.)
  if (pushed.load(std::memory_order_relaxed) - done.load(std::memory_order_relaxed) >= kQueueCapacity ||
      !queue.load(std::memory_order_acquire)->enqueue(s)) {
    dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  pushed.fetch_add(1, std::memory_order_release);
}

void announce_pending();

// Waits (at most ~1 s) until the writer has written everything queued so far
// and the process description after it; the writer keeps running.
void flush(bool final) {
  const int saved = errno;
  if (final) announce_pending();
  const auto running = [] {
    const int st = writer_state.load(std::memory_order_acquire);
    return st == kRunning || st == kStarting;
  };
  if (!running()) {
    errno = saved;
    return;
  }
  const std::uint64_t target = pushed.load(std::memory_order_acquire);
  std::uint64_t t = desc_target.load();
  while (t < target && !desc_target.compare_exchange_weak(t, target)) {
  }
  if (final) desc_final.store(true, std::memory_order_release);
  const std::uint64_t req = desc_requested.fetch_add(1, std::memory_order_acq_rel) + 1;
  for (int i = 0; i < 1000 && running() && desc_done.load(std::memory_order_acquire) < req; ++i) {
    timespec ts{0, 1'000'000};
    ::nanosleep(&ts, nullptr);
  }
  errno = saved;
}

// At exit: everything written, the final description. The writer is left to
// the process's end (a late event from another thread still finds a queue).
void flush_and_stop() { flush(true); }

void after_fork_in_child() {
  // The parent's writer thread does not exist here, and its queue may have been
  // mid-operation: start over with a fresh one (the old one is left alone). With
  // the fallback's shared table the parent's file came along: not this one's.
  own_lock = PTHREAD_MUTEX_INITIALIZER;
  if (!private_table) {
    OwnFile f;
    for (int k = 0; k < kSlots; ++k) {
      f = {k, published[k].load(), published_dev[k], published_ino[k]};
      own_close(f);
    }
  }
  trace_file = {};
  writer_state.store(kIdle);
  queue.store(nullptr);
  pushed.store(0);
  done.store(0);
  written.store(0);
  dropped.store(0);
  desc_requested.store(0);
  desc_done.store(0);
  desc_target.store(0);
  desc_final.store(false);
  tls_tid = 0;
  start_lock = PTHREAD_MUTEX_INITIALIZER;
}

__attribute__((constructor)) void init() {
  resolve();
  const char* dir = std::getenv("TW_CAPTURE_DIR");
  if (dir && *dir && std::strlen(dir) < sizeof out_dir) {
    std::strcpy(out_dir, dir);
    enabled.store(true);
  }
  if (const char* s = std::getenv("TW_CAPTURE_SAMPLES")) samples_on = std::strcmp(s, "0") != 0;
  if (const char* s = std::getenv("TW_CAPTURE_SHARED_FDS")) own_fd_table = std::strcmp(s, "1") != 0;
  ::pthread_atfork(nullptr, nullptr, after_fork_in_child);
}

__attribute__((destructor)) void fini() { flush_and_stop(); }

// ---- classification and events -------------------------------------------------

std::uint32_t conn_id(int fd);

// how: unknown means as connect() left it (or found in use).
void announce(int fd, std::uint32_t id, tw::trace::ConnOrigin how) {
  // Called on every traced call: a plain load first, so the common case writes nothing.
  if (conns[id].announced.load(std::memory_order_relaxed) || conns[id].announced.exchange(true)) return;
  if (how == tw::trace::ConnOrigin::unknown) how = conns[id].how.load(std::memory_order_relaxed);  // as connect/accept left it
  tw::trace::ConnEvent e{};
  e.kind = Kind::conn;
  e.fd = fd;
  e.conn = id;
  e.tid = tid();
  e.at_ns = now_ns();
  e.how = how;
  sockaddr_storage l{}, r{};
  socklen_t ll = sizeof l, rl = sizeof r;
  const int saved = errno;
  const bool ok = ::getsockname(fd, reinterpret_cast<sockaddr*>(&l), &ll) == 0 && ::getpeername(fd, reinterpret_cast<sockaddr*>(&r), &rl) == 0;
  errno = saved;
  if (!ok) {
    conns[id].announced.store(false);  // not connected yet: try again at the next call
    return;
  }
  e.family = l.ss_family;
  if (l.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&l);
    const auto* b = reinterpret_cast<const sockaddr_in*>(&r);
    std::memcpy(e.local, &a->sin_addr, 4);
    std::memcpy(e.remote, &b->sin_addr, 4);
    e.local_port = ntohs(a->sin_port);
    e.remote_port = ntohs(b->sin_port);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&l);
    const auto* b = reinterpret_cast<const sockaddr_in6*>(&r);
    std::memcpy(e.local, &a->sin6_addr, 16);
    std::memcpy(e.remote, &b->sin6_addr, 16);
    e.local_port = ntohs(a->sin6_port);
    e.remote_port = ntohs(b->sin6_port);
  }
  push(&e);
}

// The connection id of a TCP socket fd, 0 for anything else. The first look at
// an fd costs one getsockopt; after that, an atomic load.
std::uint32_t conn_id(int fd) {
  if (!enabled.load(std::memory_order_relaxed) || fd < 0 || fd >= kMaxFd) return 0;
  const std::uint8_t k = fd_kind[fd].load(std::memory_order_relaxed);
  if (k == kOther) return 0;
  if (k == kTcp) return fd_conn[fd].load(std::memory_order_relaxed);
  const int saved = errno;
  int type = 0, domain = 0, proto = 0;
  socklen_t len = sizeof type;
  bool tcp = real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
  if (!tcp && errno == EBADF) {
    errno = saved;
    return 0;  // not open: nothing to cache
  }
  len = sizeof domain;
  tcp = tcp && real.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && (domain == AF_INET || domain == AF_INET6);
  len = sizeof proto;
  tcp = tcp && real.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) == 0 && proto == IPPROTO_TCP;
  errno = saved;
  if (!tcp) {
    fd_kind[fd].store(kOther, std::memory_order_relaxed);
    return 0;
  }
  const std::uint32_t id = next_conn.fetch_add(1);
  if (id >= kMaxConn) {
    untracked.fetch_add(1);
    fd_kind[fd].store(kOther, std::memory_order_relaxed);
    return 0;
  }
  fd_conn[fd].store(id, std::memory_order_relaxed);
  fd_kind[fd].store(kTcp, std::memory_order_release);
  return id;
}

void forget(int fd) {
  if (fd < 0 || fd >= kMaxFd) return;
  fd_kind[fd].store(kUnknown, std::memory_order_relaxed);
  fd_conn[fd].store(0, std::memory_order_relaxed);
}

// At exit: the connections this process's non-blocking connects opened and
// nothing announced yet (never used, never closed).
void announce_pending() {
  const int me = static_cast<int>(::getpid());
  for (int fd = 0; fd < kMaxFd; ++fd) {
    if (fd_kind[fd].load(std::memory_order_relaxed) != kTcp) continue;
    const std::uint32_t id = fd_conn[fd].load(std::memory_order_relaxed);
    if (id != 0 && conns[id].pending_in.load(std::memory_order_relaxed) == me) announce(fd, id, tw::trace::ConnOrigin::unknown);
  }
}

void tcp_info_at_send(int fd, std::uint32_t id, std::int64_t t) {
  Conn& c = conns[id];
  if (t - c.last_info.load(std::memory_order_relaxed) < kTcpInfoEveryNs) return;
  c.last_info.store(t, std::memory_order_relaxed);
  tcp_info ti{};
  socklen_t len = sizeof ti;
  const int saved = errno;
  const bool ok = real.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0;
  errno = saved;
  if (!ok) return;
  tw::trace::TcpInfoEvent e{};
  e.kind = Kind::tcp_info;
  e.fd = fd;
  e.conn = id;
  e.tid = tid();
  e.at_ns = t;
  e.notsent_bytes = ti.tcpi_notsent_bytes;
  e.unacked = ti.tcpi_unacked;
  e.snd_cwnd = ti.tcpi_snd_cwnd;
  e.rtt_us = ti.tcpi_rtt;
  e.total_retrans = ti.tcpi_total_retrans;
  e.busy_us = static_cast<std::uint32_t>(ti.tcpi_busy_time);
  e.rwnd_limited_us = static_cast<std::uint32_t>(ti.tcpi_rwnd_limited);
  e.sndbuf_limited_us = static_cast<std::uint32_t>(ti.tcpi_sndbuf_limited);
  e.bytes_acked = ti.tcpi_bytes_acked;
  push(&e);
}

// The common part of every I/O event.
Event make_event(Kind kind, Call call, int fd, std::uint32_t id, std::int64_t t0, std::int64_t t1, std::int64_t r, int err,
                 std::uint64_t requested) {
  Event e{};
  e.kind = kind;
  e.call = call;
  e.fd = fd;
  e.conn = id;
  e.tid = tid();
  e.enter_ns = t0;
  e.exit_ns = t1;
  e.result = r;
  e.requested = requested;
  if (r < 0) {
    e.flags |= tw::trace::kFlagError;
    e.err = err;
  }
  return e;
}

// What a send call sent from: its iovecs, or (sendmmsg) its messages' iovecs,
// each message counting only the msg_len bytes it moved.
struct SentData {
  const iovec* iov = nullptr;
  std::size_t iov_count = 0;
  const mmsghdr* msgs = nullptr;
  std::size_t msg_count = 0;
};

// Bytes [at, at + n) of a call's data, copied into out.
struct Piece {
  std::size_t at, n;
  unsigned char* out;
};

// Copies what falls into this iovec array of the pieces; its first byte is the
// call's byte `base`, and it moved at most `limit` bytes. Returns the bytes it moved.
std::size_t copy_pieces(const iovec* iov, std::size_t count, std::size_t limit, std::size_t base, Piece* pieces, int n_pieces) {
  std::size_t moved = 0;
  for (std::size_t i = 0; i < count && moved < limit; ++i) {
    const std::size_t len = std::min(iov[i].iov_len, limit - moved);
    const std::size_t lo_seg = base + moved, hi_seg = lo_seg + len;
    for (int k = 0; k < n_pieces; ++k) {
      const std::size_t lo = std::max(pieces[k].at, lo_seg), hi = std::min(pieces[k].at + pieces[k].n, hi_seg);
      if (lo < hi) std::memcpy(pieces[k].out + (lo - pieces[k].at), static_cast<const unsigned char*>(iov[i].iov_base) + (lo - lo_seg), hi - lo);
    }
    moved += len;
  }
  return moved;
}

// The first and last bytes of what a send call moved (docs/trace-format.md).
void record_sample(std::uint32_t id, std::uint64_t offset, std::size_t moved, const SentData& d) {
  tw::trace::SampleEvent e{};
  e.kind = Kind::sample;
  e.conn = id;
  e.offset = offset;
  const std::size_t head = std::min(moved, tw::trace::kSampleHead);
  const std::size_t tail = std::min(moved - head, tw::trace::kSampleTail);
  e.head_len = static_cast<std::uint8_t>(head);
  e.tail_len = static_cast<std::uint8_t>(tail);
  Piece pieces[2] = {{0, head, e.head}, {moved - tail, tail, e.tail}};
  if (d.msgs) {
    std::size_t base = 0;
    for (std::size_t m = 0; m < d.msg_count && base < moved; ++m) {
      base += copy_pieces(d.msgs[m].msg_hdr.msg_iov, d.msgs[m].msg_hdr.msg_iovlen, d.msgs[m].msg_len, base, pieces, 2);
    }
  } else {
    copy_pieces(d.iov, d.iov_count, moved, 0, pieces, 2);
  }
  push(&e);
}

void record_io(Kind kind, Call call, int fd, std::uint32_t id, std::int64_t t0, std::int64_t t1, ssize_t r, int err,
               std::uint64_t requested, bool peek = false, const SentData* data = nullptr) {
  announce(fd, id, tw::trace::ConnOrigin::unknown);
  Event e = make_event(kind, call, fd, id, t0, t1, r, err, requested);
  if (peek) e.flags |= tw::trace::kFlagPeek;
  auto& counter = kind == Kind::send ? conns[id].sent : conns[id].received;
  e.offset = r > 0 && !peek ? counter.fetch_add(static_cast<std::uint64_t>(r), std::memory_order_relaxed)
                            : counter.load(std::memory_order_relaxed);
  push(&e);
  if (kind == Kind::send && r > 0) {
    if (samples_on && data) record_sample(id, e.offset, static_cast<std::size_t>(r), *data);
    tcp_info_at_send(fd, id, t1);
  }
}

void record_simple(Kind kind, int fd, std::uint32_t id, std::int64_t t0, std::int64_t t1, long r, int err, std::uint64_t extra) {
  const Event e = make_event(kind, Call::other, fd, id, t0, t1, r, err, extra);
  push(&e);
}

std::uint64_t iov_bytes(const iovec* iov, int n) {
  std::uint64_t b = 0;
  for (int i = 0; i < n && iov; ++i) b += iov[i].iov_len;
  return b;
}

// Runs `call` for a TCP fd with timing and an event; for anything else, straight through.
template <typename F>
ssize_t traced(Kind kind, Call c, int fd, std::uint64_t requested, F call, bool peek = false, const SentData* data = nullptr) {
  const std::uint32_t id = conn_id(fd);
  if (id == 0) return call();
  const std::int64_t t0 = now_ns();
  const ssize_t r = call();
  const int err = errno;
  const std::int64_t t1 = now_ns();
  record_io(kind, c, fd, id, t0, t1, r, err, requested, peek, data);
  errno = err;
  return r;
}

}  // namespace

// ---- the interposed calls ---------------------------------------------------------

TW_EXPORT ssize_t write(int fd, const void* b, size_t n) {
  resolve();
  const iovec one{const_cast<void*>(b), n};
  const SentData d{&one, 1};
  return traced(Kind::send, Call::write, fd, n, [&] { return real.write(fd, b, n); }, false, &d);
}

TW_EXPORT ssize_t writev(int fd, const iovec* iov, int cnt) {
  resolve();
  const SentData d{iov, cnt > 0 ? static_cast<std::size_t>(cnt) : 0};
  return traced(Kind::send, Call::writev, fd, iov_bytes(iov, cnt), [&] { return real.writev(fd, iov, cnt); }, false, &d);
}

TW_EXPORT ssize_t send(int fd, const void* b, size_t n, int flags) {
  resolve();
  const iovec one{const_cast<void*>(b), n};
  const SentData d{&one, 1};
  return traced(Kind::send, Call::send, fd, n, [&] { return real.send(fd, b, n, flags); }, false, &d);
}

TW_EXPORT ssize_t sendto(int fd, const void* b, size_t n, int flags, const sockaddr* a, socklen_t al) {
  resolve();
  const iovec one{const_cast<void*>(b), n};
  const SentData d{&one, 1};
  return traced(Kind::send, Call::sendto, fd, n, [&] { return real.sendto(fd, b, n, flags, a, al); }, false, &d);
}

TW_EXPORT ssize_t sendmsg(int fd, const msghdr* m, int flags) {
  resolve();
  const std::uint64_t n = m ? iov_bytes(m->msg_iov, static_cast<int>(m->msg_iovlen)) : 0;
  const SentData d{m ? m->msg_iov : nullptr, m ? static_cast<std::size_t>(m->msg_iovlen) : 0};
  return traced(Kind::send, Call::sendmsg, fd, n, [&] { return real.sendmsg(fd, m, flags); }, false, &d);
}

TW_EXPORT int sendmmsg(int fd, mmsghdr* v, unsigned int vlen, int flags) {
  resolve();
  const std::uint32_t id = conn_id(fd);
  if (id == 0) return real.sendmmsg(fd, v, vlen, flags);
  std::uint64_t requested = 0;
  for (unsigned i = 0; i < vlen; ++i) requested += iov_bytes(v[i].msg_hdr.msg_iov, static_cast<int>(v[i].msg_hdr.msg_iovlen));
  const std::int64_t t0 = now_ns();
  const int r = real.sendmmsg(fd, v, vlen, flags);
  const int err = errno;
  const std::int64_t t1 = now_ns();
  std::uint64_t moved = 0;
  for (int i = 0; i < r; ++i) moved += v[i].msg_len;
  const SentData d{nullptr, 0, v, r > 0 ? static_cast<std::size_t>(r) : 0};
  record_io(Kind::send, Call::sendmmsg, fd, id, t0, t1, r < 0 ? r : static_cast<ssize_t>(moved), err, requested, false, &d);
  errno = err;
  return r;
}

TW_EXPORT ssize_t read(int fd, void* b, size_t n) {
  resolve();
  return traced(Kind::recv, Call::read, fd, n, [&] { return real.read(fd, b, n); });
}

TW_EXPORT ssize_t readv(int fd, const iovec* iov, int cnt) {
  resolve();
  return traced(Kind::recv, Call::readv, fd, iov_bytes(iov, cnt), [&] { return real.readv(fd, iov, cnt); });
}

TW_EXPORT ssize_t recv(int fd, void* b, size_t n, int flags) {
  resolve();
  return traced(Kind::recv, Call::recv, fd, n, [&] { return real.recv(fd, b, n, flags); }, (flags & MSG_PEEK) != 0);
}

TW_EXPORT ssize_t recvfrom(int fd, void* b, size_t n, int flags, sockaddr* a, socklen_t* al) {
  resolve();
  return traced(Kind::recv, Call::recvfrom, fd, n, [&] { return real.recvfrom(fd, b, n, flags, a, al); }, (flags & MSG_PEEK) != 0);
}

TW_EXPORT ssize_t recvmsg(int fd, msghdr* m, int flags) {
  resolve();
  if (flags & MSG_ERRQUEUE) return real.recvmsg(fd, m, flags);  // timestamps and errors: not stream data
  const std::uint64_t n = m ? iov_bytes(m->msg_iov, static_cast<int>(m->msg_iovlen)) : 0;
  return traced(Kind::recv, Call::recvmsg, fd, n, [&] { return real.recvmsg(fd, m, flags); }, (flags & MSG_PEEK) != 0);
}

TW_EXPORT int connect(int fd, const sockaddr* a, socklen_t al) {
  resolve();
  const std::uint32_t id = conn_id(fd);
  if (id == 0) return real.connect(fd, a, al);
  // A non-blocking connect is announced when it is seen complete: at
  // getsockopt(SO_ERROR) giving 0, the first call on it, its close, or at the
  // latest the process's exit. Its stream still starts at the SYN this call sends.
  conns[id].how.store(tw::trace::ConnOrigin::connect, std::memory_order_relaxed);
  const std::int64_t t0 = now_ns();
  const int r = real.connect(fd, a, al);
  const int err = errno;
  const std::int64_t t1 = now_ns();
  record_simple(Kind::connect, fd, id, t0, t1, r, err, 0);
  if (r == 0) announce(fd, id, tw::trace::ConnOrigin::connect);
  else if (err == EINPROGRESS || err == EINTR || err == EALREADY) conns[id].pending_in.store(static_cast<int>(::getpid()), std::memory_order_relaxed);
  errno = err;
  return r;
}

namespace {
int accepted(int (*call)(), int fd) {
  const bool listening_tcp = conn_id(fd) != 0;
  const std::int64_t t0 = listening_tcp ? now_ns() : 0;
  const int r = call();
  if (!listening_tcp) return r;
  const int err = errno;
  const std::int64_t t1 = now_ns();
  if (r >= 0) {
    forget(r);  // a new socket on a number that may have been something else
    if (const std::uint32_t id = conn_id(r)) {
      record_simple(Kind::accept, r, id, t0, t1, r, 0, static_cast<std::uint64_t>(fd));
      announce(r, id, tw::trace::ConnOrigin::accept);
    }
  }
  errno = err;
  return r;
}
__thread int acc_fd, acc_flags;
__thread sockaddr* acc_addr;
__thread socklen_t* acc_len;
}  // namespace

TW_EXPORT int accept(int fd, sockaddr* a, socklen_t* al) {
  resolve();
  acc_fd = fd;
  acc_addr = a;
  acc_len = al;
  return accepted([] { return real.accept(acc_fd, acc_addr, acc_len); }, fd);
}

TW_EXPORT int accept4(int fd, sockaddr* a, socklen_t* al, int flags) {
  resolve();
  acc_fd = fd;
  acc_addr = a;
  acc_len = al;
  acc_flags = flags;
  return accepted([] { return real.accept4(acc_fd, acc_addr, acc_len, acc_flags); }, fd);
}

// Where a non-blocking connect is seen to complete (how Gloo, ZeroMQ and Python's
// connect_ex learn it): SO_ERROR 0 on a connection not yet announced.
TW_EXPORT int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  resolve();
  const int r = real.getsockopt(fd, level, name, value, len);
  if (r == 0 && level == SOL_SOCKET && name == SO_ERROR && fd >= 0 && fd < kMaxFd && value && len && *len >= sizeof(int) &&
      *static_cast<const int*>(value) == 0 && fd_kind[fd].load(std::memory_order_relaxed) == kTcp) {
    const std::uint32_t id = fd_conn[fd].load(std::memory_order_relaxed);
    if (id != 0 && conns[id].pending_in.load(std::memory_order_relaxed) != 0) announce(fd, id, tw::trace::ConnOrigin::unknown);
  }
  return r;
}

TW_EXPORT int shutdown(int fd, int how) {
  resolve();
  const std::uint32_t id = conn_id(fd);
  if (id == 0) return real.shutdown(fd, how);
  const std::int64_t t0 = now_ns();
  const int r = real.shutdown(fd, how);
  const int err = errno;
  record_simple(Kind::shutdown, fd, id, t0, now_ns(), r, err, static_cast<std::uint64_t>(how));
  errno = err;
  return r;
}

TW_EXPORT int close(int fd) {
  resolve();
  if (is_shim_fd(fd)) {
    errno = EBADF;  // the job never opened it
    return -1;
  }
  const std::uint32_t id = (fd >= 0 && fd < kMaxFd && fd_kind[fd].load(std::memory_order_relaxed) == kTcp) ? fd_conn[fd].load() : 0;
  if (id != 0 && conns[id].pending_in.load(std::memory_order_relaxed) != 0) {
    announce(fd, id, tw::trace::ConnOrigin::unknown);  // connected and never used: still a connection
    conns[id].pending_in.store(0, std::memory_order_relaxed);
  }
  forget(fd);
  if (id == 0) return real.close(fd);
  const std::int64_t t0 = now_ns();
  const int r = real.close(fd);
  const int err = errno;
  record_simple(Kind::close, fd, id, t0, now_ns(), r, err, 0);
  errno = err;
  return r;
}

// A new socket may reuse the number of an fd closed behind our back (fclose()
// closes inside libc): what was known about that number goes.
TW_EXPORT int socket(int domain, int type, int protocol) {
  resolve();
  const int r = real.socket(domain, type, protocol);
  if (r >= 0) {
    const int err = errno;
    forget(r);
    errno = err;
  }
  return r;
}

namespace {
// dup2 and dup3: the shim's numbers are not open for the job, and a number it
// takes over is the job's from then on (the shim's file moves elsewhere first).
template <typename F>
int duplicated(int a, int b, F call) {
  if (is_shim_fd(a)) {
    errno = EBADF;
    return -1;
  }
  const bool moved = a != b && is_shim_fd(b);
  if (moved) {
    const int saved = errno;
    move_shim_fd_from(b);
    errno = saved;
  }
  const int r = call();
  if (moved && r < 0) {
    const int err = errno;
    drop_moved_copy(b);
    errno = err;
  }
  if (r >= 0 && a != b) forget(b);
  return r;
}

// Numbers a job closes in bulk: what was known about them goes, and a
// connection opened by a non-blocking connect and never used is announced first.
void forget_range(unsigned first, unsigned last) {
  const int saved = errno;
  for (unsigned fd = first; fd <= last && fd < static_cast<unsigned>(kMaxFd); ++fd) {
    const int i = static_cast<int>(fd);
    if (fd_kind[i].load(std::memory_order_relaxed) == kTcp) {
      const std::uint32_t id = fd_conn[i].load(std::memory_order_relaxed);
      if (id != 0 && conns[id].pending_in.load(std::memory_order_relaxed) != 0) announce(i, id, tw::trace::ConnOrigin::unknown);
    }
    if (fd_kind[i].load(std::memory_order_relaxed) != kUnknown) forget(i);
  }
  errno = saved;
}

// close_range around the shim's numbers.
int shim_close_range(unsigned first, unsigned last, int flags) {
  forget_range(first, last);
  static_assert(kSlots == 2);
  int mine[kSlots];
  int k = 0;
  for (const auto& p : published) {
    const int f = p.load(std::memory_order_acquire);
    if (f >= 0 && static_cast<unsigned>(f) >= first && static_cast<unsigned>(f) <= last) mine[k++] = f;
  }
  if (k == 0 || (flags & CLOSE_RANGE_CLOEXEC)) return static_cast<int>(::syscall(SYS_close_range, first, last, flags));
  if (k == 2 && mine[0] > mine[1]) std::swap(mine[0], mine[1]);
  unsigned lo = first;
  int r = 0, err = 0;
  const auto part = [&](unsigned from, unsigned to) {
    if (::syscall(SYS_close_range, from, to, flags) != 0 && r == 0) {
      r = -1;
      err = errno;
    }
  };
  for (int i = 0; i < k; ++i) {
    const unsigned m = static_cast<unsigned>(mine[i]);
    if (m > lo) part(lo, m - 1);
    lo = m + 1;
  }
  if (lo <= last) part(lo, last);
  if (r != 0) errno = err;
  return r;
}
}  // namespace

TW_EXPORT int dup2(int a, int b) {
  resolve();
  return duplicated(a, b, [&] { return real.dup2(a, b); });
}

TW_EXPORT int dup3(int a, int b, int flags) {
  resolve();
  return duplicated(a, b, [&] { return real.dup3(a, b, flags); });
}

TW_EXPORT int close_range(unsigned first, unsigned last, int flags) {
  resolve();
  return shim_close_range(first, last, flags);
}

TW_EXPORT void closefrom(int low) {
  resolve();
  const unsigned first = low < 0 ? 0U : static_cast<unsigned>(low);
  if (shim_close_range(first, ~0U, 0) == 0) return;
  const int saved = errno;  // no close_range: one by one, as glibc's own fallback
  for (int fd = static_cast<int>(first); fd < kMaxFd; ++fd) {
    if (!is_shim_fd(fd)) ::syscall(SYS_close, fd);
  }
  errno = saved;
}

// Framework annotations (python/tensorwire/annotate.py calls this through ctypes):
// iteration boundaries, compute spans, DDP bucket readiness. Not a socket call:
// it records one event and returns.
TW_EXPORT void tensorwire_annotate(int type, int phase, long long value, unsigned aux, const char* name) {
  resolve();
  if (!enabled.load(std::memory_order_relaxed)) return;
  const int saved = errno;
  tw::trace::MarkEvent e{};
  e.kind = Kind::mark;
  e.phase = static_cast<char>(phase);
  e.type = static_cast<tw::trace::MarkType>(type);
  e.aux = aux;
  e.tid = tid();
  e.at_ns = now_ns();
  e.value = value;
  if (name) std::strncpy(e.name, name, sizeof e.name - 1);
  push(&e);
  errno = saved;
}

// Whether the capture records (the annotation module asks before it does work).
TW_EXPORT int tensorwire_capturing() { return enabled.load(std::memory_order_relaxed) ? 1 : 0; }

// A process that signals itself may be about to die of it (Python re-raises
// SIGINT after a KeyboardInterrupt): what it traced is written first.
TW_EXPORT int kill(pid_t pid, int sig) {
  resolve();
  if (sig != 0 && (pid == 0 || pid == ::getpid())) flush(true);
  return real.kill(pid, sig);
}

TW_EXPORT int raise(int sig) {
  resolve();
  flush(true);
  return real.raise(sig);
}

TW_EXPORT void _exit(int status) {
  resolve();
  flush_and_stop();
  real.exit_(status);
  __builtin_unreachable();
}
