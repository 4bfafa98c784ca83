#include "tensorwire/core/output_check.hpp"

#include <filesystem>
#include <stdexcept>

#include "tensorwire/core/capture_dir.hpp"
#include "tensorwire/core/run_dir.hpp"

namespace tw {

namespace fs = std::filesystem;

void check_output_path(const std::string& out, const std::vector<std::string>& inputs) {
  std::error_code ec;
  const fs::file_status st = fs::status(out, ec);
  if (ec || !fs::exists(st)) return;  // a new file: nothing of the inputs' can be in the way
  if (fs::is_directory(st)) throw std::runtime_error(out + ": is a directory (the output is a file)");
  const std::string name = fs::path(out).filename().string();
  const bool readers_file = run_dir::is_run_file(name) || capture_dir::is_capture_output(name) || capture_dir::is_ops(name);
  for (const std::string& in : inputs) {
    if (fs::equivalent(out, in, ec) && !ec) throw std::runtime_error(out + ": is one of the inputs (" + in + "); write elsewhere");
    ec.clear();
    if (!readers_file || !fs::is_directory(in, ec) || ec) continue;
    const fs::path dir = fs::canonical(in, ec);
    const fs::path parent = fs::canonical(fs::absolute(out).parent_path(), ec);
    if (!ec && parent == dir) throw std::runtime_error(out + ": would overwrite a file of the input " + in + "; write elsewhere");
  }
}

}  // namespace tw
