// The one owner of a capture directory's layout (docs/trace-format.md): what
// `tensorwire capture` writes there and every reader looks for. The name pieces
// are plain constants because the shim, which may not allocate on its hot path
// nor link core, builds its file names from them with snprintf.
#pragma once

#include <string>

namespace tw::capture_dir {

inline constexpr const char* kTracePrefix = "trace-";         // trace-PID.twt and trace-PID.json
inline constexpr const char* kEventsExtension = ".twt";       // the process's events (binary)
inline constexpr const char* kDescriptionExtension = ".json";  // the process's description
inline constexpr const char* kCaptureFile = "capture.json";   // the session: command, wire tap
inline constexpr const char* kWirePrefix = "wire-";           // wire-IFACE.pcap
inline constexpr const char* kWireExtension = ".pcap";
inline constexpr const char* kOpsPrefix = "ops-";             // ops-NAME.json: imported profiler ops

std::string capture_file(const std::string& dir);
std::string events_file(const std::string& dir, int pid);
std::string description_file(const std::string& dir, int pid);
// The pcap file of one interface, its name made safe for a file name.
std::string wire_file_name(const std::string& interface);
std::string ops_file(const std::string& dir, const std::string& name);

// Whether a file name in the directory is a process description, or imported ops.
bool is_description(const std::string& file_name);
bool is_ops(const std::string& file_name);

}  // namespace tw::capture_dir
