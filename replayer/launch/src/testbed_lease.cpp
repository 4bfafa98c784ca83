#include "tensorwire/launch/testbed_lease.hpp"

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

namespace tw {

TestbedLease::TestbedLease(const TestbedSpec& wanted, bool keep) : spec_(wanted) {
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
  }
}

TestbedLease::~TestbedLease() {
  try {
    if (brought_up_) testbed_down(spec_.name);
    else if (restore_) testbed_reshape(*restore_);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensorwire run: putting the testbed back: %s\n", e.what());
  }
}

}  // namespace tw
