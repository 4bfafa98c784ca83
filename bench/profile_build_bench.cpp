// How fast `profile build` turns a large capture into a profile: a Gloo ring of
// R ranks written as a capture directory (trace files with send and receive
// events and the shim's samples of each call, as a real capture holds them),
// then read and built. The baseline, in the same run: reading the same directory
// and delimiting its messages (read_capture_dir + analyse_capture, what
// `trace show` does), which the build includes. Prints a Markdown fragment for
// docs/BENCHMARKS.md.
//   profile_build_bench [MESSAGES] [RANKS] [RUNS]
#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "tensorwire/core/binary_file.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/trace.hpp"
#include "tensorwire/profile/build.hpp"

namespace {

namespace fs = std::filesystem;
using tw::Nanos;

double median_seconds(int runs, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Writer {
  std::vector<unsigned char> bytes;
  template <typename T>
  void put(const T& e) {
    const auto* p = reinterpret_cast<const unsigned char*>(&e);
    bytes.insert(bytes.end(), p, p + sizeof e);
  }
};

tw::trace::ConnEvent conn(std::uint32_t id, std::uint16_t lport, std::uint16_t rport) {
  tw::trace::ConnEvent c{};
  c.kind = tw::trace::Kind::conn;
  c.family = AF_INET;
  c.conn = id;
  c.how = tw::trace::ConnOrigin::connect;
  const unsigned char lo[4] = {127, 0, 0, 1};
  std::memcpy(c.local, lo, 4);
  std::memcpy(c.remote, lo, 4);
  c.local_port = lport;
  c.remote_port = rport;
  return c;
}

// A Gloo op's call: its send event, its sample (the preamble, and the payload's
// last bytes), and the peer's receive event.
void op(Writer& from, Writer& to, std::uint32_t conn_from, std::uint32_t conn_to, std::uint64_t& offset, Nanos ready,
        std::uint64_t opcode, std::uint64_t length) {
  const bool data = opcode <= 1;
  const std::uint64_t total = 48 + (data ? length : 0);
  tw::trace::Event e{};
  e.kind = tw::trace::Kind::send;
  e.call = tw::trace::Call::writev;
  e.conn = conn_from;
  e.tid = 1;
  e.enter_ns = ready;
  e.exit_ns = ready + 8000;
  e.result = static_cast<std::int64_t>(total);
  e.offset = offset;
  e.requested = total;
  from.put(e);
  tw::trace::SampleEvent s{};
  s.kind = tw::trace::Kind::sample;
  s.conn = conn_from;
  s.offset = offset;
  s.head_len = 32;
  const std::uint64_t pre[4] = {total, opcode, 0, 0};
  std::memcpy(s.head, pre, 32);
  s.tail_len = static_cast<std::uint8_t>(std::min<std::uint64_t>(16, total - 32));
  const std::uint64_t tail_start = total - s.tail_len;  // within the preamble: its own bytes
  const std::uint64_t preamble[6] = {total, opcode, 0, 0, length, 0};
  for (std::uint8_t i = 0; i < s.tail_len; ++i) {
    const std::uint64_t at = tail_start + i;
    s.tail[i] = at < 48 ? reinterpret_cast<const unsigned char*>(preamble)[at] : 0x3f;
  }
  from.put(s);
  tw::trace::Event r = e;
  r.kind = tw::trace::Kind::recv;
  r.call = tw::trace::Call::read;
  r.conn = conn_to;
  r.enter_ns = ready + 20000;
  r.exit_ns = ready + 30000;
  to.put(r);
  offset += total;
}

// A ring of `ranks` with `per` data ops per neighbour and iteration, each after
// its notification from the receiver: 2 * per * ranks messages per iteration.
std::size_t write_capture(const std::string& dir, std::size_t messages, std::uint32_t ranks) {
  fs::create_directories(dir);
  const std::size_t per = 100;
  const std::size_t iterations = std::max<std::size_t>(4, messages / (2 * per * ranks));
  std::vector<Writer> w(ranks);
  // Connection r joins rank r (port 30000 + r, id 1) and rank r+1 (port 31000 + r, id 2).
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const std::uint32_t next = (r + 1) % ranks;
    w[r].put(conn(1, static_cast<std::uint16_t>(30000 + r), static_cast<std::uint16_t>(31000 + r)));
    w[next].put(conn(2, static_cast<std::uint16_t>(31000 + r), static_cast<std::uint16_t>(30000 + r)));
  }
  std::vector<std::uint64_t> sent_next(ranks, 0), sent_prev(ranks, 0);  // per rank: bytes on conn 1 / conn 2
  std::size_t written = 0;
  for (std::size_t k = 0; k < iterations; ++k) {
    const Nanos start = static_cast<Nanos>(k) * 20'000'000;
    for (std::size_t j = 0; j < per; ++j) {
      for (std::uint32_t r = 0; r < ranks; ++r) {
        const std::uint32_t next = (r + 1) % ranks;
        const Nanos t = start + 5'000'000 + static_cast<Nanos>(j) * 100'000 + r * 7'000;
        op(w[next], w[r], 2, 1, sent_prev[next], t - 15'000, 3, 65536);  // NOTIFY_RECV_READY
        op(w[r], w[next], 1, 2, sent_next[r], t, 1, 65536);              // SEND_UNBOUND_BUFFER
        written += 2;
      }
    }
  }
  for (std::uint32_t r = 0; r < ranks; ++r) {
    const int pid = 1000 + static_cast<int>(r);
    std::ofstream json(tw::capture_dir::description_file(dir, pid));
    json << "{\"pid\": " << pid << ", \"ppid\": 1, \"host\": \"bench\", \"final\": true, \"cmdline\": [\"train.py\"],"
         << " \"env\": {\"RANK\": \"" << r << "\"}, \"events_written\": " << w[r].bytes.size() / 64 << "}\n";
    std::ofstream twt(tw::capture_dir::events_file(dir, pid), std::ios::binary);
    const auto h = tw::binary_file::encode_header(tw::trace::kMagic, tw::trace::kVersion, sizeof(tw::trace::Event));
    twt.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size()));
    twt.write(reinterpret_cast<const char*>(w[r].bytes.data()), static_cast<std::streamsize>(w[r].bytes.size()));
  }
  return written;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t messages = argc > 1 ? std::stoul(argv[1]) : 1'000'000;
  const auto ranks = static_cast<std::uint32_t>(argc > 2 ? std::stoul(argv[2]) : 4);
  const int runs = argc > 3 ? std::stoi(argv[3]) : 3;
  const std::string dir = (fs::temp_directory_path() / "tw-bench-capture").string();
  fs::remove_all(dir);
  const std::size_t written = write_capture(dir, messages, ranks);
  std::uintmax_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) bytes += e.is_regular_file() ? e.file_size() : 0;

  std::size_t found = 0;
  const double read = median_seconds(runs, [&] {
    const auto traces = tw::read_capture_dir(dir);
    found = tw::analyse_capture(traces).messages.size();
  });
  tw::BuiltProfile b;
  const double build = median_seconds(runs, [&] { b = tw::build_profile(tw::read_captures({dir}), {}); });
  fs::remove_all(dir);
  if (found != written) {
    std::fprintf(stderr, "profile_build_bench: wrote %zu messages, the reader found %zu\n", written, found);
    return 1;
  }
  std::printf("## Building a profile from a capture\n\n");
  std::printf("`profile_build_bench %zu %u %d`: a Gloo ring of %u ranks as a capture directory (%.0f MB of trace\n", messages,
              ranks, runs, ranks, static_cast<double>(bytes) / 1e6);
  std::printf("files: send and receive events and the shim's samples), %zu messages (data ops and their notifications)\n",
              written);
  std::printf("over %llu iterations. Median of %d runs each. The build includes the reading and delimiting of the\n",
              static_cast<unsigned long long>(b.report.detected), runs);
  std::printf("baseline row.\n\n");
  std::printf("| step | time | messages per second |\n|---|---|---|\n");
  std::printf("| read the capture and delimit its messages (`trace show`'s part; baseline) | %.2f s | %.2f M |\n", read,
              static_cast<double>(written) / read / 1e6);
  std::printf("| `profile build`: the above, iterations, dependencies, observed timings | %.2f s | %.2f M |\n", build,
              static_cast<double>(written) / build / 1e6);
  std::printf("\nThe profile: %zu ranks, %zu flows, %zu ops per iteration, %llu iterations used (target: 1 M messages in\n",
              b.profile.ranks.size(), b.profile.flows.size(), b.profile.ops.size(),
              static_cast<unsigned long long>(b.profile.iterations));
  std::printf("under 10 s).\n");
  return 0;
}
