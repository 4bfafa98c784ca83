#include "tensorwire/launch/testbed_lease.hpp"

#include <csignal>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

namespace tw {

TestbedLease::TestbedLease(const TestbedSpec& wanted, bool keep, const std::string& guard_exe) : spec_(wanted) {
  const bool shaped = spec_.rate > 0 || !spec_.pairs.empty();
  if (const auto up = find_testbed(spec_.name)) {
    if (up->hosts != spec_.hosts) {
      throw std::invalid_argument("--testbed " + std::to_string(spec_.hosts) + ": testbed " + spec_.name + " is up with " +
                                  std::to_string(up->hosts) + " hosts");
    }
    if (shaped) {
      restore_ = *up;
      testbed_reshape(spec_);
    } else {
      spec_ = *up;
    }
  } else {
    testbed_up(spec_);
    brought_up_ = !keep;
    if (brought_up_ && !guard_exe.empty()) {
      SpawnOptions o;
      o.stdin_text = "";  // end-of-file when this process goes, whichever way
      o.die_with_parent = false;
      try {
        guard_.emplace(ChildProcess::spawn({guard_exe, "testbed", "down", "--name", spec_.name, "--when-stdin-closes"}, o));
      } catch (...) {
        testbed_down(spec_.name);
        throw;
      }
    }
  }
}

TestbedLease::~TestbedLease() {
  // The guard first: it must not take down a testbed of this name brought up
  // again after this lease.
  if (guard_) {
    guard_->signal(SIGKILL);
    guard_->wait();
  }
  try {
    if (brought_up_) testbed_down(spec_.name);
    else if (restore_) testbed_reshape(*restore_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensorwire run: putting the testbed back: %s\n", e.what());
  }
}

}  // namespace tw
