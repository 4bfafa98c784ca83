// Opening the files tensorwire reads (profiles, sidecars, traces, records, run
// and summary JSON), and the paths other files name: only regular files (never
// a device, a FIFO or a directory, which read forever or block), at most a size
// that is plainly a mistake beyond, and a path named inside a file is taken
// relative to that file's directory. Every error names the file.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <new>
#include <string>
#include <string_view>

namespace tw {

namespace limits {
inline constexpr std::uint64_t kMaxJsonFile = 256ull << 20;      // run.json, trace sidecars
// rank-R.json: its iteration times take about 47 bytes each, 470 MB for the
// most iterations a run may have (kMaxIterations).
inline constexpr std::uint64_t kMaxSummaryFile = 1ull << 30;
inline constexpr std::uint64_t kMaxProfileFile = 2ull << 30;     // a profile's YAML
inline constexpr std::uint64_t kMaxDataFile = 64ull << 30;       // records, traces, sidecar CSV, pcap
inline constexpr std::uint64_t kMaxChromeTrace = 4ull << 30;    // a profiler's Chrome trace (JSON, parsed whole)
}  // namespace limits

// "" if `path` is a regular file of at most `max_bytes` bytes (its size then in
// *size), else why not: "cannot open: No such file or directory", "is a
// directory", "is not a regular file", "is 3.1 GiB, more than the 2.0 GiB a
// ... may be".
std::string data_file_problem(const std::string& path, std::uint64_t max_bytes, std::uint64_t* size = nullptr);

// The file opened for reading (binary), or std::runtime_error "path: reason".
std::ifstream open_data_file(const std::string& path, std::uint64_t max_bytes, std::uint64_t* size = nullptr);

// The whole file, at most `max_bytes` of it also if it grows while read, or
// std::runtime_error "path: reason".
std::string read_data_file_text(const std::string& path, std::uint64_t max_bytes);

// A JSON document from a file, or std::runtime_error "path: reason" (not a
// regular file, too large, "not valid JSON: ..." with the byte where it broke).
nlohmann::json read_json_file(const std::string& path, std::uint64_t max_bytes = limits::kMaxJsonFile);

// A path named inside the file `by` (a run's summary naming its profile): taken
// relative to `by`'s directory unless absolute.
std::string path_named_by(const std::string& by, const std::string& named);

// Checked fields of a JSON object read from `file`; each throws
// std::runtime_error "file: 'key' must be ..., not VALUE" when the field is of
// the wrong type or out of range, and returns `fallback` when it is missing.
std::uint64_t json_count(const nlohmann::json& j, std::string_view key, const std::string& file, std::uint64_t most,
                         std::uint64_t fallback = 0);
std::int64_t json_int(const nlohmann::json& j, std::string_view key, const std::string& file, std::int64_t fallback = 0);
bool json_bool(const nlohmann::json& j, std::string_view key, const std::string& file, bool fallback = false);
double json_number(const nlohmann::json& j, std::string_view key, const std::string& file, double fallback = 0);
std::string json_string(const nlohmann::json& j, std::string_view key, const std::string& file, std::string fallback = "");

// The text of a JSON library error without its "[json.exception.type_error.302] " tag.
std::string json_error_text(const nlohmann::json::exception& e);

// JSON text of `j` for output, without a final newline: on one line (indent -1),
// or as nlohmann::json::dump(indent) lays it out (an object's member or an
// array's element a line) except that an array of scalars (numbers, strings,
// booleans, nulls) stays on one line: a run's summary lists each iteration's
// [start, end], at a line each instead of four (200 000 iterations: 9.4 MB, not
// 13.2). Strings that are not UTF-8 (names taken from a traced job, for one) come
// out with U+FFFD in place of their bad bytes instead of failing the whole output.
std::string json_text(const nlohmann::json& j, int indent = -1);

// A JSON object written member by member, with arrays whose elements are given
// one at a time: a report of a million messages is written as it goes instead of
// held as one document (an object of a dozen members costs about a kilobyte as
// nlohmann::json). Laid out as json_text(object, indent) would (indent 0 or
// more), but for two things: members come in the order given (nlohmann::json
// sorts them), and an array given element by element has an element a line even
// if they are scalars. Text goes to `out` in pieces of about a megabyte, and the
// rest at finish(), which closes the object.
class JsonObjectWriter {
 public:
  using Sink = std::function<void(std::string_view)>;
  explicit JsonObjectWriter(Sink out, int indent = 2);

  void member(std::string_view key, const nlohmann::json& value);
  // An array member: begin_array, its elements, end_array.
  void begin_array(std::string_view key);
  void element(const nlohmann::json& value);
  void end_array();
  void finish();

 private:
  void key(std::string_view key);
  void flush_if_full();

  Sink out_;
  std::size_t indent_;
  std::string buffer_;
  bool first_member_ = true;
  bool first_element_ = true;
};

// Runs f(); a JSON library error it throws (a field of the wrong type) becomes
// std::runtime_error "file: reason", so that every such error names its file.
template <typename F>
decltype(auto) with_file(const std::string& file, F&& f) {
  try {
    return f();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file + ": " + json_error_text(e));
  }
}

// Runs f(); running out of memory on the way (a file whose counts or size ask
// for more than this machine has) becomes std::runtime_error naming the file,
// where it said only "out of memory". What f() had built is freed before the
// message is.
template <typename F>
decltype(auto) naming_file_on_oom(const std::string& file, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw std::runtime_error(file + ": out of memory reading it: it asks for more than this machine has");
  }
}

}  // namespace tw
