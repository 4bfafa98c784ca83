#include "tensorwire/core/yaml_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include "tensorwire/core/data_file.hpp"
#include "tensorwire/core/profile.hpp"
#include "tensorwire/util/printable.hpp"

namespace tw {

std::string quote(std::string_view s) {
  constexpr std::size_t kShown = 60;
  std::string out = "'";
  // What an error quotes was read from a file: control characters escaped (a NUL,
  // an escape sequence for the terminal).
  out += printable(s.size() > kShown ? s.substr(0, kShown) : s);
  if (s.size() > kShown) out += "...";
  return out + "'";
}

std::string describe(const YamlDoc::Node& n) {
  if (n.kind == YamlDoc::Kind::scalar) return quote(n.value);
  return YamlDoc::kind_name(n.kind);
}

bool valid_id(std::string_view id) {
  if (id.empty() || id.size() > limits::kMaxIdLength) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-' || c == '/' || c == '#';
  });
}

std::string read_text_file(const std::string& path) {
  return read_data_file_text(path, limits::kMaxProfileFile);
}

std::string What::str() const {
  switch (mode_) {
    case Mode::index: return std::string(text_) + " " + std::to_string(index_);
    case Mode::name: return std::string(text_) + " " + quote(name_);
    case Mode::text: break;
  }
  return std::string(text_);
}

void YamlReader::error_at(const std::string& file, int line, int column, std::string msg) {
  if (diags_.size() < kMaxDiagnostics) {
    diags_.push_back({file, line, column, std::move(msg)});
  } else {
    truncated_ = true;
  }
}

