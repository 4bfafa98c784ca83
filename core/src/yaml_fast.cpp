// The fast path of YamlDoc::parse: a line-oriented reader of the plain YAML subset
// tensorwire writes and people usually type. It gives up (returns nullopt) on
// anything outside the subset or anything wrong, and the reference parser
// (yaml-cpp) takes over; so it never decides what is an error, and the fuzz
// target checks that it builds the same tree as the reference where it succeeds.
//
// The subset: block maps with plain keys; block lists, including "- key: value"
// items and lists at their parent key's indentation; values that are plain
// scalars, quoted scalars without escapes, or flow lists and maps closed on the
// same line; comments; CRLF line ends. Outside it: tabs, non-ASCII bytes,
// anchors, aliases, tags, block scalars, multi-line scalars or flow collections,
// document markers, directives, complex or quoted keys.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tensorwire/core/yaml_doc.hpp"
#include "yaml_tree.hpp"

namespace tw {
namespace {

struct GiveUp {};

using Kind = YamlDoc::Kind;

bool is_null_word(std::string_view s) { return s == "~" || s == "null" || s == "Null" || s == "NULL"; }

// Characters that give a scalar's first character a meaning other than text.
bool is_indicator(char c) {
  switch (c) {
    case '-': case '?': case ':': case ',': case '[': case ']': case '{': case '}': case '#': case '&':
    case '*': case '!': case '|': case '>': case '\'': case '"': case '%': case '@': case '`':
      return true;
    default:
      return false;
  }
}

// Characters the fast path accepts inside a plain scalar. yaml-cpp gives some
// others a meaning even mid-scalar (a '?' in a flow map, say); rather than copy
// each quirk, anything beyond this conservative set goes to the reference.
constexpr std::array<std::uint8_t, 256> make_plain_table() {
  std::array<std::uint8_t, 256> t{};
  constexpr std::uint8_t kBlock = 1, kFlow = 2;
  for (int c = 'a'; c <= 'z'; ++c) t[static_cast<std::size_t>(c)] = kBlock | kFlow;
  for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<std::size_t>(c)] = kBlock | kFlow;
  for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = kBlock | kFlow;
  for (char c : std::string_view(" _.-/@:+#()=~")) t[static_cast<unsigned char>(c)] = kBlock | kFlow;
  t[static_cast<unsigned char>(',')] = kBlock;
  return t;
}
constexpr auto kPlainTable = make_plain_table();

bool plain_char_ok(char c, bool flow) {
  return (kPlainTable[static_cast<unsigned char>(c)] & (flow ? 2 : 1)) != 0;
}

class FastParser {
 public:
  // `text` must be the document's own source: scalars become views into it.
  FastParser(std::string_view text, YamlDoc& doc) : text_(text), tree_(doc) {
    tree_.reserve(node_estimate(text));
  }

  // Room for the whole arena up front: growing it by doubling touched three
  // times its final size, and a first touch is a page fault (16 us a page on a
  // virtual machine here: most of a fresh agent's time loading its slice).
  // About an upper bound: a map entry has a ':' and two nodes, a flow item a ','
  // or its own line. Reserved, not touched, so an overestimate costs nothing;
  // an underestimate costs one doubling. Never more than a node per 2 bytes.
  static std::size_t node_estimate(std::string_view text) {
    std::size_t colons = 0, commas = 0, lines = 0;
    for (const char c : text) {
      colons += c == ':';
      commas += c == ',';
      lines += c == '\n';
    }
    return std::min(2 * colons + commas + lines, text.size() / 2) + 16;
  }

