// The one owner of a capture directory's layout (docs/trace-format.md): what
// `tensorwire capture` writes there and every reader looks for. The name pieces
// are plain constants because the shim, which may not allocate on its hot path
// nor link core, builds its file names from them with snprintf.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tw::capture_dir {

inline constexpr const char* kTracePrefix = "trace-";         // trace-PID[-HOST[-N]].twt and .json
inline constexpr const char* kEventsExtension = ".twt";       // the process's events (binary)
inline constexpr const char* kDescriptionExtension = ".json";  // the process's description
inline constexpr const char* kCaptureFile = "capture.json";   // the session, as one capture wrote it before --append
inline constexpr const char* kSessionPrefix = "capture-";     // capture-HOST-PID.json: one per `tensorwire capture`
inline constexpr const char* kWirePrefix = "wire-";           // wire-IFACE-HOST-PID.pcap (before: wire-IFACE.pcap)
inline constexpr const char* kWireExtension = ".pcap";
inline constexpr const char* kOpsPrefix = "ops-";             // ops-NAME.json: imported profiler ops

// DIR/capture.json: the session file of a capture made before sessions had their own.
std::string capture_file(const std::string& dir);
std::string events_file(const std::string& dir, int pid);
std::string description_file(const std::string& dir, int pid);
// The pcap file of one interface, its name made safe for a file name.
std::string wire_file_name(const std::string& interface);
std::string ops_file(const std::string& dir, const std::string& name);

// Whether a file name in the directory is a process description, or imported ops.
bool is_description(const std::string& file_name);
bool is_ops(const std::string& file_name);

// Several captures may write into one directory at once (one per host into a
// shared directory, one per rank): each `tensorwire capture` names its session
// file and its wire files after its host and pid, and creates them exclusively.
// `part` makes a host or interface name safe in a file name.
inline std::string safe_name_part(const std::string& part) {
  std::string s;
  for (char c : part) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    s += ok ? c : '_';
  }
  return s;
}
inline std::string session_file_name(const std::string& host, int pid) {
  return kSessionPrefix + safe_name_part(host) + "-" + std::to_string(pid) + ".json";
}
inline std::string wire_file_name(const std::string& interface, const std::string& host, int pid) {
  return kWirePrefix + safe_name_part(interface) + "-" + safe_name_part(host) + "-" + std::to_string(pid) + kWireExtension;
}
// capture.json or capture-*.json.
inline bool is_session_file(const std::string& name) {
  const std::string p(kSessionPrefix), e(".json");
  return name == kCaptureFile ||
         (name.size() > p.size() + e.size() && name.compare(0, p.size(), p) == 0 && name.compare(name.size() - e.size(), e.size(), e) == 0);
}
// Any file a capture writes: the processes' traces, session files, wire files.
inline bool is_capture_output(const std::string& name) {
  const auto starts = [&name](const char* p) { return name.rfind(p, 0) == 0; };
  return is_session_file(name) || (starts(kTracePrefix) && (name.ends_with(kEventsExtension) || name.ends_with(kDescriptionExtension))) ||
         (starts(kWirePrefix) && name.ends_with(kWireExtension));
}
// The session files in `dir`, sorted by name (full paths). Throws
// std::runtime_error when `dir` cannot be listed.
std::vector<std::string> session_files(const std::string& dir);

// The most wire files one session file may list.
inline constexpr std::size_t kMaxWireFiles = 1024;

// The wire files that `listed` (a session file's "wire" "files", as read from
// `session`) names, as paths in `dir`. Each must be the plain name of a wire file
// (wire-*.pcap, no directory part) and listed once, at most kMaxWireFiles of
// them: a forged list named /proc/self/mem and ../../etc/passwd, or one file 200
// times (read 200 times over). Throws std::runtime_error "SESSION: why".
std::vector<std::string> listed_wire_files(const std::string& dir, const std::vector<std::string>& listed, const std::string& session);

}  // namespace tw::capture_dir
