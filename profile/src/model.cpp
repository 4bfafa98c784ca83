#include "tensorwire/profile/model.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "tensorwire/core/profile.hpp"
#include "tensorwire/core/yaml_reader.hpp"

namespace tw {

// Defined in the generated bundled_models.cpp.
const std::vector<std::pair<std::string_view, std::string_view>>& bundled_model_files();

Bytes Model::total_bytes() const {
  Bytes b = 0;
  for (const auto& t : tensors) b += t.bytes;
  return b;
}

std::uint64_t Model::total_elements() const {
  std::uint64_t n = 0;
  for (const auto& t : tensors) n += t.elements;
  return n;
}

std::vector<Layer> Model::layers() const {
  std::vector<Layer> out;
  std::map<std::string, int> seen;  // a module whose tensors are not adjacent gets "#2", "#3"...
  std::string current;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::string& n = tensors[i].name;
    const auto dot = n.rfind('.');
    std::string layer = dot == std::string::npos ? n : n.substr(0, dot);
    if (out.empty() || current != layer) {
      current = layer;
      const int k = ++seen[layer];
      out.push_back({k == 1 ? layer : layer + "#" + std::to_string(k), i, 0, 0});
    }
    ++out.back().count;
    out.back().bytes += tensors[i].bytes;
  }
  return out;
}

std::size_t dtype_size(const std::string& dtype) {
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16") return 2;
  if (dtype == "float64" || dtype == "int64") return 8;
  if (dtype == "int8" || dtype == "uint8" || dtype == "bool") return 1;
  return 0;
}

std::vector<std::string> bundled_models() {
  std::vector<std::string> names;
  for (const auto& [name, text] : bundled_model_files()) names.emplace_back(name);
  return names;
}

namespace {

class ModelReader : public YamlReader {
 public:
  using YamlReader::YamlReader;

  Model read() {
    Model m;
    const Node& root = doc_.root();
    const auto f = fields(root, "the model", {"model", "parameters", "dtype", "fwd", "bwd", "tensors"}, {"model", "tensors"});
    if (root.kind != Kind::map) return m;
    if (auto v = id_field(f[0], "the model", "model")) m.name = *v;
    const auto params = uint_field(f[1], "the model", "parameters", 1, std::uint64_t{1} << 44);
    if (auto v = string_field(f[2], "the model", "dtype")) {
      if (dtype_size(*v) == 0) error(*f[2], "the model: unknown dtype " + quote(*v));
      else m.dtype = *v;
    }
    if (auto v = duration_field(f[3], "the model", "fwd", 1, limits::kMaxDuration)) m.fwd = *v;
    if (auto v = duration_field(f[4], "the model", "bwd", 1, limits::kMaxDuration)) m.bwd = *v;
    const auto items = list(f[5], "'tensors'");
    if (f[5] != nullptr && items.empty()) error(*f[5], "'tensors' is empty: a model needs at least one tensor");
    std::size_t timed = 0;
    // A profile names each tensor once: two of a name made a profile that
    // `profile validate` refused.
    std::unordered_map<std::string, int> first_line;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const std::string what = "tensor entry " + std::to_string(i);
      const auto g = fields(items[i], what, {"name", "shape", "elements", "dtype", "fwd", "bwd"}, {"name"});
      ModelTensor t;
      if (auto v = string_field(g[0], what, "name")) t.name = *v;
      else continue;
      const std::string twhat = "tensor " + quote(t.name);
      if (const auto [first, fresh] = first_line.try_emplace(t.name, g[0]->line); !fresh) {
        error(*g[0], "tensor name " + quote(t.name) + " is used twice (first at line " + std::to_string(first->second) + ")");
        continue;
      }
      if ((g[1] == nullptr) == (g[2] == nullptr)) {
        error(items[i], twhat + " needs exactly one of 'shape' and 'elements'");
        continue;
      }
      if (g[1] != nullptr) {
        const auto dims = list(g[1], twhat + ": 'shape'");
        std::uint64_t n = 1;
        bool ok = g[1]->kind == Kind::sequence;
        for (const Node& d : dims) {
          const auto v = uint_field(&d, twhat, "shape", 1, std::uint64_t{1} << 40);
          if (!v) {
            ok = false;
            break;
          }
          // Checked: [2^32, 2^32] wrapped to 0 elements and wrote `bytes: 0`.
          if (__builtin_mul_overflow(n, *v, &n) || n > (std::uint64_t{1} << 40)) {
            error(d, twhat + " has more than 2^40 elements");
            ok = false;
            break;
          }
        }
        if (!ok) continue;
        t.elements = n;
      } else if (auto v = uint_field(g[2], twhat, "elements", 1, std::uint64_t{1} << 40)) {
        t.elements = *v;
      } else {
        continue;
      }
      t.dtype = m.dtype;
      if (auto v = string_field(g[3], twhat, "dtype")) {
        if (dtype_size(*v) == 0) error(*g[3], twhat + ": unknown dtype " + quote(*v));
        else t.dtype = *v;
      }
      // At most what a profile's tensor may hold (its 'bytes'): a larger one made a
      // profile that `profile validate` refused. It also keeps the model's sums
      // from wrapping: a list (2 GiB at most) has fewer than 2^26 entries of more
      // than 32 bytes each, each of 2^36 bytes at most.
      if (__builtin_mul_overflow(t.elements, dtype_size(t.dtype), &t.bytes) || t.bytes > limits::kMaxMessageBytes) {
        error(g[1] != nullptr ? *g[1] : *g[2], twhat + " holds " + std::to_string(t.elements) + " elements of " + t.dtype +
                                                   ", more than the limit of " + human_bytes(limits::kMaxMessageBytes) + " a tensor may hold");
        continue;
      }
      if (auto v = duration_field(g[4], twhat, "fwd", 0, limits::kMaxDuration)) t.fwd = *v;
      if (auto v = duration_field(g[5], twhat, "bwd", 0, limits::kMaxDuration)) t.bwd = *v;
      if (t.fwd && t.bwd) ++timed;
      else if (t.fwd || t.bwd) error(items[i], twhat + " gives only one of 'fwd' and 'bwd'");
      m.tensors.push_back(std::move(t));
    }
    if (timed != 0 && timed != m.tensors.size()) {
      error(*f[5], "either every tensor gives 'fwd' and 'bwd' or none does (" + std::to_string(timed) + " of " +
                       std::to_string(m.tensors.size()) + " do)");
    }
    if (params && diags_.empty() && *params != m.total_elements()) {
      error(*f[1], "the model: 'parameters' is " + std::to_string(*params) + " but the tensors hold " +
                       std::to_string(m.total_elements()));
    }
    return m;
  }
};

}  // namespace

Model load_model_text(const std::string& text, const std::string& file) { return read_yaml_or_throw<ModelReader>(text, file); }

Model load_model(const std::string& name_or_path) {
  for (const auto& [name, text] : bundled_model_files()) {
    if (name == name_or_path) return load_model_text(std::string(text), "traffic_profiles/models/" + std::string(name) + ".yaml");
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(name_or_path, ec)) {
    std::string names;
    for (const auto& n : bundled_models()) names += (names.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown model '" + name_or_path + "': give a bundled model (" + names +
                                ") or the path of a tensor-list file");
  }
  return load_model_text(read_text_file(name_or_path), name_or_path);
}

}  // namespace tw
