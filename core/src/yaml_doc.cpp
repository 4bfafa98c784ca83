#include "tensorwire/core/yaml_doc.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <sstream>

namespace tw {

// Receives yaml-cpp's events and lays the tree out so that every node's children
// are contiguous in the arena: children are gathered on a per-level stack and moved
// into the arena when their container closes.
class YamlDocBuilder final : public YAML::EventHandler {
 public:
  explicit YamlDocBuilder(YamlDoc& doc) : doc_(doc) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { add(leaf(mark, YamlDoc::Kind::null)); }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    fail(mark, "YAML aliases (*name) are not supported in tensorwire files");
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t, const std::string& value) override {
    YamlDoc::Node n = leaf(mark, YamlDoc::Kind::scalar);
    n.value = value;
    // yaml-cpp tags plain scalars "?" and quoted or block scalars "!".
    n.quoted = tag == "!";
    // An explicit ~ or null in a plain scalar is reported as OnNull by yaml-cpp.
    add(std::move(n));
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(mark, YamlDoc::Kind::sequence);
  }
  void OnSequenceEnd() override { close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(mark, YamlDoc::Kind::map);
  }
  void OnMapEnd() override { close(); }

  // Completes the arena: the root goes last.
  void finish() {
    if (levels_.empty() || levels_[0].children.empty()) {
      doc_.nodes_.push_back(YamlDoc::Node{});  // an empty document is a null root
    } else {
      doc_.nodes_.push_back(std::move(levels_[0].children[0]));
    }
    doc_.root_ = static_cast<std::uint32_t>(doc_.nodes_.size() - 1);
  }

 private:
  struct Level {
    YamlDoc::Node container;
    std::vector<YamlDoc::Node> children;
  };

  static YamlDoc::Node leaf(const YAML::Mark& mark, YamlDoc::Kind kind) {
    YamlDoc::Node n;
    n.kind = kind;
    n.line = mark.line + 1;
    n.column = mark.column + 1;
    return n;
  }

  [[noreturn]] static void fail(const YAML::Mark& mark, const std::string& msg) { throw YAML::ParserException(mark, msg); }

  void ensure_top() {
    if (levels_.empty()) levels_.emplace_back();
  }

  void add(YamlDoc::Node n) {
    ensure_top();
    levels_.back().children.push_back(std::move(n));
  }

  void open(const YAML::Mark& mark, YamlDoc::Kind kind) {
    ensure_top();
    if (static_cast<int>(levels_.size()) > YamlDoc::kMaxDepth) {
      fail(mark, "nesting deeper than " + std::to_string(YamlDoc::kMaxDepth) + " levels");
    }
    // Reuse the children vectors of closed levels to avoid reallocations.
    if (spare_.empty()) {
      levels_.emplace_back();
    } else {
      levels_.push_back(std::move(spare_.back()));
      spare_.pop_back();
    }
    levels_.back().container = leaf(mark, kind);
  }

  void close() {
    Level level = std::move(levels_.back());
    levels_.pop_back();
    YamlDoc::Node n = std::move(level.container);
    n.first = static_cast<std::uint32_t>(doc_.nodes_.size());
    n.count = static_cast<std::uint32_t>(level.children.size());
    for (auto& c : level.children) doc_.nodes_.push_back(std::move(c));
    level.children.clear();
    spare_.push_back(std::move(level));
    add(std::move(n));
  }

  YamlDoc& doc_;
  std::vector<Level> levels_;
  std::vector<Level> spare_;
};

std::optional<YamlDoc> YamlDoc::parse(std::istream& in, const std::string& file, Diagnostic* error) {
  YamlDoc doc;
  doc.file_ = file;
  auto set_error = [&](int line, int column, std::string msg) {
    if (error) *error = Diagnostic{file, line, column, std::move(msg)};
  };
  try {
    YAML::Parser parser(in);
    YamlDocBuilder builder(doc);
    parser.HandleNextDocument(builder);
    builder.finish();
    // A second document would be silently ignored by a reader of the first: refuse.
    struct Probe final : YAML::EventHandler {
      int line = 0;
      int column = 0;
      void OnDocumentStart(const YAML::Mark& m) override {
        line = m.line + 1;
        column = m.column + 1;
      }
      void OnDocumentEnd() override {}
      void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
      void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
      void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
      void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
      void OnSequenceEnd() override {}
      void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
      void OnMapEnd() override {}
    };
    // HandleNextDocument returns false when there is no further document.
    Probe probe;
    if (parser.HandleNextDocument(probe)) {
      set_error(probe.line, probe.column, "more than one YAML document; a tensorwire file holds exactly one");
      return std::nullopt;
    }
  } catch (const YAML::Exception& e) {
    const bool known = !e.mark.is_null();
    set_error(known ? e.mark.line + 1 : 0, known ? e.mark.column + 1 : 0, "YAML syntax: " + e.msg);
    return std::nullopt;
  } catch (const std::bad_alloc&) {
    set_error(0, 0, "out of memory while reading the file");
    return std::nullopt;
  }
  return doc;
}

std::optional<YamlDoc> YamlDoc::parse(std::string_view text, const std::string& file, Diagnostic* error) {
  std::istringstream in{std::string(text)};
  return parse(in, file, error);
}

const char* YamlDoc::kind_name(Kind k) {
  switch (k) {
    case Kind::null: return "nothing (null)";
    case Kind::scalar: return "a scalar";
    case Kind::sequence: return "a list";
    case Kind::map: return "a map";
  }
  return "?";
}

}  // namespace tw

