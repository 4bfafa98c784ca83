#include "tensorwire/capture/capture_session.hpp"

#include <fmt/core.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "tensorwire/capture/wire_tap.hpp"
#include "tensorwire/util/realtime.hpp"
#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/data_file.hpp"
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
  if (!o_.append) {
    if (const std::string f = existing_capture_file(dir_); !f.empty()) {
      throw std::runtime_error(dir_ + ": holds a capture already (" + f + "); give --append to add this one to it, or another --out");
    }
  }
  const std::string exe_dir = fs::path(self_exe()).parent_path().string();
  if (const char* p = std::getenv("TW_CAPTURE_LIB")) shim_ = p;
  else shim_ = find_capture_shim(exe_dir);
  if (const char* p = std::getenv("TW_PYTHON_DIR")) python_dir_ = p;
  else python_dir_ = find_python_dir(exe_dir);
}

int CaptureSession::run() {
  // This capture's own session file, claimed before anything else is written:
  // captures sharing the directory never write into each other's files.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  host_ = host;
  const int pid = static_cast<int>(::getpid());
  session_file_ = dir_ + "/" + capture_dir::session_file_name(host_, pid);
  const int claim = ::open(session_file_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (claim < 0) throw std::runtime_error(session_file_ + ": " + std::strerror(errno));
  ::close(claim);
  const Nanos t0 = realtime_ns();
  // Until the job has run, readers of the directory see that it is running.
  write_file_atomic(session_file_, json_text(nlohmann::json{{"command", o_.command}, {"started_ns", t0}, {"host", host_}, {"pid", pid},
                                                  {"wire", {{"mode", o_.wire}, {"error", "the capture is still running"}}}}, 2) + "\n");
  wire_ = {{"mode", o_.wire}};
  std::unique_ptr<WireTap> tap;
  SpawnOptions so;
  so.env = capture_environment(shim_, dir_, python_dir_, std::getenv("LD_PRELOAD"), std::getenv("PYTHONPATH"), o_.samples);
  so.die_with_parent = false;  // the job's life is its own
  ChildProcess job = [&] {
    try {
      // The tap is running before the job's first SYN, so every connection maps onto
      // its stream. Asked for by name, it must work; on auto, the job runs without it.
      if (!interfaces_.empty()) {
        try {
          tap = WireTap::start({.interfaces = interfaces_, .dir = dir_, .host = host_, .pid = pid});
        } catch (const std::runtime_error& e) {
          if (o_.wire != "auto") throw;
          wire_["error"] = e.what();
          fmt::print(stderr, "tensorwire capture: no wire tap ({}); the traces hold the application's events and TCP_INFO only\n",
                     e.what());
        }
      }
      return ChildProcess::spawn(o_.command, so);
    } catch (...) {
      tap.reset();
      std::error_code ec;
      fs::remove(session_file_, ec);  // nothing ran: no session
      throw;
    }
  }();
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
  const nlohmann::json j = {{"command", o_.command}, {"started_ns", t0},  {"ended_ns", t1}, {"host", host_}, {"pid", pid},
                            {"exit", ChildProcess::describe(status_)}, {"wire", wire_}, {"shim", shim_}};
  // The job has run: whatever goes wrong with the capture now is reported, and the
  // exit status stays the job's. The shim stops writing on a full disk without a
  // word (it cannot block or fail the job): say it here.
  if (struct statvfs st{}; ::statvfs(dir_.c_str(), &st) == 0 && st.f_bavail * st.f_frsize < 64 * 1024) {
    fmt::print(stderr, "tensorwire capture: {}: {}; the traces and wire data stop where the space ran out\n", dir_,
               std::strerror(ENOSPC));
  }
  try {
    write_file_atomic(session_file_, json_text(j, 2) + "\n");
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