std::vector<const YamlReader::Node*> YamlReader::fields(const Node& map, const What& what, std::initializer_list<std::string_view> keys,
                                std::initializer_list<std::string_view> required) {
  std::vector<const Node*> out(keys.size(), nullptr);
  if (map.kind != Kind::map) {
    error(map, what + " must be a map, got " + describe(map));
    return out;
  }
  const auto kids = doc_.children(map);
  for (std::size_t i = 0; i + 1 < kids.size(); i += 2) {
    const Node& k = kids[i];
    if (k.kind != Kind::scalar) {
      error(k, what + ": a key must be a plain name, got " + describe(k));
      continue;
    }
    std::size_t j = 0;
    for (std::string_view key : keys) {
      if (k.value == key) break;
      ++j;
    }
    if (j == keys.size()) {
      std::vector<std::string> cands;
      for (std::string_view key : keys) cands.emplace_back(key);
      const std::string hint = closest_match(std::string(k.value), cands);
      error(k, "unknown field " + quote(k.value) + " in " + what + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    } else if (out[j] != nullptr) {
      error(k, what + ": field " + quote(k.value) + " is given twice");
    } else {
      out[j] = &kids[i + 1];
    }
  }
  for (std::string_view r : required) {
    std::size_t j = 0;
    for (std::string_view key : keys) {
      if (key == r) break;
      ++j;
    }
    if (out[j] == nullptr) error(map, what + " is missing the required field '" + std::string(r) + "'");
  }
  return out;
}

std::span<const YamlReader::Node> YamlReader::list(const Node* n, const What& what) {
  if (n == nullptr) return {};
  if (n->kind == Kind::null) return {};
  if (n->kind != Kind::sequence) {
    error(*n, what + " must be a list, got " + describe(*n));
    return {};
  }
  return doc_.children(*n);
}

const YamlReader::Node* YamlReader::scalar(const Node* n, const What& what, const char* field, const char* expected) {
  if (n == nullptr) return nullptr;
  if (n->kind != Kind::scalar) {
    error(*n, what + ": '" + field + "' must be " + expected + ", got " + describe(*n));
    return nullptr;
  }
  return n;
}

std::optional<std::uint64_t> YamlReader::uint_field(const Node* n, const What& what, const char* field,
                                        std::uint64_t min, std::uint64_t max) {
  const Node* s = scalar(n, what, field, "a whole number");
  if (s == nullptr) return std::nullopt;
  std::uint64_t v = 0;
  const char* b = s->value.data();
  const char* e = b + std::string(s->value).size();
  const auto [ptr, ec] = std::from_chars(b, e, v);
  if (s->quoted || ec == std::errc::invalid_argument || ptr != e) {
    if (!s->value.empty() && s->value[0] == '-') {
      error(*s, what + ": '" + field + "' must be at least " + std::to_string(min) + ", got " + std::string(s->value));
    } else {
      error(*s, what + ": '" + field + "' must be a whole number, got " + describe(*s));
    }
    return std::nullopt;
  }
  if (ec == std::errc::result_out_of_range || v > max) {
    error(*s, what + ": '" + field + "' is " + std::string(s->value) + ", more than the limit of " + std::to_string(max));
    return std::nullopt;
  }
  if (v < min) {
    error(*s, what + ": '" + field + "' must be at least " + std::to_string(min) + ", got " + std::string(s->value));
    return std::nullopt;
  }
  return v;
}

std::optional<Nanos> YamlReader::duration_field(const Node* n, const What& what, const char* field, Nanos min, Nanos max) {
  const Node* s = scalar(n, what, field, "a duration like 1.5ms or 250us");
  if (s == nullptr) return std::nullopt;
  const auto v = parse_duration(s->value);
  if (!v) {
    error(*s, what + ": '" + field + "' must be a duration like 1.5ms or 250us, got " + describe(*s));
    return std::nullopt;
  }
  if (*v < min) {
    error(*s, what + ": '" + field + "' must be " + (min == 0 ? "zero or more" : "positive") + ", got " + std::string(s->value));
    return std::nullopt;
  }
  if (*v > max) {
    error(*s, what + ": '" + field + "' is " + std::string(s->value) + ", more than the limit of " + human_duration(max));
    return std::nullopt;
  }
  return v;
}

std::optional<Bytes> YamlReader::bytes_field(const Node* n, const What& what, const char* field, Bytes max) {
  const Node* s = scalar(n, what, field, "a size in bytes like 1048576 or 4MiB");
  if (s == nullptr) return std::nullopt;
  if (!s->value.empty() && s->value[0] == '-') {
    error(*s, what + ": '" + field + "' must be positive, got " + std::string(s->value));
    return std::nullopt;
  }
  const auto v = parse_bytes(s->value);
  if (!v) {
    error(*s, what + ": '" + field + "' must be a whole number of bytes like 1048576 or 4MiB, got " + describe(*s));
    return std::nullopt;
  }
  if (*v == 0) {
    error(*s, what + ": '" + field + "' must be positive, got 0");
    return std::nullopt;
  }
  if (*v > max) {
    error(*s, what + ": '" + field + "' is " + std::string(s->value) + ", more than the limit of " + human_bytes(max));
    return std::nullopt;
  }
  return v;
}

std::optional<std::string> YamlReader::string_field(const Node* n, const What& what, const char* field) {
  const Node* s = scalar(n, what, field, "a string");
  if (s == nullptr) return std::nullopt;
  return std::string(s->value);
}

std::optional<std::string> YamlReader::id_field(const Node* n, const What& what, const char* field) {
  const Node* s = scalar(n, what, field, "a name");
  if (s == nullptr) return std::nullopt;
  if (!valid_id(s->value)) {
    error(*s, what + ": '" + field + "' " + describe(*s) +
                  " is not a valid name: use 1 to 256 letters, digits and _ . - / #");
    return std::nullopt;
  }
  return std::string(s->value);
}

std::optional<bool> YamlReader::bool_field(const Node* n, const What& what, const char* field) {
  const Node* s = scalar(n, what, field, "true or false");
  if (s == nullptr) return std::nullopt;
  if (!s->quoted && s->value == "true") return true;
  if (!s->quoted && s->value == "false") return false;
  error(*s, what + ": '" + field + "' must be true or false, got " + describe(*s));
  return std::nullopt;
}


}  // namespace tw
