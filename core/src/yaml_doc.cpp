#include "tensorwire/core/yaml_doc.hpp"

#include "yaml_tree.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <sstream>

namespace tw {

void YamlTreeAssembler::add(YamlDoc::Node n) {
  if (levels_.empty()) levels_.emplace_back();
  levels_.back().children.push_back(std::move(n));
}

bool YamlTreeAssembler::open(YamlDoc::Kind kind, int line, int column) {
  if (levels_.empty()) levels_.emplace_back();
  if (static_cast<int>(levels_.size()) > YamlDoc::kMaxDepth) return false;
  // Reuse the children vectors of closed levels to avoid reallocations.
  if (spare_.empty()) {
    levels_.emplace_back();
  } else {
    levels_.push_back(std::move(spare_.back()));
    spare_.pop_back();
  }
  levels_.back().container = YamlDoc::Node{kind, false, line, column, 0, 0, {}};
  return true;
}

void YamlTreeAssembler::close() {
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

void YamlTreeAssembler::finish() {
  if (levels_.empty() || levels_[0].children.empty()) {
    doc_.nodes_.push_back(YamlDoc::Node{});  // an empty document is a null root
  } else {
    doc_.nodes_.push_back(std::move(levels_[0].children[0]));
  }
  doc_.root_ = static_cast<std::uint32_t>(doc_.nodes_.size() - 1);
}

namespace {

// Receives yaml-cpp's events and hands them to the assembler.
class EventBuilder final : public YAML::EventHandler {
 public:
  explicit EventBuilder(YamlDoc& doc) : tree_(doc) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {
    tree_.add(YamlDoc::Node{YamlDoc::Kind::null, false, mark.line + 1, mark.column + 1, 0, 0, {}});
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    throw YAML::ParserException(mark, "YAML aliases (*name) are not supported in tensorwire files");
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t, const std::string& value) override {
    // yaml-cpp tags plain scalars "?" and quoted or block scalars "!"; a plain ~ or
    // null arrives as OnNull.
    tree_.add(YamlDoc::Node{YamlDoc::Kind::scalar, tag == "!", mark.line + 1, mark.column + 1, 0, 0, tree_.own(value)});
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(mark, YamlDoc::Kind::sequence);
  }
  void OnSequenceEnd() override { tree_.close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(mark, YamlDoc::Kind::map);
  }
  void OnMapEnd() override { tree_.close(); }

  void finish() { tree_.finish(); }

 private:
  void open(const YAML::Mark& mark, YamlDoc::Kind kind) {
    if (!tree_.open(kind, mark.line + 1, mark.column + 1)) {
      throw YAML::ParserException(mark, "nesting deeper than " + std::to_string(YamlDoc::kMaxDepth) + " levels");
    }
  }

  YamlTreeAssembler tree_;
};

// Tells whether a further document follows; ignores its content.
struct DocumentProbe final : YAML::EventHandler {
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

}  // namespace

std::optional<YamlDoc> YamlDoc::parse_reference(std::string_view text, const std::string& file, Diagnostic* error) {
  YamlDoc doc;
  doc.file_ = file;
  auto set_error = [&](int line, int column, std::string msg) {
    if (error) *error = Diagnostic{file, line, column, std::move(msg)};
  };
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    EventBuilder builder(doc);
    parser.HandleNextDocument(builder);
    builder.finish();
    // A second document would be silently ignored by a reader of the first: refuse.
    DocumentProbe probe;
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

std::optional<YamlDoc> YamlDoc::parse(std::string text, const std::string& file, Diagnostic* error) {
  YamlDoc doc;
  doc.file_ = file;
  doc.source_ = std::make_unique<std::string>(std::move(text));
  if (parse_fast_into(doc)) return doc;
  return parse_reference(*doc.source_, file, error);
}

std::optional<YamlDoc> YamlDoc::parse_fast(std::string_view text, const std::string& file) {
  YamlDoc doc;
  doc.file_ = file;
  doc.source_ = std::make_unique<std::string>(text);
  if (parse_fast_into(doc)) return doc;
  return std::nullopt;
}

std::optional<YamlDoc> YamlDoc::parse(std::istream& in, const std::string& file, Diagnostic* error) {
  // A file is read at its size in one go: a stream copied into a growing buffer
  // touched (and page-faulted) about three times the file's size.
  std::string text;
  const std::istream::pos_type start = in.tellg();
  if (start != std::istream::pos_type(-1) && in.seekg(0, std::ios::end)) {
    const std::istream::pos_type end = in.tellg();
    in.seekg(start);
    if (end != std::istream::pos_type(-1) && end > start) {
      text.resize(static_cast<std::size_t>(end - start));
      in.read(text.data(), static_cast<std::streamsize>(text.size()));
      text.resize(static_cast<std::size_t>(in.gcount()));
    }
  }
  in.clear(in.rdstate() & ~(std::ios::eofbit | std::ios::failbit));
  // Whatever the size did not cover (a stream that cannot seek, a file that grew).
  if (in.good() && in.peek() != std::istream::traits_type::eof()) {
    std::ostringstream rest;
    rest << in.rdbuf();
    text += std::move(rest).str();
  }
  return parse(std::move(text), file, error);
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

