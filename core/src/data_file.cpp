#include "tensorwire/core/data_file.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string_view>

#include "tensorwire/core/units.hpp"

namespace tw {

std::string data_file_problem(const std::string& path, std::uint64_t max_bytes, std::uint64_t* size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::string("cannot open: ") + std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return "is a directory";
  if (!S_ISREG(st.st_mode)) return "is not a regular file";
  const auto bytes = static_cast<std::uint64_t>(st.st_size);
  if (bytes > max_bytes) {
    return "is " + human_bytes(static_cast<Bytes>(bytes)) + ", more than the " + human_bytes(static_cast<Bytes>(max_bytes)) +
           " such a file may be";
  }
  if (size) *size = bytes;
  return "";
}

std::ifstream open_data_file(const std::string& path, std::uint64_t max_bytes, std::uint64_t* size) {
  const std::string bad = data_file_problem(path, max_bytes, size);
  if (!bad.empty()) throw std::runtime_error(path + ": " + bad);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  return in;
}

std::string read_data_file_text(const std::string& path, std::uint64_t max_bytes) {
  std::uint64_t size = 0;
  std::ifstream in = open_data_file(path, max_bytes, &size);
  std::string text;
  text.reserve(static_cast<std::size_t>(size));
  std::array<char, 1 << 16> buffer;
  while (in.read(buffer.data(), buffer.size()) || in.gcount() > 0) {
    text.append(buffer.data(), static_cast<std::size_t>(in.gcount()));
    if (text.size() > max_bytes) throw std::runtime_error(path + ": grew past " + human_bytes(static_cast<Bytes>(max_bytes)) + " while read");
  }
  if (in.bad()) throw std::runtime_error(path + ": cannot read: " + std::strerror(errno));
  return text;
}

namespace {

// Whether JSON text opens more than `most` arrays and objects inside one
// another (brackets within strings do not count). Malformed text is the
// parser's to report; this only bounds what parsing it could build.
bool nests_deeper(std::string_view text, int most) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > most) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

nlohmann::json read_json_file(const std::string& path, std::uint64_t max_bytes) {
  // Read whole, its nesting bounded by a scan, then parsed without a callback:
  // nlohmann's parser with one (which refused nesting as it opened) takes time
  // that grows faster than the file, 9 times the parser's alone for a 70 MB
  // Chrome trace (docs/BENCHMARKS.md, Importing a profiler's Chrome trace).
  const std::string text = read_data_file_text(path, max_bytes);
  // Nesting is refused before parsing: 50 million '[' took 3.7 GB before the
  // parser found the file's end. tensorwire's own files nest a few levels.
  constexpr int kMaxDepth = 64;
  if (nests_deeper(text, kMaxDepth)) throw std::runtime_error(path + ": nesting deeper than " + std::to_string(kMaxDepth) + " levels");
  return naming_file_on_oom(path, [&] {
    try {
      return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      throw std::runtime_error(path + ": not valid JSON: " + json_error_text(e));
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
  });
}

std::string json_error_text(const nlohmann::json::exception& e) {
  const std::string what = e.what();
  const auto at = what.find("] ");
  return what.starts_with("[json.exception.") && at != std::string::npos ? what.substr(at + 2) : what;
}

namespace {

std::string one_line(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void write_json(const nlohmann::json& j, std::size_t indent, std::size_t depth, std::string& out) {
  if (!j.is_structured() || j.empty() ||
      (j.is_array() && std::none_of(j.begin(), j.end(), [](const nlohmann::json& e) { return e.is_structured(); }))) {
    out += one_line(j);
    return;
  }
  const bool object = j.is_object();
  out += object ? "{\n" : "[\n";
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it != j.begin()) out += ",\n";
    out.append((depth + 1) * indent, ' ');
    if (object) {
      out += one_line(nlohmann::json(it.key()));
      out += ": ";
    }
    write_json(*it, indent, depth + 1, out);
  }
  out += '\n';
  out.append(depth * indent, ' ');
  out += object ? '}' : ']';
}

}  // namespace

std::string json_text(const nlohmann::json& j, int indent) {
  if (indent < 0) return one_line(j);
  std::string out;
  write_json(j, static_cast<std::size_t>(indent), 0, out);
  return out;
}

JsonObjectWriter::JsonObjectWriter(Sink out, int indent) : out_(std::move(out)), indent_(static_cast<std::size_t>(std::max(indent, 0))) {
  buffer_ = "{";
}

void JsonObjectWriter::key(std::string_view key) {
  buffer_ += first_member_ ? "\n" : ",\n";
  first_member_ = false;
  buffer_.append(indent_, ' ');
  buffer_ += one_line(nlohmann::json(std::string(key)));
  buffer_ += ": ";
}

void JsonObjectWriter::member(std::string_view k, const nlohmann::json& value) {
  key(k);
  write_json(value, indent_, 1, buffer_);
  flush_if_full();
}

void JsonObjectWriter::begin_array(std::string_view k) {
  key(k);
  buffer_ += '[';
  first_element_ = true;
}

void JsonObjectWriter::element(const nlohmann::json& value) {
  buffer_ += first_element_ ? "\n" : ",\n";
  first_element_ = false;
  buffer_.append(2 * indent_, ' ');
  write_json(value, indent_, 2, buffer_);
  flush_if_full();
}

void JsonObjectWriter::end_array() {
  if (!first_element_) {
    buffer_ += '\n';
    buffer_.append(indent_, ' ');
  }
  buffer_ += ']';
}

void JsonObjectWriter::finish() {
  buffer_ += first_member_ ? "}" : "\n}";
  out_(buffer_);
  buffer_.clear();
}

void JsonObjectWriter::flush_if_full() {
  if (buffer_.size() < (1U << 20)) return;
  out_(buffer_);
  buffer_.clear();
}

std::string path_named_by(const std::string& by, const std::string& named) {
  const std::filesystem::path p(named);
  if (p.is_absolute()) return named;
  const std::filesystem::path dir = std::filesystem::path(by).parent_path();
  return dir.empty() ? named : (dir / p).string();
}

namespace {

const nlohmann::json* field(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrong(const std::string& file, std::string_view key, const std::string& must, const nlohmann::json& v) {
  std::string shown = json_text(v);
  if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
  throw std::runtime_error(file + ": '" + std::string(key) + "' must be " + must + ", not " + shown);
}

}  // namespace

std::uint64_t json_count(const nlohmann::json& j, std::string_view key, const std::string& file, std::uint64_t most,
                         std::uint64_t fallback) {
  const nlohmann::json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_number_unsigned() || v->get<std::uint64_t>() > most) {
    wrong(file, key, "a whole number from 0 to " + std::to_string(most), *v);
  }
  return v->get<std::uint64_t>();
}

std::int64_t json_int(const nlohmann::json& j, std::string_view key, const std::string& file, std::int64_t fallback) {
  const nlohmann::json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))) {
    wrong(file, key, "a whole number", *v);
  }
  return v->get<std::int64_t>();
}

bool json_bool(const nlohmann::json& j, std::string_view key, const std::string& file, bool fallback) {
  const nlohmann::json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) wrong(file, key, "true or false", *v);
  return v->get<bool>();
}

double json_number(const nlohmann::json& j, std::string_view key, const std::string& file, double fallback) {
  const nlohmann::json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_number()) wrong(file, key, "a number", *v);
  return v->get<double>();
}

std::string json_string(const nlohmann::json& j, std::string_view key, const std::string& file, std::string fallback) {
  const nlohmann::json* v = field(j, key);
  if (!v) return fallback;
  if (!v->is_string()) wrong(file, key, "a string", *v);
  return v->get<std::string>();
}

}  // namespace tw
