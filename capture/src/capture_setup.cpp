#include "tensorwire/capture/capture_setup.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "tensorwire/core/capture_dir.hpp"

namespace tw {

namespace fs = std::filesystem;

std::vector<std::string> tap_interfaces(const std::string& wire) {
  if (wire == "off") return {};
  if (wire == "auto") return {"any"};
  std::vector<std::string> out;
  std::string cur;
  for (char c : wire + ",") {
    if (c != ',') {
      cur += c;
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (out.empty()) throw std::invalid_argument("--wire " + wire + ": give auto, off, or interface names like lo,eth0");
  return out;
}

std::string find_capture_shim(const std::string& exe_dir) {
  const fs::path exe = exe_dir;
  for (const fs::path& candidate : {exe / "../capture/libtensorwire_capture.so", exe / "../lib/tensorwire/libtensorwire_capture.so",
                                    exe / "libtensorwire_capture.so"}) {
    if (fs::exists(candidate)) return fs::canonical(candidate).string();
  }
  throw std::runtime_error("cannot find libtensorwire_capture.so next to " + exe.string() + " (set TW_CAPTURE_LIB)");
}

std::string find_python_dir(const std::string& exe_dir) {
  const fs::path exe = exe_dir;
  for (const fs::path& candidate : {exe / "../../python", exe / "../lib/tensorwire/python", exe / "../python"}) {
    if (fs::exists(candidate / "tensorwire/annotate.py")) return fs::canonical(candidate).string();
  }
  return {};
}

std::vector<std::string> capture_environment(const std::string& shim, const std::string& dir, const std::string& python_dir,
                                             const char* old_preload, const char* old_pythonpath, bool samples) {
  std::string preload = shim;
  if (old_preload && *old_preload) preload += std::string(":") + old_preload;
  std::vector<std::string> env = {"LD_PRELOAD=" + preload, "TW_CAPTURE_DIR=" + dir};
  if (!python_dir.empty()) {  // import tensorwire.annotate
    env.push_back("PYTHONPATH=" + python_dir + (old_pythonpath && *old_pythonpath ? std::string(":") + old_pythonpath : std::string()));
  }
  if (!samples) env.push_back("TW_CAPTURE_SAMPLES=0");
  return env;
}

std::string existing_capture_file(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (capture_dir::is_capture_output(name)) found.push_back(name);
  }
  return found.empty() ? std::string() : *std::min_element(found.begin(), found.end());
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace tw
