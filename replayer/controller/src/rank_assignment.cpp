#include "tensorwire/controller/rank_assignment.hpp"

namespace tw {

std::vector<std::optional<RankId>> assign_ranks(const std::vector<std::optional<RankId>>& hints, std::size_t ranks) {
  std::vector<std::optional<RankId>> out(hints.size());
  std::vector<bool> taken(ranks, false);
  for (std::size_t i = 0; i < hints.size(); ++i) {
    const auto& h = hints[i];
    if (h && *h < ranks && !taken[*h]) {
      taken[*h] = true;
      out[i] = *h;
    }
  }
  std::size_t next = 0;
  for (std::size_t i = 0; i < hints.size(); ++i) {
    if (out[i]) continue;
    while (next < ranks && taken[next]) ++next;
    if (next == ranks) break;
    taken[next] = true;
    out[i] = static_cast<RankId>(next);
  }
  return out;
}

}  // namespace tw
