// Reading, validating and writing traffic profiles (YAML, docs/profile-format.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tensorwire/core/diagnostic.hpp"
#include "tensorwire/core/profile.hpp"

namespace tw {

struct ProfileLoad {
  std::optional<Profile> profile;  // set only when there are no diagnostics
  Diagnostics diagnostics;  // every problem found, in file order, at most kMaxDiagnostics
  bool ok() const { return profile.has_value(); }
};


// Loads and fully validates a profile, including an observed-timings sidecar file
// named in it (resolved relative to the profile's folder). Never throws for bad
// input: problems come back as diagnostics "file:line:col: reason".
ProfileLoad load_profile_file(const std::string& path);

// The same, for callers that stop at the first bad file: throws InputError with
// all diagnostics.
Profile load_profile_or_throw(const std::string& path);

// The same from text; `file` names it in diagnostics, `base_dir` resolves sidecars.
ProfileLoad load_profile_text(std::string_view text, const std::string& file, const std::string& base_dir = ".");

// Canonical YAML: one op per line, durations in exact units. load(write(p)) == p.
std::string write_profile_yaml(const Profile& profile);

// Writes atomically (temp file, then rename). Throws std::runtime_error naming the
// path and the reason (e.g. a full disk) on failure.
void save_profile(const Profile& profile, const std::string& path);

// The same, with observed op timings beyond `inline_limit` rows written to a CSV
// sidecar next to the profile (STEM.observed.csv, named in `observed.ops_file`).
// Returns the sidecar's path, or "" when the timings stayed inline.
std::string save_profile_with_sidecar(const Profile& profile, const std::string& path, std::size_t inline_limit);

// Writes `text` to `path` atomically; throws std::runtime_error on failure.
void write_file_atomic(const std::string& path, std::string_view text);

// The same for a file that holds a secret (a run's token): readable by its owner
// only (mode 0600) from its creation on, and not written through a symlink.
void write_private_file_atomic(const std::string& path, std::string_view text);

// "recv:ID@-K" and friends: the textual form of a dependency.
std::string dependency_ref(const Profile& profile, const Dependency& dep);

}  // namespace tw
