// Internal: lays a YamlDoc out in its arena so that every node's children are
// contiguous. Children are gathered on a per-level stack and moved into the arena
// when their container closes. Shared by the yaml-cpp event path and the fast path.
#pragma once

#include <vector>

#include "tensorwire/core/yaml_doc.hpp"

namespace tw {

class YamlTreeAssembler {
 public:
  explicit YamlTreeAssembler(YamlDoc& doc) : doc_(doc) {}

  void add(YamlDoc::Node n);
  // False when the nesting would exceed YamlDoc::kMaxDepth.
  bool open(YamlDoc::Kind kind, int line, int column);
  void close();
  // Completes the arena: the root goes last.
  void finish();
  std::size_t depth() const { return levels_.empty() ? 0 : levels_.size() - 1; }
  // Keeps a copy of a value that is not verbatim in the source; returns a view of it.
  std::string_view own(std::string value) { return doc_.owned_.emplace_back(std::move(value)); }
  void reserve(std::size_t nodes) { doc_.nodes_.reserve(nodes); }

 private:
  struct Level {
    YamlDoc::Node container;
    std::vector<YamlDoc::Node> children;
  };
  YamlDoc& doc_;
  std::vector<Level> levels_;
  std::vector<Level> spare_;
};

}  // namespace tw
