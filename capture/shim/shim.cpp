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
//   environment; exit and _exit flush.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // the kernel's tcp_info (glibc's lacks the newer fields)
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
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
std::atomic<bool> writer_running{false};
std::atomic<std::uint64_t> written{0};
std::atomic<std::uint64_t> pushed{0};
std::atomic<int> trace_fd{-1};
pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
char out_dir[4096];
bool enabled = false;
std::int64_t started_ns = 0;
constexpr std::int64_t kTcpInfoEveryNs = 1'000'000;  // TCP_INFO at most once a millisecond per connection

ssize_t raw_write(int fd, const void* p, std::size_t n) { return ::syscall(SYS_write, fd, p, n); }

void write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = raw_write(fd, c, n);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return;  // a full disk: the trace ends here; the job goes on
    }
    c += w;
    n -= static_cast<std::size_t>(w);
  }
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
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string s;
  char b[4096];
  ssize_t n;
  while ((n = ::syscall(SYS_read, fd, b, sizeof b)) > 0 && s.size() < 65536) s.append(b, static_cast<std::size_t>(n));
  ::syscall(SYS_close, fd);
  return s;
}

// The process description, written when the first event comes and again at exit.
void write_description(bool final) {
  char path[4200];
  std::snprintf(path, sizeof path, "%s/%s%d%s", out_dir, tw::capture_dir::kTracePrefix, static_cast<int>(::getpid()),
                tw::capture_dir::kDescriptionExtension);
  char tmp[4300];
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
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string env = "{";
  for (const char* k : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TW_ROLE", "OMPI_COMM_WORLD_RANK"}) {
    if (const char* v = std::getenv(k)) env += std::string(env.size() > 1 ? ", " : "") + "\"" + k + "\": \"" + json_escape(v) + "\"";
  }
  env += "}";
  char body[1024];
  std::snprintf(body, sizeof body,
                "\"pid\": %d,\n  \"ppid\": %d,\n  \"host\": \"%s\",\n  \"clock\": \"CLOCK_REALTIME\",\n"
                "  \"started_ns\": %lld,\n  \"final\": %s,\n  \"events_written\": %llu,\n  \"events_dropped\": %llu,\n"
                "  \"untracked\": %llu,\n  \"wire\": \"none\",\n",
                static_cast<int>(::getpid()), static_cast<int>(::getppid()), json_escape(host).c_str(),
                static_cast<long long>(started_ns), final ? "true" : "false",
                static_cast<unsigned long long>(written.load()), static_cast<unsigned long long>(dropped.load()),
                static_cast<unsigned long long>(untracked.load()));
  const std::string text = "{\n  \"format\": \"tensorwire-trace\",\n  \"version\": 1,\n  " + std::string(body) +
                           "  \"env\": " + env + ",\n  \"cmdline\": " + args + "\n}\n";
  const int fd = ::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  write_all(fd, text.data(), text.size());
  ::syscall(SYS_close, fd);
  ::rename(tmp, path);
}

[[noreturn]] void writer_loop() {
  Slot batch[256];
  for (;;) {
    Queue* q = queue.load(std::memory_order_acquire);
    std::size_t n = q ? q->try_dequeue_bulk(batch, 256) : 0;
    if (n > 0) {
      write_all(trace_fd.load(), batch, n * sizeof(Slot));
      written.fetch_add(n, std::memory_order_relaxed);
      continue;
    }
    timespec ts{0, 1'000'000};  // 1 ms: what a crash can lose
    ::nanosleep(&ts, nullptr);
  }
}

