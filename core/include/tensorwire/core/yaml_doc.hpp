// A YAML document as a compact read-only tree that remembers where each node is.
//
// Two parsers build it. yaml-cpp's event parser is the reference: it reads all of
// YAML, and its errors are the ones users see. It is also slow (about 2 MB/s here,
// most of it in its scanner), so a fast path reads the plain subset that
// tensorwire writes and most people type: block maps and lists, one-line flow
// maps and lists, plain and simply quoted scalars, comments. Anything else (or
// anything wrong) makes the fast path give up and the reference parser run. The
// fuzz target checks that both build the same tree wherever the fast path
// succeeds. Both refuse what a profile never needs: aliases (which can expand
// exponentially), nesting deeper than kMaxDepth, more than one document.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <istream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorwire/core/diagnostic.hpp"

namespace tw {

class YamlDoc {
 public:
  enum class Kind : std::uint8_t { null, scalar, sequence, map };

  struct Node {
    Kind kind = Kind::null;
    bool quoted = false;  // a scalar written in quotes (or a block scalar): never a number
    int line = 0;  // 1-based
    int column = 0;  // 1-based
    std::uint32_t first = 0;  // index of the first child in the arena
    std::uint32_t count = 0;  // children; a map's are key, value, key, value...
    std::string_view value;  // scalar text, owned by the YamlDoc
  };

  static constexpr int kMaxDepth = 64;

  YamlDoc() = default;
  YamlDoc(YamlDoc&&) = default;
  YamlDoc& operator=(YamlDoc&&) = default;
  YamlDoc(const YamlDoc&) = delete;  // nodes point into the document's own text
  YamlDoc& operator=(const YamlDoc&) = delete;

  // Parses text; on a syntax error returns nullopt and sets *error (file:line:col).
  static std::optional<YamlDoc> parse(std::istream& in, const std::string& file, Diagnostic* error);
  static std::optional<YamlDoc> parse(std::string text, const std::string& file, Diagnostic* error);
  // The fast path alone: nullopt when the text leaves its subset (or is invalid).
  static std::optional<YamlDoc> parse_fast(std::string_view text, const std::string& file);
  // yaml-cpp alone.
  static std::optional<YamlDoc> parse_reference(std::string_view text, const std::string& file, Diagnostic* error);

  const Node& root() const { return nodes_[root_]; }
  std::span<const Node> children(const Node& n) const { return {nodes_.data() + n.first, n.count}; }
  const std::string& file() const { return file_; }
  std::size_t size() const { return nodes_.size(); }

  static const char* kind_name(Kind k);

 private:
  friend class YamlTreeAssembler;
  // The fast path over source_; false (and the document left to be discarded)
  // when the text leaves its subset.
  static bool parse_fast_into(YamlDoc& doc);

  // Scalars are views into source_ (fast path) or owned_ (unescaped values, the
  // reference path). Both keep their addresses when the document moves.
  std::unique_ptr<std::string> source_;
  std::deque<std::string> owned_;
  std::vector<Node> nodes_;
  std::uint32_t root_ = 0;
  std::string file_;
};

}  // namespace tw
