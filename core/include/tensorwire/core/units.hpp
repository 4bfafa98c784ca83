// Time and size units used throughout tensorwire: durations are signed nanoseconds,
// sizes are unsigned bytes. Parsing accepts the forms written in profiles ("1.5ms",
// "250us", "25MiB"); formatting produces forms that parse back to the same value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tw {

using Nanos = std::int64_t;
using Bytes = std::uint64_t;

inline constexpr Nanos kMicro = 1'000;
inline constexpr Nanos kMilli = 1'000'000;
inline constexpr Nanos kSecond = 1'000'000'000;

inline constexpr Bytes kKiB = 1024;
inline constexpr Bytes kMiB = 1024 * kKiB;
inline constexpr Bytes kGiB = 1024 * kMiB;

// Parses "<decimal><unit>" with unit ns, us, ms, s (or "0" alone). Negative values
// parse (the caller decides whether they are allowed); rounding is to the nearest
// nanosecond. Returns nullopt for anything else or on overflow.
std::optional<Nanos> parse_duration(std::string_view text);

// Parses a byte count: a plain integer, or "<decimal><unit>" with unit B, KB, MB,
// GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024). The value must be a
// whole number of bytes. Returns nullopt otherwise or on overflow.
std::optional<Bytes> parse_bytes(std::string_view text);

// Exact, parseable form: "1.5ms", "250us", "3s", "17ns".
std::string format_duration(Nanos ns);

// For people, rounded: "1.50 ms", "25.00 MiB", "3.2 Gb/s".
std::string human_duration(Nanos ns);
std::string human_bytes(Bytes bytes);
std::string human_rate(double bits_per_second);

// The nearest-rank percentile (q in [0, 1]; 1 is the maximum); 0 for no values.
Nanos percentile(std::vector<Nanos> values, double q);

}  // namespace tw
