// One agent's result files: received as the agent uploads them (a `file`
// message, then its bytes in binary frames), then moved onto the controller's
// clock in the run directory. An uploaded file is untrusted input: only the two
// files an agent writes for its own rank are accepted, announced sizes are
// checked against what arrives, and a records file's header, size and record
// kinds are checked before anything is merged.
//
// Called on the controller's thread only; file I/O, no sockets.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tensorwire/controller/clock_sync.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/protocol/control_messages.hpp"

namespace tw {

class ResultCollector {
 public:
  ResultCollector(std::string out_dir, RankId rank);
  // Removes the raw uploads left: a file cut off by the agent's death, or files
  // never merged. Only whole, merged files stay in the run directory.
  ~ResultCollector();
  ResultCollector(const ResultCollector&) = delete;
  ResultCollector& operator=(const ResultCollector&) = delete;

  // Each throws std::runtime_error with a reason that follows "sent " or an
  // agent's name ("a file \"x\" that is not its results").
  void begin(const control::FileBegin& f);
  void data(std::string_view bytes);

  bool in_file() const { return file_ != nullptr; }
  const std::vector<std::string>& files() const { return files_; }  // complete, by name

  // Writes every received file onto the controller's clock (the summary also
  // gets `host` and its `clock`); removes the raw uploads. Throws
  // std::runtime_error naming the file and `who` on a bad file.
  void merge(const ClockTrack& clock, const std::string& host, const std::string& who) const;

 private:
  void end();
  std::string out_dir_;
  RankId rank_;
  std::string name_;  // of the file being received
  std::uint64_t left_ = 0;
  std::uint64_t got_ = 0;
  std::unique_ptr<std::ofstream> file_;
  std::vector<std::string> files_;
};

}  // namespace tw
