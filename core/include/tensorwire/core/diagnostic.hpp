// A problem found in an input file, with where it is. Loaders collect all of them
// rather than stopping at the first, so a user fixes a file in one pass.
#pragma once

#include <exception>
#include <string>
#include <vector>

namespace tw {

struct Diagnostic {
  std::string file;
  int line = 0;  // 1-based; 0 when the position is unknown
  int column = 0;  // 1-based; 0 when unknown
  std::string message;

  // "file:line:col: message" (or "file:line: message", "file: message").
  std::string str() const;
};

using Diagnostics = std::vector<Diagnostic>;

// Loaders stop collecting after this many problems (and say so).
inline constexpr std::size_t kMaxDiagnostics = 200;

// Thrown by loaders that cannot return partial results; carries all diagnostics.
class InputError : public std::exception {
 public:
  explicit InputError(Diagnostics diagnostics);
  const char* what() const noexcept override { return what_.c_str(); }
  const Diagnostics& diagnostics() const { return diagnostics_; }

 private:
  Diagnostics diagnostics_;
  std::string what_;
};

// Closest candidate within a small edit distance, for "did you mean" hints; empty
// when nothing is close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace tw
