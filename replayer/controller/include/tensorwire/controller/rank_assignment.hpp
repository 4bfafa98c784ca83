// Which agent gets which rank, once every agent said hello. Pure.
#pragma once

#include <optional>
#include <vector>

#include "tensorwire/core/profile.hpp"

namespace tw {

// `hints[i]` is the rank hint (the launcher's placement) of the i-th agent in
// order of arrival. Hints are honoured first, in order of arrival (a second
// agent with the same hint, or a hint out of range, is treated as having none);
// the others fill the free ranks in order of arrival. Returns each agent's rank,
// nullopt for agents beyond `ranks`.
std::vector<std::optional<RankId>> assign_ranks(const std::vector<std::optional<RankId>>& hints, std::size_t ranks);

}  // namespace tw
