#include "replay_options.hpp"

#include "command.hpp"
#include "tensorwire/core/profile.hpp"

#include <algorithm>
#include <stdexcept>

namespace tw::cli {

void add_replay_options(CLI::App* app, ReplayOptions& a) {
  app->add_flag("--open-loop", a.open_loop,
                "Send every message at its original offset from the iteration start, ignoring dependencies");
  app->add_option("--link-gbps", a.link_gbps, "Link rate of the timing model (open-loop plan, comparison)")
      ->capture_default_str()
      ->check(finite_range(1e-6, 1e6));
  app->add_option("--spin-us", a.spin_us, "Busy-wait this long before each deadline, and look again this long (at most 20 us) at a flow whose socket ran dry before it sleeps, while the machine has a core to spare (no more threads runnable than cores, /proc/loadavg) (default: 20, or 0 when the agents on this machine, --local or --testbed, are as many as its cores, or their I/O threads more)")
      ->check(finite_range(0.0, 1e6));
  app->add_option("--read-gap-us", a.read_gap_us,
                  "Read a flow of messages under 64 KiB whose socket ran dry again no sooner than this after its last "
                  "read that returned bytes, while no op waits for its messages (a flow an op waits for is read at once) "
                  "and it looks again (--spin-us above 0, while a core is spare): fewer, larger reads, and fewer acknowledgements for the sender "
                  "to process (small messages: docs/BENCHMARKS.md). Receive times stay when the socket was seen to hold "
                  "each message; results say the gap (0: every read at once; at most 1000)")
      ->capture_default_str();
  app->add_option("--read-nap-us", a.read_nap_us,
                  "With --spin-us 0 (as agents whose threads crowd the cores run), a flow whose socket ran dry amid a "
                  "long message sleeps this long with its I/O thread's other flows, out of epoll, instead of being woken by "
                  "each arrival, while the rest of the message cannot arrive within two naps at its rate so far: fewer "
                  "wake-ups, each taking a sender's core (docs/BENCHMARKS.md, Naps); not under a pacing congestion control, "
                  "whose flows wait for 128 KiB at a time anyway. A message's last byte is read as "
                  "it comes; results count the naps (0: none; at most 1000)")
      ->capture_default_str();
  app->add_option("--delay-us", a.delay_us, "Emulated one-way latency added to every received message")
      ->check(finite_range(0.0, 3.6e9));
  app->add_option("--iterations", a.iterations, "Replay this many iterations instead of the profile's")
      ->check(CLI::Range(std::uint64_t{0}, limits::kMaxIterations));
  app->add_flag("--no-tx-timestamps", a.no_tx_timestamps, "Do not ask the kernel for transmit timestamps (SO_TIMESTAMPING; they are taken in the agent's writes: about 1% of a DDP iteration on hosts sharing cores, docs/fidelity.md)");
  app->add_option("--tx-stamp-every", a.tx_stamp_every,
                  "Transmit timestamps for every Nth message of each flow only (results say so; default: every message)")
      ->capture_default_str();
  app->add_option("--tx-sched", a.tx_sched,
                  "TX_SCHED timestamps (a message entering the queueing discipline): auto (where the flow's interface has "
                  "one that can hold packets, not on loopback or veth), on, off")
      ->capture_default_str();
  app->add_option("--io-threads", a.io_threads,
                  "I/O threads per agent, its flows spread over them: a number, or auto (one per 4 flows the agent "
                  "drives, in and out, at most its share of its machine's cores: the cores it may use over the agents on "
                  "that machine; the results say how many)")
      ->transform(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "auto") {
              v = "0";
              return {};
            }
            const bool digits = !v.empty() && v.size() <= 3 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
            const unsigned long n = digits ? std::stoul(v) : 0;
            if (n < 1 || n > kMaxIoThreads) {
              return "must be auto or from 1 to " + std::to_string(kMaxIoThreads) + ", not " + v;
            }
            return {};
          },
          "", "io-threads"))
      ->type_name("auto|N")
      ->default_str("auto");
  app->add_flag("--pin", a.pin,
                "Pin each agent's I/O threads to cores, chosen by rank so that a host's agents spread (the scheduler "
                "otherwise puts a sender and its receiver on one core now and then)");
  app->add_flag("--realtime", a.realtime,
                "Run each agent's I/O threads at real-time priority (SCHED_FIFO) where permitted (root or CAP_SYS_NICE): "
                "a tighter start on a core of its own; with --spin-us, a spinning agent keeps its core");
  app->add_flag("--sched-batch", a.sched_batch,
                "Run each agent's I/O threads at SCHED_BATCH: woken by a socket or a timer, a thread waits for the one "
                "running on its core to sleep or end its turn instead of preempting it (at once on an idle core). Where "
                "agents share cores, a sender and its receiver pass bytes in fewer, larger turns (16 flows between two "
                "agents on one 2-core host: docs/BENCHMARKS.md); on a busy core a message's start and its receive time "
                "can be later by up to a scheduler slice. Results say so")
      ->excludes("--realtime");
  app->add_option("--congestion-control", a.congestion_control,
                  "TCP congestion control of every data connection, e.g. cubic or bbr (default: each host's own, "
                  "net.ipv4.tcp_congestion_control). Results say which one the flows used. Setting one the host does not "
                  "allow (net.ipv4.tcp_allowed_congestion_control) takes CAP_NET_ADMIN");
  app->add_option("--connect-timeout", a.connect_timeout_s, "Seconds to get every flow connected (run: longer when more than 16 agents a core share this machine)")->capture_default_str();
  app->add_option("--idle-timeout", a.idle_timeout_s, "Seconds without progress before giving up")->capture_default_str();
}

std::vector<std::pair<RankId, double>> parse_slow_ranks(const std::vector<std::string>& specs, std::size_t ranks) {
  std::vector<std::pair<RankId, double>> out;
  for (const auto& s : specs) {
    const auto colon = s.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument("");
      std::size_t used = 0;
      const unsigned long rank = std::stoul(s.substr(0, colon), &used);
      if (used != colon) throw std::invalid_argument("");
      const std::string f = s.substr(colon + 1);
      const double factor = std::stod(f, &used);
      if (used != f.size() || rank >= ranks || !(factor > 0) || factor > 1000) throw std::invalid_argument("");
      out.emplace_back(static_cast<RankId>(rank), factor);
    } catch (const std::exception&) {
      throw std::invalid_argument("--slow-rank '" + s + "': expected RANK:FACTOR with a rank of the profile, like 2:1.5");
    }
  }
  return out;
}

}  // namespace tw::cli
