// The namespace testbed a run uses, held for the length of the run: brought up
// for it (or re-shaped, when one of that name is up and the run asks for other
// rates), and put back as it was when the lease ends: down if the lease brought
// it up (unless kept), else its own shaping again. Needs root; the thread that
// runs the run owns it. Neither copied nor moved.
//
// A testbed brought up for the run must not outlive the run, however the run
// ends: a guard process (`GUARD_EXE testbed down --name N --when-stdin-closes`, in
// a session of its own, out of reach of the terminal's signals) holds a pipe
// from this process and takes the testbed down, with whatever still runs in it,
// when this process dies without ending the lease (SIGKILL, a crash).
#pragma once

#include <optional>
#include <string>

#include "tensorwire/launch/child_process.hpp"
#include "tensorwire/launch/testbed.hpp"

namespace tw {

class TestbedLease {
 public:
  // `wanted`: the testbed to run on; with no rate and no pair, one that is up is
  // taken as it is. keep: leave a testbed brought up here up afterwards. Throws
  // std::invalid_argument when a testbed of that name is up with another number of
  // hosts, std::runtime_error when bringing it up or shaping it fails. guard_exe:
  // the tensorwire binary to start the guard with (empty: no guard).
  TestbedLease(const TestbedSpec& wanted, bool keep, const std::string& guard_exe = "");
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
  std::optional<ChildProcess> guard_;
};

}  // namespace tw
