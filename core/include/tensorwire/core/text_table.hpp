// Left-aligned, space-separated columns for terminal output.
#pragma once

#include <string>
#include <vector>

namespace tw {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  // Each line indented by `indent` spaces, ending in '\n'.
  std::string str(int indent = 0) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace tw