  void run() {
    std::size_t pos = 0;
    while (pos <= text_.size()) {
      std::size_t end = text_.find('\n', pos);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view line = text_.substr(pos, end - pos);
      ++line_no_;
      if (!line.empty() && line.back() == '\r') {
        if (end == text_.size()) throw GiveUp{};  // yaml-cpp reads a final lone CR its own way
        line.remove_suffix(1);
      }
      content_line(line);
      if (end == text_.size()) break;
      pos = end + 1;
    }
    if (pending_) emit_pending_null();
    while (!blocks_.empty()) close_block();
    if (!seen_root_) throw GiveUp{};  // empty documents: let the reference decide
    tree_.finish();
  }

 private:
  struct Block {
    Kind kind;
    int indent;
  };

  void content_line(std::string_view line) {
    for (char c : line) {
      const auto u = static_cast<unsigned char>(c);
      if (u >= 0x80 || u == 0x7f || (u < 0x20)) throw GiveUp{};  // tabs, CR, controls, UTF-8
    }
    while (!line.empty() && line.back() == ' ') line.remove_suffix(1);
    std::size_t i = 0;
    while (i < line.size() && line[i] == ' ') ++i;
    if (i == line.size() || line[i] == '#') return;  // blank or comment
    if (i == 0 && (line.starts_with("---") || line.starts_with("...") || line[0] == '%')) throw GiveUp{};
    const int indent = static_cast<int>(i);
    const std::string_view c = line.substr(i);
    const bool item = is_item(c);

    if (pending_) {
      pending_ = false;
      if (indent > pending_indent_ || (indent == pending_indent_ && pending_kind_ == Kind::map && item)) {
        open_block(item ? Kind::sequence : Kind::map, indent);
        dispatch(indent, c, item);
        return;
      }
      emit_null(pending_line_, pending_col_);
    }
    if (blocks_.empty()) {
      if (seen_root_) throw GiveUp{};
      seen_root_ = true;
      open_block(item ? Kind::sequence : Kind::map, indent);
      dispatch(indent, c, item);
      return;
    }
    while (!blocks_.empty() && blocks_.back().indent > indent) close_block();
    // A list written at its parent key's indentation ends at the next key.
    if (!blocks_.empty() && blocks_.back().kind == Kind::sequence && blocks_.back().indent == indent && !item &&
        blocks_.size() > 1 && blocks_[blocks_.size() - 2].indent == indent) {
      close_block();
    }
    if (blocks_.empty() || blocks_.back().indent != indent) throw GiveUp{};
    dispatch(indent, c, item);
  }

  static bool is_item(std::string_view c) { return c[0] == '-' && (c.size() == 1 || c[1] == ' '); }

  void dispatch(int indent, std::string_view c, bool item) {
    const Block& top = blocks_.back();
    if (top.kind == Kind::sequence) {
      if (!item) throw GiveUp{};
      seq_item(indent, c);
    } else {
      if (item) throw GiveUp{};
      key_line(indent, c);
    }
  }

  void seq_item(int indent, std::string_view c) {
    std::size_t j = 1;
    while (j < c.size() && c[j] == ' ') ++j;
    const int col = indent + static_cast<int>(j);  // 0-based column of the rest
    const std::string_view rest = c.substr(j);
    if (rest.empty() || rest[0] == '#') {
      set_pending(Kind::sequence, indent, col);
      return;
    }
    if (mapping_indicator(rest) != std::string_view::npos) {
      open_block(Kind::map, col);
      key_line(col, rest);
      return;
    }
    inline_value(rest, col);
  }

  // Position of the ':' that makes a plain key, or npos.
  static std::size_t mapping_indicator(std::string_view c) {
    if (is_indicator(c[0])) return std::string_view::npos;
    for (std::size_t j = 0; j < c.size(); ++j) {
      if (c[j] == ':' && (j + 1 == c.size() || c[j + 1] == ' ')) return j;
      if (c[j] == '#' && j > 0 && c[j - 1] == ' ') return std::string_view::npos;
    }
    return std::string_view::npos;
  }

