// Reading typed fields out of a YamlDoc while collecting diagnostics: the shared
// machinery of every tensorwire file loader (profiles, model tensor lists, ...).
// Each getter reports a problem at the node's position and returns nullopt; a
// missing optional field (nullptr) returns nullopt silently.
#pragma once

#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorwire/core/diagnostic.hpp"
#include "tensorwire/core/units.hpp"
#include "tensorwire/core/yaml_doc.hpp"

namespace tw {

// 'text', shortened for messages.
std::string quote(std::string_view s);
// How a node reads in a message: its text if a scalar, else its kind.
std::string describe(const YamlDoc::Node& n);
// Names of ops, flows and the like: 1 to 256 of [A-Za-z0-9_.-/#].
bool valid_id(std::string_view id);

class YamlReader {
 public:
  using Node = YamlDoc::Node;
  using Kind = YamlDoc::Kind;

  YamlReader(const YamlDoc& doc, Diagnostics& diags) : doc_(doc), diags_(diags) {}

  bool truncated() const { return truncated_; }

  void error_at(const std::string& file, int line, int column, std::string msg);
  void error(const Node& at, std::string msg) { error_at(doc_.file(), at.line, at.column, std::move(msg)); }

  // Looks up `keys` in a map; reports unknown (with a "did you mean"), repeated and
  // missing required keys. Returns one entry per key of `keys`, nullptr if absent.
  std::vector<const Node*> fields(const Node& map, const std::string& what, std::initializer_list<const char*> keys,
                                  std::initializer_list<const char*> required);
  // The items of a list; an absent or null node is an empty list.
  std::span<const Node> list(const Node* n, const std::string& what);

  const Node* scalar(const Node* n, const std::string& what, const char* field, const char* expected);
  std::optional<std::uint64_t> uint_field(const Node* n, const std::string& what, const char* field, std::uint64_t min,
                                          std::uint64_t max);
  std::optional<Nanos> duration_field(const Node* n, const std::string& what, const char* field, Nanos min, Nanos max);
  std::optional<Bytes> bytes_field(const Node* n, const std::string& what, const char* field, Bytes max);
  std::optional<std::string> string_field(const Node* n, const std::string& what, const char* field);
  std::optional<std::string> id_field(const Node* n, const std::string& what, const char* field);
  std::optional<bool> bool_field(const Node* n, const std::string& what, const char* field);

 protected:
  const YamlDoc& doc_;
  Diagnostics& diags_;
  bool truncated_ = false;
};

}  // namespace tw
