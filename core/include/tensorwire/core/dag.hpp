// Graph algorithms on a profile's op DAG (one iteration, same-iteration edges).
#pragma once

#include <span>
#include <vector>

#include "tensorwire/core/profile.hpp"

namespace tw {

// Adjacency as predecessor lists: preds[v] are the ops v waits for in the same
// iteration (iterations_back == 0).
std::vector<std::vector<OpIndex>> same_iteration_predecessors(const Profile& profile);

// One cycle per strongly connected component with more than one op (or a self
// loop), each given as the ops along it, first op repeated at the end. Iterative:
// safe on graphs of millions of ops.
std::vector<std::vector<OpIndex>> find_cycles(std::span<const std::vector<OpIndex>> preds);

// A topological order of the ops, or empty if there is a cycle (and ops exist).
std::vector<OpIndex> topological_order(std::span<const std::vector<OpIndex>> preds);

}  // namespace tw
