#include "tensorwire/capture/capture_session.hpp"

#include <fmt/core.h>
#include <signal.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "tensorwire/capture/wire_tap.hpp"
#include "tensorwire/util/realtime.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/profile_io.hpp"
#include "tensorwire/core/trace.hpp"
#include "tensorwire/launch/child_process.hpp"
#include "tensorwire/util/self_exe.hpp"

namespace tw {

namespace fs = std::filesystem;

CaptureSession::CaptureSession(CaptureOptions options) : o_(std::move(options)) {
  if (o_.command.empty()) throw std::invalid_argument("give the job to run after --, like: tensorwire capture --out DIR -- python3 train.py");
  interfaces_ = tap_interfaces(o_.wire);
  fs::create_directories(o_.out);
  dir_ = fs::canonical(o_.out).string();
  const std::string exe_dir = fs::path(self_exe()).parent_path().string();
  if (const char* p = std::getenv("TW_CAPTURE_LIB")) shim_ = p;
  else shim_ = find_capture_shim(exe_dir);
  if (const char* p = std::getenv("TW_PYTHON_DIR")) python_dir_ = p;
  else python_dir_ = find_python_dir(exe_dir);
}

int CaptureSession::run() {
  // The tap is running before the job's first SYN, so every connection maps onto
  // its stream. Asked for by name, it must work; on auto, the job runs without it.
  wire_ = {{"mode", o_.wire}};
  std::unique_ptr<WireTap> tap;
  if (!interfaces_.empty()) {
    try {
      tap = WireTap::start({.interfaces = interfaces_, .dir = dir_});
    } catch (const std::runtime_error& e) {
      if (o_.wire != "auto") throw;
      wire_["error"] = e.what();
      fmt::print(stderr, "tensorwire capture: no wire tap ({}); the traces hold the application's events and TCP_INFO only\n",
                 e.what());
    }
  }

  SpawnOptions so;
  so.env = capture_environment(shim_, dir_, python_dir_, std::getenv("LD_PRELOAD"), std::getenv("PYTHONPATH"));
  so.die_with_parent = false;  // the job's life is its own
  const Nanos t0 = realtime_ns();
  ChildProcess job = ChildProcess::spawn(o_.command, so);
  // Ctrl-C reaches the job from the terminal; this process waits for it to end.
  // (Ignored only now: the job must not inherit the ignoring.)
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_IGN);
  status_ = job.wait();
  const Nanos t1 = realtime_ns();
  if (tap) {
    // The last acknowledgements follow the job's last send by a round trip.
    const WireTapReport r = tap->stop(200 * kMilli);
    wire_.update(r.to_json());
    if (!r.error.empty()) fmt::print(stderr, "tensorwire capture: wire tap: {}\n", r.error);
  }
  const nlohmann::json j = {{"command", o_.command}, {"started_ns", t0},  {"ended_ns", t1},
                            {"exit", ChildProcess::describe(status_)}, {"wire", wire_}, {"shim", shim_}};
  // The job has run: whatever goes wrong with the capture now is reported, and the
  // exit status stays the job's. The shim stops writing on a full disk without a
  // word (it cannot block or fail the job): say it here.
  if (struct statvfs st{}; ::statvfs(dir_.c_str(), &st) == 0 && st.f_bavail * st.f_frsize < 64 * 1024) {
    fmt::print(stderr, "tensorwire capture: {}: {}; the traces and wire data stop where the space ran out\n", dir_,
               std::strerror(ENOSPC));
  }
  try {
    write_file_atomic(capture_dir::capture_file(dir_), j.dump(2) + "\n");
  } catch (const std::exception& e) {
    fmt::print(stderr, "tensorwire capture: {}; the capture in {} is incomplete\n", e.what(), dir_);
  }
  return status_;
}

std::string CaptureSession::summary() const {
  try {
    const auto traces = read_capture_dir(dir_);
    std::uint64_t events = 0, dropped = 0;
    for (const auto& t : traces) {
      events += t.event_count();
      dropped += t.events_dropped;
    }
    std::string tap_text = "no wire tap";
    if (wire_.contains("packets")) {
      tap_text = fmt::format("wire tap: {} packets, {} lost", wire_["packets"].get<std::uint64_t>(), wire_["dropped"].get<std::uint64_t>());
    }
    return fmt::format("tensorwire capture: the job {}; {} process(es) traced, {} events, {} dropped; {}; traces in {}",
                       ChildProcess::describe(status_), traces.size(), events, dropped, tap_text, dir_);
  } catch (const std::exception& e) {
    return fmt::format("tensorwire capture: the job {}; reading the traces back: {}", ChildProcess::describe(status_), e.what());
  }
}

}  // namespace tw
