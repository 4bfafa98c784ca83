#include "tensorwire/core/yaml_doc.hpp"

#include "yaml_tree.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

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
    if (tag == "!") last_quoted_ = mark;
  }

  // The start of the last quoted (or block) scalar: yaml-cpp ends a quoted
  // scalar that is never closed at the end of the file without a word, taking
  // the rest of the file into it.
  const std::optional<YAML::Mark>& last_quoted() const { return last_quoted_; }

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
  std::optional<YAML::Mark> last_quoted_;
};

// Whether the quoted scalar that starts at text[pos] (its quote) is closed.
bool closed_quote(std::string_view text, std::size_t pos) {
  if (pos >= text.size() || (text[pos] != '"' && text[pos] != '\'')) return true;  // a block scalar, or not where thought
  const char q = text[pos];
  for (std::size_t i = pos + 1; i < text.size(); ++i) {
    if (q == '"' && text[i] == '\\') {
      ++i;  // the escaped character
    } else if (text[i] == q) {
      if (q == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is a quote inside single quotes
      } else {
        return true;
      }
    }
  }
  return false;
}

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

namespace {

// YAML text is Unicode (here UTF-8) of printable characters (YAML 1.2,
// c-printable): tab, line feed, carriage return, U+0020-U+007E, U+0085,
// U+00A0-U+D7FF, U+E000-U+FFFD, U+10000-U+10FFFF. The first byte that is not,
// with its line and column (counted in characters); nothing when all are.
struct BadText {
  int line = 1, column = 1;
  std::string what;
};

// Flow collections ([ and {) nested deeper than YamlDoc::kMaxDepth, found before
// yaml-cpp reads them: its scanner keeps state per open bracket, and 16 MiB of
// '[' took 3.9 GB before the event handler's depth check saw the first of them.
// Brackets inside quoted scalars and comments are not counted; a quote counts as
// one only where a scalar may start (so the apostrophe of don't is no quote).
// This reading of YAML can miscount (a bracket in a plain or block scalar, a
// stray quote), so it only guards memory, at kMostBrackets; the exact bound
// (YamlDoc::kMaxDepth) is the event handler's.
constexpr int kMostBrackets = 4096;
std::optional<BadText> first_too_deep(std::string_view t) {
  int line = 1, column = 1;
  int depth = 0;
  char quote = 0;
  bool comment = false;
  char before = '\n';  // the last character outside quotes and comments
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '\n') {
      ++line;
      column = 1;
      comment = false;
      if (quote == 0) before = c;
      continue;
    }
    ++column;
    if (comment) continue;
    if (quote != 0) {
      if (quote == '"' && c == '\\') {
        ++i, ++column;
      } else if (c == quote) {
        if (quote == '\'' && i + 1 < t.size() && t[i + 1] == '\'') {
          ++i, ++column;
        } else {
          quote = 0;
        }
      }
      continue;
    }
    const bool scalar_may_start = before == '\n' || before == ' ' || before == '\t' || before == '[' || before == '{' || before == ',' ||
                                  before == ':' || before == '-';
    if ((c == '"' || c == '\'') && scalar_may_start) {
      quote = c;
    } else if (c == '#' && (before == ' ' || before == '\t' || before == '\n')) {
      comment = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMostBrackets) return BadText{line, column - 1, "brackets nested deeper than " + std::to_string(kMostBrackets) + " levels"};
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    before = c;
  }
  return std::nullopt;
}
std::optional<BadText> first_bad_text(std::string_view t) {
  BadText at;
  const auto hex = [](unsigned v) {
    static const char* d = "0123456789abcdef";
    return std::string("0x") + d[(v >> 4) & 15] + d[v & 15];
  };
  for (std::size_t i = 0; i < t.size();) {
    const auto b = static_cast<unsigned char>(t[i]);
    std::size_t len = 1;
    std::uint32_t cp = b;
    bool ok = true;
    if (b >= 0x80) {
      len = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
      ok = len > 0 && i + len <= t.size();
      if (ok) {
        cp = b & (len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07);
        for (std::size_t k = 1; k < len && ok; ++k) {
          const auto c = static_cast<unsigned char>(t[i + k]);
          ok = (c & 0xc0) == 0x80;
          cp = (cp << 6) | (c & 0x3f);
        }
        // No overlong forms, no surrogates, nothing past U+10FFFF.
        ok = ok && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) && !(cp >= 0xd800 && cp <= 0xdfff);
      }
      if (!ok) {
        at.what = "byte " + hex(b) + " is not UTF-8 (YAML files are UTF-8 text)";
        return at;
      }
    }
    const bool printable = cp == '\t' || cp == '\n' || cp == '\r' || (cp >= 0x20 && cp <= 0x7e) || cp == 0x85 ||
                           (cp >= 0xa0 && cp <= 0xd7ff) || (cp >= 0xe000 && cp <= 0xfffd) || cp >= 0x10000;
    if (!printable) {
      at.what = cp < 0x100 ? "control character " + hex(cp) + " (a YAML file holds printable text)"
                           : "character U+" + hex(cp >> 8).substr(2) + hex(cp & 0xff).substr(2) + " is not allowed in YAML";
      return at;
    }
    if (cp == '\n') {
      ++at.line;
      at.column = 1;
    } else {
      ++at.column;
    }
    i += len;
  }
  return std::nullopt;
}

}  // namespace

std::optional<YamlDoc> YamlDoc::parse_reference(std::string_view text, const std::string& file, Diagnostic* error) {
  YamlDoc doc;
  doc.file_ = file;
  auto set_error = [&](int line, int column, std::string msg) {
    if (error) *error = Diagnostic{file, line, column, std::move(msg)};
  };
  // yaml-cpp takes bytes that are not UTF-8 into its strings, which no JSON
  // output can then carry, and reads a NUL as the end of an escape.
  if (const auto bad = first_bad_text(text)) {
    set_error(bad->line, bad->column, bad->what);
    return std::nullopt;
  }
  if (const auto deep = first_too_deep(text)) {
    set_error(deep->line, deep->column, deep->what);
    return std::nullopt;
  }
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    EventBuilder builder(doc);
    parser.HandleNextDocument(builder);
    if (const auto& q = builder.last_quoted(); q && q->pos >= 0 && !closed_quote(text, static_cast<std::size_t>(q->pos))) {
      set_error(q->line + 1, q->column + 1, "a quoted string that is never closed: it runs to the end of the file");
      return std::nullopt;
    }
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

