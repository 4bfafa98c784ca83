#include "tensorwire/launch/run_settings.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "tensorwire/analysis/simulator.hpp"
#include "tensorwire/protocol/control_messages.hpp"
#include "tensorwire/util/tcp_congestion.hpp"

namespace tw {

std::size_t agents_on_this_machine(std::size_t local, std::size_t testbed_hosts, std::size_t ranks) {
  if (local > 0) return local;
  return testbed_hosts > 0 ? ranks : 0;
}

double spin_us_for(const ReplayOptions& o, const RunPlacement& where) {
  if (o.spin_us >= 0) return o.spin_us;
  // The agents' I/O threads count too: with more of them than cores, a flow
  // looking at its dry socket holds a core that another thread, or the bridge's
  // work for the flow's sender, is waiting for (docs/BENCHMARKS.md, Agents
  // sharing cores).
  // Automatic threads are at most the agents' share of the cores: they crowd them
  // only where the agents alone do.
  const std::size_t threads = where.local_agents * std::max<std::uint32_t>(1, o.io_threads);
  const bool crowded = where.local_agents > 0 && (where.local_agents >= where.cores || threads > where.cores);
  return crowded ? 0.0 : 20.0;
}

std::size_t crowding_factor(const RunPlacement& where) {
  const std::size_t per_16 = 16 * std::max(1U, where.cores);
  return std::max<std::size_t>(1, (where.local_agents + per_16 - 1) / per_16);
}

Nanos heartbeat_for(const RunPlacement& where) { return kHeartbeatTimeout * static_cast<Nanos>(crowding_factor(where)); }

std::vector<std::string> launched_agent_arguments(const RunPlacement& where) {
  std::vector<std::string> args = {"--quiet"};
  const Nanos heartbeat = heartbeat_for(where);
  if (heartbeat != kHeartbeatTimeout) args.insert(args.end(), {"--heartbeat", fmt::format("{:g}", static_cast<double>(heartbeat) / kSecond)});
  return args;
}

RunSettings make_run_settings(const Profile& replayed, const ReplayOptions& o, const RunPlacement& where) {
  if (!(o.slowdown > 0) || o.slowdown > 1000) throw std::invalid_argument("--slowdown must be from 0 to 1000");
  if (o.delay_us < 0) throw std::invalid_argument("--delay-us must be zero or more");
  const double k = where.scale.factor();
  RunSettings s;
  s.iterations = o.iterations;
  s.open_loop = o.open_loop;
  if (o.open_loop) {
    // Planned here, once: agents get the plan and need no observed timings. A
    // time-scaled replay runs on a k times slower network.
    const OpenLoopPlan plan = open_loop_plan(replayed, o.link_gbps / k * 1e9);
    s.open_loop_offsets = plan.offsets;
    s.open_loop_period = plan.period;
  }
  s.spin = static_cast<Nanos>(std::llround(spin_us_for(o, where) * 1e3));
  if (!(o.read_gap_us >= 0) || o.read_gap_us * kMicro > static_cast<double>(kMostReadGap)) {
    throw std::invalid_argument("--read-gap-us must be from 0 to " + std::to_string(kMostReadGap / kMicro));
  }
  // Not stretched with a time-scaled profile: like the spin, it is about this
  // host's reads, not the replayed network.
  s.read_gap = static_cast<Nanos>(std::llround(o.read_gap_us * 1e3));
  if (!(o.read_nap_us >= 0) || o.read_nap_us * kMicro > static_cast<double>(kMostReadNap)) {
    throw std::invalid_argument("--read-nap-us must be from 0 to " + std::to_string(kMostReadNap / kMicro));
  }
  s.read_nap = static_cast<Nanos>(std::llround(o.read_nap_us * 1e3));
  s.delay = where.scale.stretch(o.delay_us * 1e3);
  s.tx_timestamps = !o.no_tx_timestamps;
  if (o.tx_stamp_every < 1) throw std::invalid_argument("--tx-stamp-every must be 1 or more");
  s.tx_stamp_every = o.tx_stamp_every;
  const auto sched = tx_sched_from(o.tx_sched);
  if (!sched) throw std::invalid_argument("--tx-sched must be auto, on or off, not " + o.tx_sched);
  s.tx_sched = *sched;
  if (o.io_threads > kMaxIoThreads) {
    throw std::invalid_argument("--io-threads must be auto or from 1 to " + std::to_string(kMaxIoThreads));
  }
  s.io_threads = o.io_threads;
  // The agents of --local and --testbed share this machine's cores; elsewhere
  // the controller counts each host's (or an agent started by hand its roster's).
  s.machine_agents = static_cast<std::uint32_t>(std::min<std::size_t>(where.local_agents, std::numeric_limits<std::uint32_t>::max()));
  s.pin = o.pin;
  s.realtime = o.realtime;
  if (o.realtime && o.sched_batch) throw std::invalid_argument("--realtime and --sched-batch exclude each other");
  s.sched_batch = o.sched_batch;
  if (!o.congestion_control.empty()) {
    if (auto bad = congestion_name_problem(o.congestion_control); !bad.empty()) {
      throw std::invalid_argument("--congestion-control '" + o.congestion_control + "': " + bad);
    }
  }
  s.congestion_control = o.congestion_control;
  s.connect_timeout = seconds_option(o.connect_timeout_s, "--connect-timeout") * static_cast<Nanos>(crowding_factor(where));
  s.idle_timeout = seconds_option(o.idle_timeout_s, "--idle-timeout");
  return s;
}

std::vector<std::string> agent_arguments(const ReplayOptions& o, const RunPlacement& where) {
  std::vector<std::string> args = {"--spin-us",         fmt::format("{}", spin_us_for(o, where)),
                                   "--link-gbps",       fmt::format("{}", o.link_gbps),
                                   "--connect-timeout", fmt::format("{}", o.connect_timeout_s),
                                   "--idle-timeout",    fmt::format("{}", o.idle_timeout_s)};
  if (o.open_loop) args.push_back("--open-loop");
  if (o.read_gap_us != ReplayOptions{}.read_gap_us) args.insert(args.end(), {"--read-gap-us", fmt::format("{}", o.read_gap_us)});
  if (o.read_nap_us != ReplayOptions{}.read_nap_us) args.insert(args.end(), {"--read-nap-us", fmt::format("{}", o.read_nap_us)});
  if (o.no_tx_timestamps) args.push_back("--no-tx-timestamps");
  if (o.tx_stamp_every != 1) args.insert(args.end(), {"--tx-stamp-every", std::to_string(o.tx_stamp_every)});
  if (o.tx_sched != "auto") args.insert(args.end(), {"--tx-sched", o.tx_sched});
  if (o.io_threads != 0) args.insert(args.end(), {"--io-threads", std::to_string(o.io_threads)});
  if (o.pin) args.push_back("--pin");
  if (o.realtime) args.push_back("--realtime");
  if (o.sched_batch) args.push_back("--sched-batch");
  if (!o.congestion_control.empty()) args.insert(args.end(), {"--congestion-control", o.congestion_control});
  if (o.delay_us > 0) args.insert(args.end(), {"--delay-us", fmt::format("{}", o.delay_us)});
  if (o.iterations > 0) args.insert(args.end(), {"--iterations", std::to_string(o.iterations)});
  return args;
}

Nanos seconds_option(double s, const char* option) {
  if (!(s > 0) || s > 86400) throw std::invalid_argument(std::string(option) + " must be from 0 to 86400 seconds");
  return static_cast<Nanos>(std::llround(s * 1e9));
}

}  // namespace tw
