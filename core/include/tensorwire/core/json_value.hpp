// A JSON value read as exactly the C++ type it must be. nlohmann's get<T>()
// converts silently: a float into an integer (undefined behaviour out of the
// integer's range, which a forged message triggers), a large integer into a
// smaller type (truncated). Readers of untrusted JSON (control messages, run
// files) use this instead. Pure; any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tw {

template <typename T>
struct IsVector : std::false_type {};
template <typename E>
struct IsVector<std::vector<E>> : std::true_type {};

// `v` as T when it holds exactly such a value: integers only from JSON integers
// within T's range, floating point from any number, bool from a boolean,
// strings from strings, vectors from arrays of such elements; else nullopt.
template <typename T>
std::optional<T> json_exact(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return std::nullopt;
    return v.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (!std::in_range<T>(u)) return std::nullopt;
      return static_cast<T>(u);
    }
    if (!v.is_number_integer()) return std::nullopt;
    const auto i = v.get<std::int64_t>();
    if (!std::in_range<T>(i)) return std::nullopt;
    return static_cast<T>(i);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return std::nullopt;
    return v.get<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return std::nullopt;
    return v.get<std::string>();
  } else {
    static_assert(IsVector<T>::value, "json_exact: bool, integers, floating point, strings and vectors of them");
    if (!v.is_array()) return std::nullopt;
    T out;
    out.reserve(v.size());
    for (const auto& e : v) {
      auto x = json_exact<typename T::value_type>(e);
      if (!x) return std::nullopt;
      out.push_back(std::move(*x));
    }
    return out;
  }
}

}  // namespace tw
