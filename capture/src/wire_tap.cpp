#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/capture/wire_tap.hpp"

#include <fcntl.h>
#include <pcap/pcap.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

namespace tw {

nlohmann::json WireTapReport::to_json() const {
  return {{"interfaces", interfaces}, {"files", files}, {"packets", packets}, {"dropped", dropped},
          {"interface_dropped", interface_dropped}, {"error", error}};
}

namespace {

// The kernel hands captured frames over in blocks, retired when full or after
// this long: the most a packet waits in the ring before we write it.
constexpr int kBlockTimeoutMs = 50;

// One interface's capture: its libpcap handle and the file it dumps to, closed
// (the file first) when it goes. Move-only: libpcap has one owner per handle.
class Handle {
 public:
  Handle(std::string name_, std::string file_) : name(std::move(name_)), file(std::move(file_)) {}
  ~Handle() { close(); }
  Handle(Handle&& o) noexcept
      : name(std::move(o.name)), file(std::move(o.file)), pcap(std::exchange(o.pcap, nullptr)),
        dump(std::exchange(o.dump, nullptr)), packets(o.packets), failed(o.failed) {}
  Handle& operator=(Handle&&) = delete;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  void close() noexcept {
    if (dump) pcap_dump_close(std::exchange(dump, nullptr));
    if (pcap) pcap_close(std::exchange(pcap, nullptr));
  }

  std::string name, file;
  pcap_t* pcap = nullptr;
  pcap_dumper_t* dump = nullptr;
  std::uint64_t packets = 0;
  bool failed = false;
};

void on_packet(u_char* user, const pcap_pkthdr* h, const u_char* bytes) {
  auto* handle = reinterpret_cast<Handle*>(user);
  pcap_dump(reinterpret_cast<u_char*>(handle->dump), h, bytes);
  ++handle->packets;
}

}  // namespace

struct WireTap::Impl {
  std::vector<Handle> handles;
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::string error;  // under mu

  ~Impl() {
    stopping = true;
    if (thread.joinable()) thread.join();
  }

  void fail(Handle& h, const std::string& why) {
    h.failed = true;
    std::lock_guard lock(mu);
    if (error.empty()) error = h.file + ": " + why + "; the wire data after this point is lost";
  }

  // Writes whatever the kernel has retired; false when nothing was there.
  bool drain(Handle& h) {
    if (h.failed) return false;
    const int n = pcap_dispatch(h.pcap, -1, on_packet, reinterpret_cast<u_char*>(&h));
    if (n < 0) {
      fail(h, pcap_geterr(h.pcap));
      return false;
    }
    return n > 0;
  }

  void run() {
    std::vector<pollfd> fds;
    for (auto& h : handles) fds.push_back({pcap_get_selectable_fd(h.pcap), POLLIN, 0});
    auto last_flush = std::chrono::steady_clock::now();
    int quiet_rounds = 0;
    // After stop(): keep draining until a whole block timeout passes with nothing.
    while (!stopping.load(std::memory_order_relaxed) || quiet_rounds < 2) {
      ::poll(fds.data(), fds.size(), kBlockTimeoutMs);
      bool any = false;
      for (auto& h : handles) any = drain(h) || any;
      quiet_rounds = any ? 0 : quiet_rounds + 1;
      const auto now = std::chrono::steady_clock::now();
      if (now - last_flush > std::chrono::seconds(1)) {
        last_flush = now;
        for (auto& h : handles) {
          if (!h.failed && pcap_dump_flush(h.dump) != 0) fail(h, std::strerror(errno));
        }
      }
    }
  }
};

WireTap::WireTap(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

WireTap::~WireTap() = default;

std::unique_ptr<WireTap> WireTap::start(const WireTapOptions& o) {
  auto impl = std::make_unique<Impl>();
  char err[PCAP_ERRBUF_SIZE] = "";
  for (const auto& name : o.interfaces) {
    // Its place in `handles` before anything can fail: every handle opened is closed.
    Handle& h = impl->handles.emplace_back(name, o.dir + "/" + capture_dir::wire_file_name(name, o.host, o.pid));
    h.pcap = pcap_create(name.c_str(), err);
    if (!h.pcap) throw std::runtime_error("wire tap on " + name + ": " + err);
    pcap_t* p = h.pcap;
    pcap_set_snaplen(p, o.snaplen);
    pcap_set_promisc(p, 0);
    pcap_set_timeout(p, kBlockTimeoutMs);
    pcap_set_buffer_size(p, o.buffer_bytes);
    pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO);
    const int rc = pcap_activate(p);
    if (rc < 0) {
      std::string why = pcap_geterr(p);
      if (why.empty()) why = pcap_statustostr(rc);
      throw std::runtime_error("wire tap on " + name + ": " + why);
    }
    // Cooked v2 on "any" says which interface each frame was seen on.
    if (name == "any") pcap_set_datalink(p, DLT_LINUX_SLL2);
    bpf_program prog{};
    if (pcap_compile(p, &prog, "tcp", 1, PCAP_NETMASK_UNKNOWN) != 0 || pcap_setfilter(p, &prog) != 0) {
      const std::string why = pcap_geterr(p);
      pcap_freecode(&prog);
      throw std::runtime_error("wire tap on " + name + ": filter: " + why);
    }
    pcap_freecode(&prog);
    if (pcap_setnonblock(p, 1, err) != 0) throw std::runtime_error("wire tap on " + name + ": " + err);
    const int fd = ::open(h.file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("wire tap: " + h.file + ": " + std::strerror(errno));
    FILE* f = ::fdopen(fd, "w");
    if (!f) {
      ::close(fd);
      throw std::runtime_error("wire tap: " + h.file + ": " + std::strerror(errno));
    }
    h.dump = pcap_dump_fopen(p, f);
    if (!h.dump) {
      std::fclose(f);
      throw std::runtime_error("wire tap: " + std::string(pcap_geterr(p)));
    }
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<WireTap>(new WireTap(std::move(impl)));
}

WireTapReport WireTap::stop(Nanos linger) {
  std::this_thread::sleep_for(std::chrono::nanoseconds(linger));
  impl_->stopping = true;
  if (impl_->thread.joinable()) impl_->thread.join();
  WireTapReport r;
  for (auto& h : impl_->handles) {
    r.interfaces.push_back(h.name);
    r.files.push_back(h.file.substr(h.file.rfind('/') + 1));
    r.packets += h.packets;
    pcap_stat st{};
    if (pcap_stats(h.pcap, &st) == 0) {
      r.dropped += st.ps_drop;
      r.interface_dropped += st.ps_ifdrop;
    }
    if (!h.failed && pcap_dump_flush(h.dump) != 0) impl_->fail(h, std::strerror(errno));
    h.close();
  }
  r.error = impl_->error;
  return r;
}

}  // namespace tw
