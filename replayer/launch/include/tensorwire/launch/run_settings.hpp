// How agents replay, from what the user asked for on the command line: the one
// place where `tensorwire run`, `agent` and `replay --local` turn replay options
// into the settings every agent of a run replays with (and, through
// executor_options_for, its executor options). Pure: no I/O; any thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tensorwire/protocol/run_settings.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/units.hpp"
#include "tensorwire/launch/time_scale.hpp"

namespace tw {

// The replay options as given (--open-loop, --link-gbps, ...), in their units.
struct ReplayOptions {
  bool open_loop = false;
  double link_gbps = 10;  // the timing model's link rate: open-loop plan, comparison
  double slowdown = 1;    // this rank's compute (agent --slowdown)
  double spin_us = -1;    // -1: automatic (spin_us_for)
  double read_gap_us = 20;  // a flow nobody waits for gathers its reads (--read-gap-us)
  double read_nap_us = 200;  // without a spin, a flow amid a long message naps (--read-nap-us)
  double delay_us = 0;
  std::uint64_t iterations = 0;  // 0: the profile's
  bool no_tx_timestamps = false;
  std::uint32_t tx_stamp_every = 1;
  std::string tx_sched = "auto";
  std::uint32_t io_threads = 0;  // 0: automatic (automatic_io_threads)
  bool pin = false;
  bool realtime = false;
  bool sched_batch = false;
  std::string congestion_control;  // empty: each host's default
  double connect_timeout_s = 30;
  double idle_timeout_s = 60;
};

// Where the agents of a run replay.
struct RunPlacement {
  TimeScale scale = TimeScale(1);  // the profile replayed is stretched by it
  std::size_t local_agents = 0;  // agents sharing this machine's cores; 0: not local
  unsigned cores = 1;            // this machine's that the run may use (usable_cores())
};

// How many of a run's agents share this machine's cores: all of --local N's, and
// all of a testbed's (its hosts are network namespaces of this machine); 0 when
// they run on other hosts.
std::size_t agents_on_this_machine(std::size_t local, std::size_t testbed_hosts, std::size_t ranks);

// Microseconds of busy-waiting before each deadline: as asked, else 20, or none
// when local agents are as many as the cores or more, or their I/O threads
// (--io-threads each; automatic ones at most their share of the cores) more
// than the cores (spinning costs a core per agent, and a spinning agent delays
// the others).
double spin_us_for(const ReplayOptions& o, const RunPlacement& where);

// How long the controller and its agents wait for a silent peer: the control
// protocol's kHeartbeatTimeout, stretched when this machine's cores are shared
// by more than 16 agents each (kHeartbeatTimeout per 16 agents a core), since an
// idle agent's or the controller's turn on a core then comes late while the
// others start and set up (256 testbed agents on 2 cores).
Nanos heartbeat_for(const RunPlacement& where);

// How many times longer the waits of a run's set-up take on this machine: 1, or
// one more for every 16 agents a core beyond the first 16 (heartbeat_for, and
// make_run_settings' connect timeout).
std::size_t crowding_factor(const RunPlacement& where);

// The options `tensorwire run` gives every agent it starts itself (locally, on a
// testbed, over ssh): quiet, and the heartbeat timeout when heartbeat_for
// stretches it (the controller then waits as long for them).
std::vector<std::string> launched_agent_arguments(const RunPlacement& where);

// The settings of every agent of a run. `replayed` is the profile the agents get
// (already stretched by where.scale): an open-loop plan is made for it, on a link
// where.scale times slower. The connect timeout is stretched by crowding_factor:
// 256 agents on 2 cores dial their flows one after the other. Throws
// std::invalid_argument naming the option that is out of range.
RunSettings make_run_settings(const Profile& replayed, const ReplayOptions& o, const RunPlacement& where);

// The command-line options that give an agent started by `replay --local` these
// replay options (its spin as spin_us_for decides).
std::vector<std::string> agent_arguments(const ReplayOptions& o, const RunPlacement& where);

// Seconds from an option, checked to be in (0, 1 day]; throws
// std::invalid_argument naming the option.
Nanos seconds_option(double s, const char* option);

}  // namespace tw