  void key_line(int indent, std::string_view c) {
    const std::size_t k = mapping_indicator(c);
    if (k == std::string_view::npos) throw GiveUp{};
    std::string_view key = c.substr(0, k);
    while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
    if (key.empty() || is_null_word(key)) throw GiveUp{};
    for (char ch : key) {
      if (!plain_char_ok(ch, true)) throw GiveUp{};
    }
    add_scalar(key, false, indent);
    std::size_t j = k + 1;
    while (j < c.size() && c[j] == ' ') ++j;
    const std::string_view rest = c.substr(j);
    if (rest.empty() || rest[0] == '#') {
      set_pending(Kind::map, indent, indent + static_cast<int>(k) + 1);
      return;
    }
    inline_value(rest, indent + static_cast<int>(j));
  }

  // A value that starts and ends on this line, at 0-based column `col`.
  void inline_value(std::string_view s, int col) {
    std::size_t pos = 0;
    if (s[0] == '[' || s[0] == '{') {
      flow(s, pos, col);
    } else if (s[0] == '"' || s[0] == '\'') {
      quoted(s, pos, col);
    } else {
      if (is_indicator(s[0]) && !(s[0] == '-' && s.size() > 1 && s[1] != ' ')) throw GiveUp{};
      std::size_t end = s.size();
      for (std::size_t j = 0; j < s.size(); ++j) {
        if (s[j] == '#' && s[j - 1] == ' ') {
          end = j;
          break;
        }
        if (s[j] == ':' && (j + 1 == s.size() || s[j + 1] == ' ')) throw GiveUp{};
        if (!plain_char_ok(s[j], false)) throw GiveUp{};
      }
      std::string_view v = s.substr(0, end);
      while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
      plain_value(v, col);
      return;
    }
    trailer(s, pos);
  }

  // After a value: nothing, or a comment.
  static void trailer(std::string_view s, std::size_t pos) {
    if (pos == s.size()) return;
    if (s[pos] != ' ') throw GiveUp{};
    while (pos < s.size() && s[pos] == ' ') ++pos;
    if (pos < s.size() && s[pos] != '#') throw GiveUp{};
  }

  void quoted(std::string_view s, std::size_t& pos, int col) {
    const char q = s[pos];
    const int start = col + static_cast<int>(pos);
    std::string unescaped;  // only for '' inside single quotes
    bool escaped = false;
    std::size_t j = pos + 1;
    for (;; ++j) {
      if (j >= s.size()) throw GiveUp{};  // continues on the next line
      if (q == '"' && s[j] == '\\') throw GiveUp{};
      if (s[j] == q) {
        if (q == '\'' && j + 1 < s.size() && s[j + 1] == '\'') {
          escaped = true;
          unescaped += '\'';
          ++j;
          continue;
        }
        break;
      }
      unescaped += s[j];
    }
    const std::string_view verbatim = s.substr(pos + 1, j - pos - 1);
    pos = j + 1;
    add_scalar(escaped ? tree_.own(std::move(unescaped)) : verbatim, true, start);
  }

  void flow(std::string_view s, std::size_t& pos, int col) {
    const bool seq = s[pos] == '[';
    if (!tree_.open(seq ? Kind::sequence : Kind::map, line_no_, col + static_cast<int>(pos) + 1)) throw GiveUp{};
    ++pos;
    const char close = seq ? ']' : '}';
    skip_spaces(s, pos);
    if (pos < s.size() && s[pos] == close) {
      ++pos;
      tree_.close();
      return;
    }
    for (;;) {
      if (!seq) {
        flow_plain(s, pos, col, true);
        if (pos >= s.size() || s[pos] != ':') throw GiveUp{};
        ++pos;
        if (pos >= s.size() || s[pos] != ' ') throw GiveUp{};
        skip_spaces(s, pos);
      }
      flow_item(s, pos, col);
      skip_spaces(s, pos);
      if (pos >= s.size()) throw GiveUp{};
      if (s[pos] == close) {
        ++pos;
        tree_.close();
        return;
      }
      if (s[pos] != ',') throw GiveUp{};
      ++pos;
      skip_spaces(s, pos);
      if (pos >= s.size() || s[pos] == close) throw GiveUp{};  // trailing comma
    }
  }