// Starts the writer at the first event: processes that never touch TCP get no
// thread and no file.
bool ensure_writer() {
  if (writer_running.load(std::memory_order_acquire)) return true;
  if (!enabled) return false;
  pthread_mutex_lock(&start_lock);
  if (!writer_running.load(std::memory_order_relaxed)) {
    char path[4200];
    std::snprintf(path, sizeof path, "%s/%s%d%s", out_dir, tw::capture_dir::kTracePrefix, static_cast<int>(::getpid()),
                  tw::capture_dir::kEventsExtension);
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      enabled = false;  // nowhere to write: stay out of the way
      pthread_mutex_unlock(&start_lock);
      return false;
    }
    const auto header = tw::binary_file::encode_header(tw::trace::kMagic, tw::trace::kVersion, sizeof(tw::trace::Event));
    write_all(fd, header.data(), header.size());
    trace_fd.store(fd);
    if (!queue.load()) queue.store(new Queue(kQueueCapacity));
    started_ns = now_ns();
    write_description(false);
    std::thread(writer_loop).detach();
    writer_running.store(true, std::memory_order_release);
  }
  pthread_mutex_unlock(&start_lock);
  return true;
}

void push(const void* event) {
  if (!ensure_writer()) return;
  Slot s;
  std::memcpy(s.b, event, 64);
  // The bound is ours: events not yet written. (moodycamel's try_enqueue also
  // fails for a thread's first events, which need a little bookkeeping memory.)
  if (pushed.load(std::memory_order_relaxed) - written.load(std::memory_order_relaxed) >= kQueueCapacity ||
      !queue.load(std::memory_order_acquire)->enqueue(s)) {
    dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  pushed.fetch_add(1, std::memory_order_release);
}

// Waits (at most ~1 s) until the writer has written everything queued so far,
// then records the process description; the writer keeps running.
void flush(bool final) {
  if (!writer_running.load(std::memory_order_acquire)) return;
  const int saved = errno;
  const std::uint64_t target = pushed.load(std::memory_order_acquire);
  for (int i = 0; i < 1000 && written.load(std::memory_order_acquire) < target; ++i) {
    timespec ts{0, 1'000'000};
    ::nanosleep(&ts, nullptr);
  }
  write_description(final);
  errno = saved;
}

// At exit: everything written, the final description. The writer is left to
// the process's end (a late event from another thread still finds a queue).
void flush_and_stop() { flush(true); }

void after_fork_in_child() {
  // The parent's writer thread does not exist here, and its queue may have been
  // mid-operation: start over with a fresh one (the old one is left alone).
  writer_running.store(false);
  queue.store(nullptr);
  trace_fd.store(-1);
  written.store(0);
  pushed.store(0);
  dropped.store(0);
  tls_tid = 0;
  start_lock = PTHREAD_MUTEX_INITIALIZER;
}

__attribute__((constructor)) void init() {
  resolve();
  const char* dir = std::getenv("TW_CAPTURE_DIR");
  if (dir && *dir && std::strlen(dir) < sizeof out_dir) {
    std::strcpy(out_dir, dir);
    enabled = true;
  }
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
  if (!enabled || fd < 0 || fd >= kMaxFd) return 0;
  const std::uint8_t k = fd_kind[fd].load(std::memory_order_relaxed);
  if (k == kOther) return 0;
  if (k == kTcp) return fd_conn[fd].load(std::memory_order_relaxed);
  const int saved = errno;
  int type = 0, domain = 0, proto = 0;
  socklen_t len = sizeof type;
  bool tcp = ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
  if (!tcp && errno == EBADF) {
    errno = saved;
    return 0;  // not open: nothing to cache
  }
  len = sizeof domain;
  tcp = tcp && ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && (domain == AF_INET || domain == AF_INET6);
  len = sizeof proto;
  tcp = tcp && ::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) == 0 && proto == IPPROTO_TCP;
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

void tcp_info_at_send(int fd, std::uint32_t id, std::int64_t t) {
  Conn& c = conns[id];
  if (t - c.last_info.load(std::memory_order_relaxed) < kTcpInfoEveryNs) return;
  c.last_info.store(t, std::memory_order_relaxed);
  tcp_info ti{};
  socklen_t len = sizeof ti;
  const int saved = errno;
  const bool ok = ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0;
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

void record_io(Kind kind, Call call, int fd, std::uint32_t id, std::int64_t t0, std::int64_t t1, ssize_t r, int err,
               std::uint64_t requested, bool peek = false) {
  announce(fd, id, tw::trace::ConnOrigin::unknown);
  Event e = make_event(kind, call, fd, id, t0, t1, r, err, requested);
  if (peek) e.flags |= tw::trace::kFlagPeek;
  auto& counter = kind == Kind::send ? conns[id].sent : conns[id].received;
  e.offset = r > 0 && !peek ? counter.fetch_add(static_cast<std::uint64_t>(r), std::memory_order_relaxed)
                            : counter.load(std::memory_order_relaxed);
  push(&e);
  if (kind == Kind::send && r > 0) tcp_info_at_send(fd, id, t1);
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
ssize_t traced(Kind kind, Call c, int fd, std::uint64_t requested, F call, bool peek = false) {
  const std::uint32_t id = conn_id(fd);
  if (id == 0) return call();
  const std::int64_t t0 = now_ns();
  const ssize_t r = call();
  const int err = errno;
  const std::int64_t t1 = now_ns();
  record_io(kind, c, fd, id, t0, t1, r, err, requested, peek);
  errno = err;
  return r;
}

}  // namespace

// ---- the interposed calls ---------------------------------------------------------

TW_EXPORT ssize_t write(int fd, const void* b, size_t n) {
  resolve();
  return traced(Kind::send, Call::write, fd, n, [&] { return real.write(fd, b, n); });
}

TW_EXPORT ssize_t writev(int fd, const iovec* iov, int cnt) {
  resolve();
  return traced(Kind::send, Call::writev, fd, iov_bytes(iov, cnt), [&] { return real.writev(fd, iov, cnt); });
}

TW_EXPORT ssize_t send(int fd, const void* b, size_t n, int flags) {
  resolve();
  return traced(Kind::send, Call::send, fd, n, [&] { return real.send(fd, b, n, flags); });
}

TW_EXPORT ssize_t sendto(int fd, const void* b, size_t n, int flags, const sockaddr* a, socklen_t al) {
  resolve();
  return traced(Kind::send, Call::sendto, fd, n, [&] { return real.sendto(fd, b, n, flags, a, al); });
}

TW_EXPORT ssize_t sendmsg(int fd, const msghdr* m, int flags) {
  resolve();
  const std::uint64_t n = m ? iov_bytes(m->msg_iov, static_cast<int>(m->msg_iovlen)) : 0;
  return traced(Kind::send, Call::sendmsg, fd, n, [&] { return real.sendmsg(fd, m, flags); });
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
  record_io(Kind::send, Call::sendmmsg, fd, id, t0, t1, r < 0 ? r : static_cast<ssize_t>(moved), err, requested);
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
  // A non-blocking connect is announced at its first data call; its stream
  // still starts at the SYN this call sends.
  conns[id].how.store(tw::trace::ConnOrigin::connect, std::memory_order_relaxed);
  const std::int64_t t0 = now_ns();
  const int r = real.connect(fd, a, al);
  const int err = errno;
  const std::int64_t t1 = now_ns();
  record_simple(Kind::connect, fd, id, t0, t1, r, err, 0);
  if (r == 0) announce(fd, id, tw::trace::ConnOrigin::connect);
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
  const std::uint32_t id = (fd >= 0 && fd < kMaxFd && fd_kind[fd].load(std::memory_order_relaxed) == kTcp) ? fd_conn[fd].load() : 0;
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

TW_EXPORT int dup2(int a, int b) {
  resolve();
  const int r = real.dup2(a, b);
  if (r >= 0 && a != b) forget(b);
  return r;
}

TW_EXPORT int dup3(int a, int b, int flags) {
  resolve();
  const int r = real.dup3(a, b, flags);
  if (r >= 0) forget(b);
  return r;
}

// Framework annotations (python/tensorwire/annotate.py calls this through ctypes):
// iteration boundaries, compute spans, DDP bucket readiness. Not a socket call:
// it records one event and returns.
TW_EXPORT void tensorwire_annotate(int type, int phase, long long value, unsigned aux, const char* name) {
  resolve();
  if (!enabled) return;
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
TW_EXPORT int tensorwire_capturing() { return enabled ? 1 : 0; }

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
