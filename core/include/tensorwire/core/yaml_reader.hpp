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

// Names what is being read in messages ("the profile", "op entry 3", "op 'x'").
// Built only when a message needs it: loaders read millions of fields and report
// few problems.
class What {
 public:
  What(const char* text) : text_(text) {}  // NOLINT: implicit on purpose
  What(const std::string& text) : text_(text) {}  // NOLINT: the string outlives the call
  What(const char* kind, std::size_t index) : text_(kind), index_(index), mode_(Mode::index) {}
  What(const char* kind, std::string_view name) : text_(kind), name_(name), mode_(Mode::name) {}

  std::string str() const;

 private:
  enum class Mode { text, index, name };
  std::string_view text_;
  std::string_view name_;
  std::size_t index_ = 0;
  Mode mode_ = Mode::text;
};

inline std::string operator+(const What& w, const std::string& s) { return w.str() + s; }
inline std::string operator+(const What& w, const char* s) { return w.str() + s; }
inline std::string operator+(const std::string& s, const What& w) { return s + w.str(); }
inline std::string operator+(const char* s, const What& w) { return s + w.str(); }

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
  std::vector<const Node*> fields(const Node& map, const What& what, std::initializer_list<std::string_view> keys,
                                  std::initializer_list<std::string_view> required);
  // The items of a list; an absent or null node is an empty list.
  std::span<const Node> list(const Node* n, const What& what);

  const Node* scalar(const Node* n, const What& what, const char* field, const char* expected);
  std::optional<std::uint64_t> uint_field(const Node* n, const What& what, const char* field, std::uint64_t min,
                                          std::uint64_t max);
  std::optional<Nanos> duration_field(const Node* n, const What& what, const char* field, Nanos min, Nanos max);
  std::optional<Bytes> bytes_field(const Node* n, const What& what, const char* field, Bytes max);
  std::optional<std::string> string_field(const Node* n, const What& what, const char* field);
  std::optional<std::string> id_field(const Node* n, const What& what, const char* field);
  std::optional<bool> bool_field(const Node* n, const What& what, const char* field);

 protected:
  const YamlDoc& doc_;
  Diagnostics& diags_;
  bool truncated_ = false;
};

// Parses `text` and reads it with `Reader` (a YamlReader with `read()`); throws
// InputError with every diagnostic if anything is wrong.
template <typename Reader>
auto read_yaml_or_throw(const std::string& text, const std::string& file) {
  Diagnostic syntax;
  const auto doc = YamlDoc::parse(text, file, &syntax);
  if (!doc) throw InputError({syntax});
  Diagnostics diags;
  Reader reader(*doc, diags);
  auto out = reader.read();
  if (!diags.empty()) throw InputError(std::move(diags));
  return out;
}

// The whole content of a file; throws std::runtime_error "path: cannot open: reason".
std::string read_text_file(const std::string& path);

}  // namespace tw