  void flow_item(std::string_view s, std::size_t& pos, int col) {
    if (pos >= s.size()) throw GiveUp{};
    const char c = s[pos];
    if (c == '[' || c == '{') {
      flow(s, pos, col);
    } else if (c == '"' || c == '\'') {
      quoted(s, pos, col);
    } else {
      flow_plain(s, pos, col, false);
      // "[a: b]" is a one-pair map inside a list: not in the subset.
      if (pos < s.size() && s[pos] == ':') throw GiveUp{};
    }
  }

  // A plain scalar inside a flow collection; stops at , ] } or ": ".
  void flow_plain(std::string_view s, std::size_t& pos, int col, bool key) {
    const std::size_t start = pos;
    if (pos >= s.size() || (is_indicator(s[pos]) && !(s[pos] == '-' && pos + 1 < s.size() && s[pos + 1] != ' ' &&
                                                       s[pos + 1] != ',' && s[pos + 1] != ']' && s[pos + 1] != '}'))) {
      throw GiveUp{};
    }
    std::size_t j = pos;
    for (; j < s.size(); ++j) {
      const char c = s[j];
      if (c == ',' || c == ']' || c == '}') break;
      if (!plain_char_ok(c, true)) throw GiveUp{};
      if (c == '#' && s[j - 1] == ' ') throw GiveUp{};
      if (c == ':' && (j + 1 == s.size() || s[j + 1] == ' ' || s[j + 1] == ',' || s[j + 1] == ']' || s[j + 1] == '}')) break;
    }
    std::string_view v = s.substr(start, j - start);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    if (v.empty()) throw GiveUp{};
    pos = j;
    if (key) {
      if (is_null_word(v)) throw GiveUp{};
      add_scalar(v, false, col + static_cast<int>(start));
    } else {
      plain_value(v, col + static_cast<int>(start));
    }
  }

  static void skip_spaces(std::string_view s, std::size_t& pos) {
    while (pos < s.size() && s[pos] == ' ') ++pos;
  }

  void plain_value(std::string_view v, int col) {
    if (is_null_word(v)) {
      emit_null(line_no_, col + 1);
    } else {
      add_scalar(v, false, col);
    }
  }

  void add_scalar(std::string_view v, bool quoted_scalar, int col0) {
    tree_.add(YamlDoc::Node{Kind::scalar, quoted_scalar, line_no_, col0 + 1, 0, 0, v});
  }

  void emit_null(int line, int col) { tree_.add(YamlDoc::Node{Kind::null, false, line, col, 0, 0, {}}); }

  void set_pending(Kind owner, int indent, int col0) {
    pending_ = true;
    pending_kind_ = owner;
    pending_indent_ = indent;
    pending_line_ = line_no_;
    pending_col_ = col0 + 2;
  }

  void emit_pending_null() {
    pending_ = false;
    emit_null(pending_line_, pending_col_);
  }

  void open_block(Kind kind, int indent) {
    if (!tree_.open(kind, line_no_, indent + 1)) throw GiveUp{};
    blocks_.push_back({kind, indent});
  }

  void close_block() {
    tree_.close();
    blocks_.pop_back();
  }

  std::string_view text_;
  YamlTreeAssembler tree_;
  std::vector<Block> blocks_;
  int line_no_ = 0;
  bool seen_root_ = false;
  bool pending_ = false;
  Kind pending_kind_ = Kind::map;
  int pending_indent_ = 0;
  int pending_line_ = 0;
  int pending_col_ = 0;
};

}  // namespace

bool YamlDoc::parse_fast_into(YamlDoc& doc) {
  try {
    FastParser(*doc.source_, doc).run();
  } catch (const GiveUp&) {
    return false;
  }
  return true;
}

}  // namespace tw
