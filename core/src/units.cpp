#include "tensorwire/core/units.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

namespace tw {

// 128-bit intermediates keep scaled arithmetic exact (a GCC/Clang extension).
__extension__ typedef unsigned __int128 U128;
namespace {

struct Decimal {
  bool negative = false;
  std::uint64_t mantissa = 0;  // all digits, the decimal point removed
  int fraction_digits = 0;
  std::string_view unit;
};

// Splits "[-]digits[.digits]unit". Rejects empty digit runs, more than 18
// significant digits and anything that is not a digit before the unit.
std::optional<Decimal> split_decimal(std::string_view text) {
  Decimal d;
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) {
    d.negative = text[i] == '-';
    ++i;
  }
  int digits = 0;
  bool seen_point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      if (digits == 18) return std::nullopt;
      if (digits > 0 || c != '0') ++digits;
      d.mantissa = d.mantissa * 10 + static_cast<std::uint64_t>(c - '0');
      if (seen_point) ++d.fraction_digits;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  const std::size_t digit_chars = i - (text.size() > 0 && (text[0] == '-' || text[0] == '+') ? 1 : 0);
  if (digit_chars == 0 || (seen_point && digit_chars == 1)) return std::nullopt;
  if (d.fraction_digits > 18) return std::nullopt;
  d.unit = text.substr(i);
  return d;
}

constexpr std::array<std::uint64_t, 19> kPow10 = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
    100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL,
    10000000000000ULL, 100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
    100000000000000000ULL, 1000000000000000000ULL};

// mantissa * scale / 10^fraction_digits, rounded to nearest; nullopt on overflow
// or, when exact is set, when the result is not whole.
std::optional<std::uint64_t> scale_decimal(const Decimal& d, std::uint64_t scale, bool exact) {
  const U128 product = static_cast<U128>(d.mantissa) * scale;
  const std::uint64_t div = kPow10[static_cast<std::size_t>(d.fraction_digits)];
  const U128 q = product / div;
  const U128 r = product % div;
  if (exact && r != 0) return std::nullopt;
  const U128 rounded = q + (2 * r >= div ? 1 : 0);
  if (rounded > std::numeric_limits<std::int64_t>::max()) return std::nullopt;
  return static_cast<std::uint64_t>(rounded);
}

}  // namespace

std::optional<Nanos> parse_duration(std::string_view text) {
  const auto d = split_decimal(text);
  if (!d) return std::nullopt;
  std::uint64_t scale = 0;
  if (d->unit == "ns") scale = 1;
  else if (d->unit == "us") scale = kMicro;
  else if (d->unit == "ms") scale = kMilli;
  else if (d->unit == "s") scale = kSecond;
  else if (d->unit.empty() && d->mantissa == 0) scale = 1;  // a bare zero needs no unit
  else return std::nullopt;
  const auto v = scale_decimal(*d, scale, false);
  if (!v) return std::nullopt;
  const auto ns = static_cast<Nanos>(*v);
  return d->negative ? -ns : ns;
}

std::optional<Bytes> parse_bytes(std::string_view text) {
  const auto d = split_decimal(text);
  if (!d || d->negative) return std::nullopt;
  struct Unit {
    std::string_view name;
    std::uint64_t scale;
  };
  static constexpr std::array<Unit, 10> kUnits = {{{"", 1},
                                                   {"B", 1},
                                                   {"KB", 1000},
                                                   {"MB", 1000 * 1000},
                                                   {"GB", 1000ULL * 1000 * 1000},
                                                   {"TB", 1000ULL * 1000 * 1000 * 1000},
                                                   {"KiB", kKiB},
                                                   {"MiB", kMiB},
                                                   {"GiB", kGiB},
                                                   {"TiB", 1024 * kGiB}}};
  for (const auto& u : kUnits) {
    if (u.name == d->unit) {
      if (u.scale == 1 && d->fraction_digits > 0) return std::nullopt;
      return scale_decimal(*d, u.scale, true);
    }
  }
  return std::nullopt;
}

std::string format_duration(Nanos ns) {
  if (ns == 0) return "0";
  std::string sign = ns < 0 ? "-" : "";
  // -INT64_MIN overflows; clamp (such values are rejected long before formatting).
  const std::uint64_t mag = ns < 0 ? static_cast<std::uint64_t>(-(ns + 1)) + 1 : static_cast<std::uint64_t>(ns);
  struct Unit {
    const char* name;
    std::uint64_t scale;
    int digits;
  };
  static constexpr std::array<Unit, 4> kUnits = {{{"s", 1'000'000'000, 9}, {"ms", 1'000'000, 6}, {"us", 1'000, 3}, {"ns", 1, 0}}};
  for (const auto& u : kUnits) {
    if (mag < u.scale) continue;
    std::string out = sign + std::to_string(mag / u.scale);
    std::uint64_t frac = mag % u.scale;
    if (frac != 0) {
      std::string f = std::to_string(frac);
      f.insert(0, static_cast<std::size_t>(u.digits) - f.size(), '0');
      while (!f.empty() && f.back() == '0') f.pop_back();
      out += "." + f;
    }
    return out + u.name;
  }
  return "0";
}

namespace {
std::string printf_string(const char* fmt, double v, const char* unit) {
  std::array<char, 64> buf{};
  std::snprintf(buf.data(), buf.size(), fmt, v, unit);
  return buf.data();
}
}  // namespace

std::string human_duration(Nanos ns) {
  const double v = static_cast<double>(ns);
  const double a = v < 0 ? -v : v;
  if (a >= 1e9) return printf_string("%.3f %s", v / 1e9, "s");
  if (a >= 1e6) return printf_string("%.2f %s", v / 1e6, "ms");
  if (a >= 1e3) return printf_string("%.2f %s", v / 1e3, "us");
  return printf_string("%.0f %s", v, "ns");
}

std::string human_bytes(Bytes bytes) {
  const double v = static_cast<double>(bytes);
  if (bytes >= kGiB) return printf_string("%.2f %s", v / static_cast<double>(kGiB), "GiB");
  if (bytes >= kMiB) return printf_string("%.2f %s", v / static_cast<double>(kMiB), "MiB");
  if (bytes >= kKiB) return printf_string("%.2f %s", v / static_cast<double>(kKiB), "KiB");
  return printf_string("%.0f %s", v, "B");
}

std::string human_rate(double bps) {
  if (bps >= 1e9) return printf_string("%.2f %s", bps / 1e9, "Gb/s");
  if (bps >= 1e6) return printf_string("%.2f %s", bps / 1e6, "Mb/s");
  if (bps >= 1e3) return printf_string("%.2f %s", bps / 1e3, "kb/s");
  return printf_string("%.0f %s", bps, "b/s");
}

Nanos percentile(std::vector<Nanos> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(k == 0 ? 0 : k - 1, v.size() - 1)];
}

}  // namespace tw
