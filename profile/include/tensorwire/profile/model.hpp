// A model's trainable tensors, the input of `profile synth`. Bundled lists live in
// traffic_profiles/models/ (and are compiled in); users may pass their own file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tensorwire/core/units.hpp"

namespace tw {

struct ModelTensor {
  std::string name;
  std::uint64_t elements = 0;
  std::string dtype;
  Bytes bytes = 0;
  std::optional<Nanos> fwd;  // measured compute times, when the list gives them
  std::optional<Nanos> bwd;
};

// Consecutive tensors sharing a module prefix ("layer1.0.conv1" for
// "layer1.0.conv1.weight"): the unit of forward and backward compute.
struct Layer {
  std::string name;
  std::size_t first = 0;  // tensor indices [first, first + count)
  std::size_t count = 0;
  Bytes bytes = 0;
};

struct Model {
  std::string name;
  std::string dtype = "float32";
  Nanos fwd = 0;  // default compute time per iteration
  Nanos bwd = 0;
  std::vector<ModelTensor> tensors;  // registration (forward) order

  Bytes total_bytes() const;
  std::uint64_t total_elements() const;
  std::vector<Layer> layers() const;
};

// Bytes per element of a dtype name (float32, float16, bfloat16, float64, int8...);
// 0 if unknown.
std::size_t dtype_size(const std::string& dtype);

// Names of the bundled models (resnet50, vgg16, bert-large, mlp).
std::vector<std::string> bundled_models();

// A bundled model by name, or a tensor-list file by path. Throws InputError with
// "file:line:col: reason" diagnostics for a malformed list, std::invalid_argument
// for an unknown name.
Model load_model(const std::string& name_or_path);
Model load_model_text(const std::string& text, const std::string& file);

}  // namespace tw
