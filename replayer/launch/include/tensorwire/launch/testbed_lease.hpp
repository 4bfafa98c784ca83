// The namespace testbed a run uses, held for the length of the run: brought up
// for it (or re-shaped, when one of that name is up and the run asks for other
// rates), and put back as it was when the lease ends: down if the lease brought
// it up (unless kept), else its own shaping again. Needs root; the thread that
// runs the run owns it. Neither copied nor moved.
#pragma once

#include <optional>

#include "tensorwire/launch/testbed.hpp"

namespace tw {

class TestbedLease {
 public:
  // `wanted`: the testbed to run on; with no rate and no pair, one that is up is
  // taken as it is. keep: leave a testbed brought up here up afterwards. Throws
  // std::invalid_argument when a testbed of that name is up with another number of
  // hosts, std::runtime_error when bringing it up or shaping it fails.
  TestbedLease(const TestbedSpec& wanted, bool keep);
  // Never throws: a failure to put the testbed back is printed on stderr.
  ~TestbedLease();
  TestbedLease(const TestbedLease&) = delete;
  TestbedLease& operator=(const TestbedLease&) = delete;

  // The testbed as the run finds it.
  const TestbedSpec& spec() const { return spec_; }

 private:
  TestbedSpec spec_;
  std::optional<TestbedSpec> restore_;
  bool brought_up_ = false;
};

}  // namespace tw
