// Checks a finished replay against its profile from the recorded results alone:
// every message of every iteration was sent once and received once, whole; and
// no op started before its dependencies completed (plus its gap). Used by the
// tests and by people who want to trust a run.
#pragma once

#include <string>
#include <vector>

#include "tensorwire/core/records.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw {

struct RunCheckOptions {
  std::uint64_t iterations = 0;  // 0: the profile's
  bool open_loop = false;  // dependencies are not expected to hold
  // Clock skew allowed between ranks (their records share CLOCK_REALTIME, read
  // by different processes or hosts).
  Nanos cross_rank_tolerance = 50 * kMicro;
  // How much earlier than its own rank's dependency and gap allow an op may
  // start: agents that do not spin set their timers up to kMaxTimerLead early.
  Nanos own_rank_tolerance = 0;
};

struct RunCheck {
  std::vector<std::string> problems;  // empty when the run is sound (at most 50 listed)
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
  std::uint64_t dependencies_checked = 0;
};

// `ranks[r]` holds the records of rank r.
RunCheck check_run(const Profile& profile, const std::vector<std::vector<Record>>& ranks, const RunCheckOptions& options);

}  // namespace tw
