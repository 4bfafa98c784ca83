// Compares two YamlDoc trees: kinds, scalar values and quoting, and the positions
// of scalars and collections (a null's position is where each parser happened to
// be; it is not compared). Used to check the fast path against yaml-cpp.
#pragma once

#include <string>

#include "tensorwire/core/yaml_doc.hpp"

namespace tw::test {

inline bool same_node(const YamlDoc& a, const YamlDoc::Node& x, const YamlDoc& b, const YamlDoc::Node& y, std::string* why) {
  auto fail = [&](const std::string& what) {
    if (why) {
      *why = what + " at " + std::to_string(x.line) + ":" + std::to_string(x.column) + " vs " + std::to_string(y.line) + ":" +
             std::to_string(y.column);
    }
    return false;
  };
  if (x.kind != y.kind) return fail(std::string("kind ") + YamlDoc::kind_name(x.kind) + " vs " + YamlDoc::kind_name(y.kind));
  if (x.kind == YamlDoc::Kind::null) return true;
  if (x.line != y.line || x.column != y.column) return fail("position");
  if (x.kind == YamlDoc::Kind::scalar) {
    if (x.value != y.value) return fail("value '" + std::string(x.value) + "' vs '" + std::string(y.value) + "'");
    if (x.quoted != y.quoted) return fail("quoting of '" + std::string(x.value) + "'");
    return true;
  }
  const auto xs = a.children(x);
  const auto ys = b.children(y);
  if (xs.size() != ys.size()) return fail("child count " + std::to_string(xs.size()) + " vs " + std::to_string(ys.size()));
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (!same_node(a, xs[i], b, ys[i], why)) return false;
  }
  return true;
}

inline bool same_tree(const YamlDoc& a, const YamlDoc& b, std::string* why = nullptr) {
  return same_node(a, a.root(), b, b.root(), why);
}

}  // namespace tw::test
