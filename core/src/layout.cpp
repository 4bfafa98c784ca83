#include <cctype>
#include <filesystem>

#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/run_dir.hpp"

namespace tw {

namespace {
std::string in(const std::string& dir, const std::string& name) { return (std::filesystem::path(dir) / name).string(); }
bool has(const std::string& name, const char* prefix, const char* extension) {
  const std::string p(prefix), e(extension);
  return name.size() > p.size() + e.size() && name.compare(0, p.size(), p) == 0 &&
         name.compare(name.size() - e.size(), e.size(), e) == 0;
}
}  // namespace

namespace capture_dir {

std::string capture_file(const std::string& dir) { return in(dir, kCaptureFile); }
std::string events_file(const std::string& dir, int pid) {
  return in(dir, kTracePrefix + std::to_string(pid) + kEventsExtension);
}
std::string description_file(const std::string& dir, int pid) {
  return in(dir, kTracePrefix + std::to_string(pid) + kDescriptionExtension);
}
std::string wire_file_name(const std::string& interface) {
  std::string s;
  for (char c : interface) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return kWirePrefix + s + kWireExtension;
}
std::string ops_file(const std::string& dir, const std::string& name) { return in(dir, kOpsPrefix + name + ".json"); }
bool is_description(const std::string& file_name) { return has(file_name, kTracePrefix, kDescriptionExtension); }
bool is_ops(const std::string& file_name) { return has(file_name, kOpsPrefix, ".json"); }

}  // namespace capture_dir

namespace run_dir {

std::string records_name(RankId rank) { return "rank-" + std::to_string(rank) + ".twr"; }
std::string summary_name(RankId rank) { return "rank-" + std::to_string(rank) + ".json"; }
std::string records_file(const std::string& dir, RankId rank) { return in(dir, records_name(rank)); }
std::string summary_file(const std::string& dir, RankId rank) { return in(dir, summary_name(rank)); }
std::string profile_file(const std::string& dir) { return in(dir, "profile.yaml"); }
std::string run_file(const std::string& dir) { return in(dir, "run.json"); }
std::string compare_file(const std::string& dir) { return in(dir, "compare.json"); }
std::string logs_dir(const std::string& dir) { return in(dir, "logs"); }

}  // namespace run_dir

}  // namespace tw
