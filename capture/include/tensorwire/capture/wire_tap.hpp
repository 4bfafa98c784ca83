// The live wire tap of `tensorwire capture`: libpcap on the job's interfaces,
// TCP headers only, written to DIR/wire-IFACE-HOST-PID.pcap (created exclusively:
// captures sharing DIR never write into one file) by a thread of its own. It
// never touches the job: when the disk or the kernel's buffer cannot keep up, it
// loses packets and says how many.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensorwire/core/units.hpp"

namespace tw {

struct WireTapOptions {
  std::vector<std::string> interfaces;  // "any": every interface, loopback included
  std::string dir;                      // where the pcap files go
  std::string host;                     // with `pid`, in the files' names (capture_dir::wire_file_name)
  int pid = 0;
  int snaplen = 160;                    // link + IP + TCP headers with options
  int buffer_bytes = 64 << 20;          // the kernel's ring per interface
};

struct WireTapReport {
  std::vector<std::string> interfaces, files;
  std::uint64_t packets = 0;          // written
  std::uint64_t dropped = 0;          // lost in the kernel (ring full)
  std::uint64_t interface_dropped = 0;
  std::string error;                  // what stopped it early, if anything
  nlohmann::json to_json() const;
};

class WireTap {
 public:
  // Opens every interface and starts the capture; throws std::runtime_error with
  // libpcap's reason (e.g. no permission) when any of them cannot be opened, or
  // naming the file when it exists already.
  static std::unique_ptr<WireTap> start(const WireTapOptions& options);
  ~WireTap();
  WireTap(const WireTap&) = delete;
  WireTap& operator=(const WireTap&) = delete;

  // Keeps capturing for `linger` (the last acknowledgements), then drains what
  // the kernel holds and closes the files.
  WireTapReport stop(Nanos linger);

 private:
  struct Impl;
  explicit WireTap(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tw
